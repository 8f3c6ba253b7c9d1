"""The drafter search: what can draft for the exact model under speculative decoding, found on
the hub through the shortlist's machinery (model search, every file read at a pinned commit)
and verified from metadata alone; no weights are downloaded here (the download gate decides
that later).

Three kinds, in the order an engine prefers them:
- MTP heads in the model's own checkpoint: `num_nextn_predict_layers` (DeepSeek-V3/R1/V3.2,
  GLM-4.5, MiMo) or `mtp_num_hidden_layers` (Qwen3.5, at the top level or in text_config), the
  keys vLLM's SpeculativeConfig.hf_config_override reads (vllm/config/speculative.py).
- EAGLE/EAGLE-3 heads: a one-layer Llama-architecture head trained on the target's hidden
  states. The speculators format names its target (`speculators_config.verifier.name_or_path`);
  the raw format (LlamaForCausalLMEagle3) does not, so it must declare the target as its
  base model on the hub and match its hidden size and vocabulary.
- Draft models: a smaller model whose tokenizer.json is the same file as the target's (equal
  LFS sha256 or git blob id), reading at most DRAFT_MAX_SHARE of the target's weight bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from infopt.model.hub import HubAccessError, fetch_model_facts, search_models
from infopt.model.profile import profile_model
from infopt.specs.base import InputError
from infopt.specs.checkpoint import HubModelFacts
from infopt.specs.drafters import Drafter, DrafterFinding, DrafterSearch
from infopt.specs.model import ModelProfile

# Architectures of EAGLE heads as vLLM's registry names them (_SPECULATIVE_DECODING_MODELS) and
# as the speculators library writes them.
EAGLE3_ARCHS = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator",
                "Eagle3DraftModel"}
EAGLE_ARCHS = {"EagleLlamaForCausalLM", "EagleLlama4ForCausalLM"}
# A draft model pays only when it is much cheaper than the target: drafting k tokens costs k
# draft steps per target verification (see infopt.engines.llamacpp.rules).
DRAFT_MAX_SHARE = 0.25
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
# DrafterFinding.kind's values (infopt.specs.drafters names no alias for them), so the kinds
# passed to _found and _rejected are checked against the field.
FindingKind = Literal["eagle3", "eagle", "draft_model", "unknown"]


def native_mtp(config: dict[str, Any] | None) -> Drafter | None:
    """The model's own multi-token-prediction layers, when its config declares any."""
    if not config:
        return None
    for cfg in (config, config.get("text_config") or {}):
        for key in MTP_KEYS:
            n = cfg.get(key)
            if isinstance(n, int) and n > 0:
                return Drafter("mtp", None, why=(
                    f"{key}={n} in the model's config.json: {n} multi-token-prediction "
                    "layer(s) ship in its own checkpoint (vLLM method mtp; SGLang EAGLE with "
                    "no draft path)"))
    return None


def _tokenizer_id(facts: HubModelFacts) -> str | None:
    f = facts.file("tokenizer.json")
    return None if f is None else (f.lfs_sha256 or f.blob_id)


def _weights_bytes(facts: HubModelFacts) -> int | None:
    return facts.safetensors.total_bytes if facts.safetensors else None


def _verifier(config: dict[str, Any]) -> str | None:
    spec = config.get("speculators_config") or {}
    return (spec.get("verifier") or {}).get("name_or_path")


