"""Diagnose a failed engine start: root error -> known failures -> upstream issues -> remedies.

The curated catalog (known_failures.json, seeded from real upstream issues with their URLs) is
read once; a match contributes its category, URLs and contract-aware remedies. Upstream search
is optional (offline -> catalog only, said so in `Diagnosis.search`).
"""

from __future__ import annotations

import json
import logging
import re
from functools import cache
from pathlib import Path

from infopt.specs.base import InputError
from infopt.specs.diagnosis import (
    Diagnosis,
    FailureCategory,
    IssueMatch,
    KnownFailure,
    Remedy,
)
from infopt.troubleshoot.github import search_issues
from infopt.troubleshoot.rootcause import root_error

CATALOG_PATH = Path(__file__).with_name("known_failures.json")

# Fallback categories when no catalog entry matches: distinctive words -> category.
_FALLBACK = [
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
def _compiled(path: str = str(CATALOG_PATH)) -> tuple[tuple[KnownFailure, re.Pattern[str]], ...]:
    return tuple((k, re.compile(k.pattern)) for k in load_catalog(path))


def match_catalog(root: str, context: list[str], engine: str) -> list[KnownFailure]:
    text = "\n".join([root, *context])
    return [k for k, p in _compiled() if (k.engine in (engine, "any") or engine == "unknown")
            and p.search(text)]


def diagnose_text(log_text: str, engine: str, *, search: bool = False,
                  github_url: str | None = None, github_token: str | None = None,
                  github_token_to_url: bool = False, log_path: str | None = None,
                  log: logging.Logger | logging.LoggerAdapter | None = None) -> Diagnosis:
    """`search`: ask GitHub (the root error's search terms leave the machine, see
    infopt.troubleshoot.github); `github_token_to_url`: trust `github_url` with the token;
    `log`: where the search's notice goes (a task's run logger)."""
    patterns = [p for k, p in _compiled() if k.engine in (engine, "any") or engine == "unknown"]
    root, _, context = root_error(log_text, patterns)
    known = match_catalog(root, context, engine)
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


def diagnose_file(path: str, engine: str, **kw) -> Diagnosis:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"log file '{path}' does not exist; pass the engine log to diagnose "
                         "(each trial's is under runs/<run-id>/trials/<trial>/engine.log)")
    return diagnose_text(p.read_text(errors="replace"), engine, log_path=str(p), **kw)


def contract_preserving_remedy(d: Diagnosis) -> Remedy | None:
    """The first remedy the optimizer may apply itself: it keeps the contract, is not a
    diagnostic-only setting, and says concretely which knobs/env to change."""
    for r in d.remedies:
        if r.preserves_contract and not r.diagnostic_only and (r.knob_changes or r.env_changes):
            return r
    return None
