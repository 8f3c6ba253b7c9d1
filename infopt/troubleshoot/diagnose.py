"""Diagnose a failed engine start: root error -> known failures -> upstream issues -> remedies.

The curated catalog (known_failures.json, seeded from real upstream issues with their URLs) is
read once; a match contributes its category, URLs and contract-aware remedies. Upstream search
is optional (offline -> catalog only, said so in `Diagnosis.search`).

What the optimizer does with a diagnosis: `contract_preserving_remedy` picks the knob/env change
it applies before starting once more; `route_remedy` picks the engine to start instead when the
failing one cannot serve the model on this machine (an architecture or a GPU its build lacks);
`upgrade_remedies` are what only a person (or a new image) can do: another build of the engine.
"""

from __future__ import annotations

import json
import logging
import re
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from infopt.specs.base import InputError
from infopt.specs.diagnosis import (
    Diagnosis,
    FailureCategory,
    IssueMatch,
    KnownFailure,
    Remedy,
    RemedyAction,
)
from infopt.specs.serving import AnyServingConfig, EngineName, same_config, with_knobs
from infopt.troubleshoot.github import search_issues
from infopt.troubleshoot.rootcause import normalize, root_error

CATALOG_PATH = Path(__file__).with_name("known_failures.json")

# The lines a KnownFailure.context_pattern is searched in: up to 60 lines of the root error's
# traceback above it, and 10 after it (a pasted log can put the failing frame below the
# message, as in vllm#7793).
NEAR_BEFORE, NEAR_AFTER = 60, 10

# Fallback categories when no catalog entry matches: distinctive words -> category.
_FALLBACK = [
    (r"NCCL error|ncclSystemError|ncclUnhandledCudaError|ncclInternalError",
     FailureCategory.DISTRIBUTED),
    (r"no kernel image is available", FailureCategory.UNSUPPORTED_HARDWARE),
    (r"(?i)out of memory|OutOfMemoryError|CUDA error: out of memory", FailureCategory.OOM),
    (r"(?i)address already in use|couldn't bind|Errno 98", FailureCategory.PORT_IN_USE),
    (r"(?i)unrecognized arguments|invalid argument|invalid choice|unknown argument",
     FailureCategory.BAD_ARGUMENT),
    (r"(?i)no such file|does not exist|not found|permission denied|failed to open",
     FailureCategory.MODEL_NOT_FOUND),
    (r"(?i)invalid magic|not a gguf|failed to load model|unexpected end of file|"
     r"HeaderTooLarge|safetensors", FailureCategory.NOT_A_MODEL),
    (r"(?i)segmentation fault|illegal instruction|core dumped|SIGSEGV|SIGILL",
     FailureCategory.CRASH),
    (r"(?i)KV cache|cache blocks", FailureCategory.KV_INSUFFICIENT),
    (r"(?i)max_model_len|context length|max_position_embeddings", FailureCategory.CONTEXT_TOO_LONG),
    (r"(?i)chat template|tokenizer", FailureCategory.TOKENIZER),
    (r"(?i)compute capability|not supported on|unsupported GPU", FailureCategory.UNSUPPORTED_HARDWARE),
    (r"(?i)quantization", FailureCategory.UNSUPPORTED_QUANTIZATION),
]


@cache
def load_catalog(path: str = str(CATALOG_PATH)) -> tuple[KnownFailure, ...]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return ()
    return tuple(KnownFailure.model_validate(d) for d in data)


@cache
def _compiled(path: str = str(CATALOG_PATH)
              ) -> tuple[tuple[KnownFailure, re.Pattern[str], re.Pattern[str] | None], ...]:
    return tuple((k, re.compile(k.pattern),
                  re.compile(k.context_pattern) if k.context_pattern else None)
                 for k in load_catalog(path))


def match_catalog(root: str, context: list[str], engine: str,
                  near: list[str] | None = None) -> list[KnownFailure]:
    """Catalog entries for this engine whose pattern matches the root error or its context;
    an entry with a context_pattern also needs it in `near` (the lines around the root error,
    the context when not given)."""
    text = "\n".join([root, *context])
    around = "\n".join(near if near is not None else [root, *context])
    return [k for k, p, q in _compiled()
            if (k.engine in (engine, "any") or engine == "unknown")
            and p.search(text) and (q is None or q.search(around))]