def _eagle(base: HubModelFacts, cand: HubModelFacts, archs: set[str]) -> DrafterFinding:
    config = cand.config or {}
    kind: FindingKind = "eagle3" if archs & EAGLE3_ARCHS else "eagle"
    verifier = _verifier(config)
    layer = config.get("transformer_layer_config") or config
    hidden, vocab = layer.get("hidden_size"), layer.get("vocab_size")
    want = base.config or {}
    if verifier is not None:
        if verifier.lower() != base.repo_id.lower():
            return _rejected(cand, kind, f"trained for {verifier} "
                             "(speculators_config.verifier), not this model")
        link = f"speculators_config.verifier names {verifier}"
    elif base.repo_id.lower() in (b.lower() for b in cand.base_models):
        link = f"its model card declares base_model {base.repo_id}"
    else:
        return _rejected(cand, kind, "names no target: neither a speculators verifier nor a "
                         f"base_model of {base.repo_id} (declared: "
                         f"{', '.join(cand.base_models) or 'none'})")
    if hidden != want.get("hidden_size") or vocab != want.get("vocab_size"):
        return _rejected(cand, kind, f"hidden size {hidden} / vocabulary {vocab} against the "
                         f"target's {want.get('hidden_size')} / {want.get('vocab_size')}")
    return _found(cand, kind, f"{kind.upper()} head ({', '.join(sorted(archs))}): {link}; "
                  f"hidden size {hidden} and vocabulary {vocab} match the target")


def _draft_model(base: HubModelFacts, cand: HubModelFacts) -> DrafterFinding:
    mine, theirs = _tokenizer_id(base), _tokenizer_id(cand)
    if mine is None or theirs is None:
        return _rejected(cand, "draft_model", "no tokenizer.json to compare with the target's")
    if mine != theirs:
        return _rejected(cand, "draft_model", "another tokenizer (tokenizer.json differs from "
                         "the target's)")
    size, target = _weights_bytes(cand), _weights_bytes(base)
    if not size or not target:
        return _rejected(cand, "draft_model", "weight size unknown (no safetensors headers)")
    if size > DRAFT_MAX_SHARE * target:
        return _rejected(cand, "draft_model", f"{size / target:.0%} of the target's weight "
                         f"bytes: above the {DRAFT_MAX_SHARE:.0%} a draft model may take to "
                         "pay off")
    return _found(cand, "draft_model", f"the same tokenizer.json as the target (sha256 "
                  f"{mine[:12]}), {size / target:.1%} of its weight bytes")


def _found(cand: HubModelFacts, kind: FindingKind, why: str) -> DrafterFinding:
    return DrafterFinding(repo_id=cand.repo_id, commit_sha=cand.commit_sha, kind=kind,
                          verified=True, why=why)


def _rejected(cand: HubModelFacts, kind: FindingKind, why: str) -> DrafterFinding:
    return DrafterFinding(repo_id=cand.repo_id, commit_sha=cand.commit_sha, kind=kind,
                          verified=False, why=why)


def assess_drafter(base: HubModelFacts, cand: HubModelFacts) -> DrafterFinding | None:
    """A hub repository judged as a drafter of `base` (None: not a causal LM at all)."""
    archs = set((cand.config or {}).get("architectures") or [])
    if archs & (EAGLE3_ARCHS | EAGLE_ARCHS):
        return _eagle(base, cand, archs)
    if any(a.endswith("ForCausalLM") for a in archs):
        return _draft_model(base, cand)
    return None


def _family_author(base_repo: str) -> str:
    return base_repo.split("/")[0]


def search_drafters(base_repo: str, *, cache_dir: Path, revision: str | None = None,
                    endpoint: str | None = None, token: str | None = None,
                    search_limit: int = 100, workers: int = 4,
                    say: Callable[[str], None] | None = None) -> DrafterSearch:
    """Drafters of `base_repo`: its own MTP layers, EAGLE heads that declare it, and smaller
    models of its author with the same tokenizer. One unreadable repository is recorded as
    rejected, never fatal; an unreachable hub is an InputError (the caller decides)."""
    base = fetch_model_facts(base_repo, cache_dir=cache_dir, revision=revision,
                             endpoint=endpoint, token=token, read_weight_headers=True)
    endpoint = base.endpoint
    name = base_repo.split("/")[1]
    queries = {f"filter=base_model:{base_repo}": {"filter": f"base_model:{base_repo}"},
               f"search={name}": {"search": name},
               f"author={_family_author(base_repo)}": {"author": _family_author(base_repo)}}
    found: set[str] = set()
    for kwargs in queries.values():
        found |= {rid for rid in search_models(endpoint=endpoint, token=token,
                                               limit=search_limit, **kwargs)
                  if rid.lower() != base_repo.lower()}
    if say:
        say(f"drafters: {len(found)} repositories to check for {base_repo}")

    def one(rid: str) -> DrafterFinding | None:
        try:
            cand = fetch_model_facts(rid, cache_dir=cache_dir, endpoint=endpoint, token=token,
                                     gguf_max_bits=0)
        except InputError as exc:
            why = "not accessible" if isinstance(exc, HubAccessError) else "unreadable"
            return DrafterFinding(repo_id=rid, commit_sha=None, kind="unknown",
                                  verified=False, why=f"{why}: {str(exc)[:200]}")
        return assess_drafter(base, cand)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        judged = [f for f in pool.map(one, sorted(found)) if f is not None]
    mtp = native_mtp(base.config)
    return DrafterSearch(
        base_model=base.repo_id, base_commit_sha=base.commit_sha, endpoint=endpoint,
        queries=list(queries), native_mtp=mtp.why if mtp else None,
        drafters=[f for f in judged if f.verified], rejected=[f for f in judged
                                                              if not f.verified])


# The hub drafters' kinds, best first (the model's own MTP layers come before all of them).
KIND_ORDER = {"eagle3": 0, "eagle": 1, "draft_model": 2}


def _best_first(search: DrafterSearch) -> list[DrafterFinding]:
    return sorted(search.drafters, key=lambda f: (KIND_ORDER.get(f.kind, 3), f.repo_id))


def best_drafters(search: DrafterSearch) -> list[DrafterFinding]:
    """What is worth downloading: the best EAGLE head (EAGLE-3 before EAGLE) and the best
    draft model."""
    picks: dict[str, DrafterFinding] = {}
    for f in _best_first(search):
        picks.setdefault("head" if f.kind in ("eagle3", "eagle") else f.kind, f)
    return list(picks.values())


def ladder_drafters(search: DrafterSearch, local: dict[str, str] | None = None
                    ) -> tuple[Drafter, ...]:
    """The ladder's drafters, best kind first: the native MTP layers, EAGLE-3, EAGLE, then draft
    models; `local` maps a repository to its downloaded copy (a GGUF file or a folder)."""
    local = local or {}
    out = [Drafter("mtp", None, why=search.native_mtp)] if search.native_mtp else []
    for f in _best_first(search):
        out.append(Drafter(f.kind, local.get(f.repo_id), source=f.repo_id,
                           why=f"{f.repo_id}@{(f.commit_sha or '')[:12]}: {f.why}"))
    return tuple(out)


def check_draft_models(paths: list[str], target: ModelProfile) -> list[ModelProfile]:
    """The request's own draft models, profiled where the request is read: a bad path, or a
    vocabulary other than the model's (a different tokenizer: every draft would be
    rejected, or the engine refuses to start), is one paragraph naming the file."""
    out = []
    for i, path in enumerate(paths):
        draft = profile_model(path)
        mine, theirs = target.inspection.vocab_size, draft.inspection.vocab_size
        if mine != theirs:
            raise InputError(
                f"model.draft_models[{i}] ({path}) has a vocabulary of {theirs:,} tokens "
                f"against the model's {mine:,}: a draft model must share the model's tokenizer. "
                "Name a smaller model of the same family, or leave draft_models out.")
        out.append(draft)
    return out


def request_drafters(paths: list[str]) -> tuple[Drafter, ...]:
    """The request's draft models as the ladder's drafters (checked by check_draft_models)."""
    return tuple(Drafter("draft_model", p, why=f"{Path(p).name}, named by the request "
                         "(model.draft_models), the same vocabulary as the model")
                 for p in paths)