def diagnose_text(log_text: str, engine: str, *, search: bool = False,
                  github_url: str | None = None, github_token: str | None = None,
                  github_token_to_url: bool = False, log_path: str | None = None,
                  log: logging.Logger | logging.LoggerAdapter | None = None) -> Diagnosis:
    """`search`: ask GitHub (the root error's search terms leave the machine, see
    infopt.troubleshoot.github); `github_token_to_url`: trust `github_url` with the token;
    `log`: where the search's notice goes (a task's run logger)."""
    patterns = [p for k, p, _ in _compiled()
                if k.engine in (engine, "any") or engine == "unknown"]
    root, index, context = root_error(log_text, patterns)
    near = None
    if index is not None:
        lines = log_text.splitlines()
        near = [normalize(ln) for ln in lines[max(0, index - NEAR_BEFORE): index + NEAR_AFTER + 1]]
    known = match_catalog(root, context, engine, near)
    category = known[0].category if known else next(
        (c for pat, c in _FALLBACK if re.search(pat, root)), FailureCategory.UNKNOWN)
    matches = [IssueMatch(title=f"{k.id}: {k.summary}", url=u, score=1.0, source="catalog")
               for k in known for u in k.urls]
    remedies: list[Remedy] = [r for k in known for r in k.remedies]
    status = "offline: upstream search not requested; catalog only"
    if search and root:
        outcome = search_issues(root, engine, base_url=github_url, token=github_token,
                                token_to_url=github_token_to_url, log=log)
        status = outcome.status
        seen = {m.url for m in matches}
        matches += [m for m in outcome.matches if m.url not in seen]
    return Diagnosis(root_error=root, category=category, engine=engine, context=context,
                     matches=matches, remedies=remedies,
                     known_failure_ids=[k.id for k in known], search=status, log_path=log_path)


def diagnose_file(path: str, engine: str, **kw: Any) -> Diagnosis:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"log file '{path}' does not exist; pass the engine log to diagnose "
                         "(each trial's is under runs/<run-id>/trials/<trial>/engine.log)")
    return diagnose_text(p.read_text(errors="replace"), engine, log_path=str(p), **kw)


def apply_remedy(config: AnyServingConfig, remedy: Remedy) -> AnyServingConfig | None:
    """`config` with the remedy's knob and environment changes; None when one of its knobs
    does not exist on this engine (the remedy is another engine's). The environment becomes
    part of the configuration, so later trials, trial keys and rendered deployments carry it."""
    try:
        config = with_knobs(config, {**remedy.knob_changes,
                                     **{f"env.{n}": v for n, v in remedy.env_changes.items()}})
    except (ValueError, ValidationError):
        return None
    return config


def contract_preserving_remedy(d: Diagnosis, config: AnyServingConfig | None = None
                               ) -> Remedy | None:
    """The first remedy the optimizer may apply itself: it keeps the contract, is not a
    diagnostic-only setting, and says concretely which knobs/env to change. Given the `config`
    that failed, also one that applies to it (its knobs exist on this engine) and changes it
    (dropping --enable-torch-compile does nothing where it is off), so an "any" entry's remedy
    for another engine does not hide a later one that fits."""
    for r in d.remedies:
        if not (r.action is RemedyAction.CONFIGURE and r.preserves_contract
                and not r.diagnostic_only and (r.knob_changes or r.env_changes)):
            continue
        if config is not None:
            fixed = apply_remedy(config, r)
            if fixed is None or same_config(fixed, config):
                continue
        return r
    return None


def route_remedy(d: Diagnosis, candidates: list[EngineName] | list[str] | None = None
                 ) -> tuple[Remedy, EngineName] | None:
    """The engine to start instead, and the remedy that says so: the first route remedy that
    keeps the contract and names an engine other than the failing one that is among
    `candidates` (the plan's routes for this machine and model; None: any engine). A route that
    changes the checkpoint (llama.cpp needs a GGUF) is the caller's to propose, not to take."""
    allowed = None if candidates is None else {EngineName(c) for c in candidates}
    for r in d.remedies:
        if r.action is not RemedyAction.ROUTE or not r.preserves_contract or r.diagnostic_only:
            continue
        for engine in r.route_to:
            if engine.value != d.engine and (allowed is None or engine in allowed):
                return r, engine
    return None


def upgrade_remedies(d: Diagnosis) -> list[Remedy]:
    """Remedies that need another build or release of the failing engine: the optimizer cannot
    install one, so it reports them (with engine_version) instead of retrying."""
    return [r for r in d.remedies if r.action is RemedyAction.UPGRADE]


def next_steps(d: Diagnosis) -> str:
    """What the user can do when no knob fixes the start: the upgrade remedies (which build)
    and the routes (which engine, named the way a request asks for it); "" when none."""
    steps = [f"upgrade: {r.engine_version}" for r in upgrade_remedies(d)]
    routes = [e.value for r in d.remedies if r.action is RemedyAction.ROUTE
              for e in r.route_to if e.value != d.engine]
    if routes:
        steps.append("or serve it with another engine (request `engines: ["
                     + ", ".join(dict.fromkeys(routes)) + "]`)")
    return "; ".join(steps)

