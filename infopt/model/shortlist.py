"""Shortlist quantized checkpoints of one exact model: find them, verify them, rank them.

Find: the hub's `base_model:quantized:ORG/NAME` filter (repositories that declare the model as
their base) plus a name search (repositories that do not declare it). Verify each one from its
metadata, never its name (specification, "Select candidates": "A checkpoint's label is
insufficient"): quantization method, bits, group size and format from config.json
`quantization_config` / ModelOpt `hf_quant_config.json` (`parse_quantization`) or the GGUF header's
`general.file_type`; the safetensors dtypes must agree with that; same architecture (model_type,
architecture class, layers, hidden size, heads) and tokenizer (vocab size) as the base; producer,
license, revision sha. Match each to engine kernels on the target device (`support_matrix`).

Rank: by kernel tier on the device (native low-precision math > optimized kernel > fallback), then
provenance (the base model's own organization > a quantizer the engine docs point to > others),
then fit (a placeholder: the fit stage adds memory fit), then engine preference for the device.
The search defaults to checkpoints of at most 4 bits per weight, as the specification asks
("Default to a 4-bit weight candidate"); wider ones are listed in `rejected` with that reason.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from infopt.hardware.catalog import lowest_compute_capability
from infopt.model.hub import (
    DEFAULT_TIMEOUT_S,
    HubAccessError,
    fetch_model_facts,
    gguf_nominal_bits,
    gguf_type_from_name,
    search_models,
)
from infopt.model.quantization import format_of, parse_quantization
from infopt.model.support_matrix import kernel_paths, unsupported_reason
from infopt.specs.base import InputError
from infopt.specs.checkpoint import (
    CheckpointCandidate,
    DeviceKind,
    DeviceTarget,
    HubModelFacts,
    KernelPath,
    KernelTier,
    Provenance,
    RejectedCheckpoint,
    Shortlist,
)
from infopt.specs.checkpoint import (
    CheckpointFormat as F,
)
from infopt.specs.checkpoint import (
    RejectReason as R,
)
from infopt.specs.hardware import HardwareInventory
from infopt.specs.inspection import QuantizationInfo, QuantMethod
from infopt.specs.serving import EngineName

# Organizations whose quantized checkpoints engine documentation points users to.
KNOWN_QUANTIZERS: dict[str, str] = {
    # SGLang quantization docs: "visit Unsloth, NVIDIA ModelOpt or NeuralMagic collections".
    "nvidia": "https://docs.sglang.ai/advanced_features/quantization.html",
    "unsloth": "https://docs.sglang.ai/advanced_features/quantization.html",
    "neuralmagic": "https://docs.sglang.ai/advanced_features/quantization.html",
    # Neural Magic's hub organization continues as RedHatAI (llm-compressor's publisher).
    "redhatai": "https://docs.vllm.ai/en/latest/features/quantization/llm_compressor/",
    # The SGLang docs' own AWQ example loads hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4.
    "hugging-quants": "https://docs.sglang.ai/advanced_features/quantization.html",
    "mlx-community": "https://github.com/ml-explore/mlx-lm",  # the README's model source
    "ggml-org": "https://github.com/ggml-org/llama.cpp",  # `-hf ggml-org/...` examples
}

# Keyed by tier; rank() also looks up a candidate without a kernel path (None), which ranks 3.
_TIER_RANK: dict[KernelTier | None, int] = {KernelTier.NATIVE: 0, KernelTier.OPTIMIZED: 1,
                                            KernelTier.FALLBACK: 2}
_PROVENANCE_RANK = {Provenance.OFFICIAL: 0, Provenance.KNOWN_QUANTIZER: 1, Provenance.OTHER: 2}
RANKING = ("kernel tier on the device (native > optimized > fallback), then provenance "
           "(official > known quantizer > other), then memory fit (not yet assessed), then "
           "the routed engine order for the device and target concurrency "
           "(infopt.engines.routing)")

# Name tokens -> the formats whose metadata honours that claim. llm-compressor writes AWQ and
# GPTQ results as compressed-tensors, so those names may legitimately carry either.
_NAME_CLAIMS: dict[str, set[F]] = {
    "awq": {F.AWQ, F.CT_WNA16},
    "gptq": {F.GPTQ, F.CT_WNA16},
    "fp8": {F.FP8, F.CT_FP8, F.MODELOPT_FP8},
    "nvfp4": {F.MODELOPT_NVFP4, F.CT_NVFP4},
    "fp4": {F.MODELOPT_NVFP4, F.CT_NVFP4, F.MXFP4},
    "mxfp4": {F.MXFP4},
    "bnb": {F.BNB_NF4, F.BNB_INT8}, "nf4": {F.BNB_NF4}, "bitsandbytes": {F.BNB_NF4, F.BNB_INT8},
    "gguf": {F.GGUF},
}
_BITS_CLAIMS = {"int4": 4, "4bit": 4, "w4a16": 4, "int8": 8, "8bit": 8, "w8a8": 8}
# Packed-weight dtypes each format's tensors must show in the safetensors headers.
_PACKED_DTYPES: dict[F, set[str]] = {
    F.AWQ: {"I32"}, F.GPTQ: {"I32"}, F.CT_WNA16: {"I32", "I8", "U8"}, F.CT_INT8: {"I8"},
    F.FP8: {"F8_E4M3"}, F.CT_FP8: {"F8_E4M3"}, F.MODELOPT_FP8: {"F8_E4M3"},
    F.MODELOPT_NVFP4: {"U8"}, F.CT_NVFP4: {"U8"}, F.MXFP4: {"U8"},
    F.BNB_NF4: {"U8"}, F.BNB_INT8: {"I8"}, F.MLX: {"U32"},
}
# GGUF general.architecture vs HF model_type where llama.cpp names differ (convert_hf_to_gguf.py).
_GGUF_ARCH_ALIASES = {"mistral": "llama", "deepseekv3": "deepseek2", "gemma3text": "gemma3",
                      "qwen3moe": "qwen3moe", "gptoss": "gptoss"}


def device_from_inventory(inventory: HardwareInventory) -> DeviceTarget:
    """The shortlist's target: the GPUs' lowest compute capability, Apple Silicon, or the CPU."""
    if inventory.gpus:  # the capability every GPU has (engines.routing reads it alike)
        cc = lowest_compute_capability(inventory.gpus)
        return DeviceTarget(kind=DeviceKind.CUDA, compute_capability=cc[0] if cc else None,
                            name=inventory.gpus[0].name)
    host = inventory.host
    if host.os.startswith("Darwin") and host.architecture == "arm64":
        return DeviceTarget(kind=DeviceKind.METAL, name=host.cpu_model)
    return DeviceTarget(kind=DeviceKind.CPU, name=host.cpu_model)


def provenance(producer: str, base_repo: str) -> Provenance:
    if producer.lower() == base_repo.split("/")[0].lower():
        return Provenance.OFFICIAL
    return Provenance.KNOWN_QUANTIZER if producer.lower() in KNOWN_QUANTIZERS else Provenance.OTHER


def checkpoint_format(facts: HubModelFacts) -> tuple[F, QuantizationInfo | None]:
    """The format family and quantization read from config.json / hf_quant_config.json."""
    config = facts.config or {}
    mlx = config.get("quantization")
    qc = config.get("quantization_config") or {}
    if isinstance(mlx, dict) and "bits" in mlx and "quant_method" not in qc:
        # mlx-lm writes {"quantization": {"group_size": 64, "bits": 4}} (mlx_lm/utils.py).
        info = QuantizationInfo(method=QuantMethod.OTHER, bits=int(mlx["bits"]),
                                group_size=mlx.get("group_size"), format="mlx affine",
                                activations_quantized=False, scheme=f"W{mlx['bits']}A16",
                                source="config.json quantization (mlx-lm)")
        return F.MLX, info
    q = parse_quantization(config, facts.hf_quant_config)
    return format_of(q), q


def name_claims(repo_id: str) -> tuple[set[str], int | None]:
    """Quantization methods and bits the repository *name* claims (to check, never to trust)."""
    tokens = set(re.split(r"[-_.]", repo_id.split("/")[-1].lower()))
    methods = {t for t in tokens if t in _NAME_CLAIMS}
    bits = {_BITS_CLAIMS[t] for t in tokens if t in _BITS_CLAIMS}
    return methods, (bits.pop() if len(bits) == 1 else None)


def _signature(config: dict[str, Any]) -> dict[str, Any]:
    """What must match between a base and its quantized variant."""
    from infopt.model.classify import classify_config

    try:
        i = classify_config(config)
        return {"model_type": i.model_type, "architecture": i.architecture,
                "layers": i.num_layers, "hidden_size": i.hidden_size,
                "query_heads": i.attention.num_query_heads, "kv_heads": i.attention.num_kv_heads,
                "vocab_size": i.vocab_size}
    except InputError:  # an unknown family: compare the raw keys
        text = config.get("text_config") or config
        return {"model_type": text.get("model_type"),
                "architecture": (config.get("architectures") or [None])[0],
                "layers": text.get("num_hidden_layers"), "hidden_size": text.get("hidden_size"),
                "query_heads": text.get("num_attention_heads"),
                "kv_heads": text.get("num_key_value_heads"), "vocab_size": text.get("vocab_size")}


def _dtypes(facts: HubModelFacts) -> str:
    s = facts.safetensors
    if s is None:
        return "no safetensors headers"
    return ", ".join(f"{d} {n / 1e9:.2f}G" for d, n in sorted(s.elements_by_dtype.items(),
                                                             key=lambda kv: -kv[1]))


def _best_path(paths: list[KernelPath], pref: list[EngineName]) -> KernelPath | None:
    return min(paths, default=None, key=lambda p: (
        _TIER_RANK[p.tier], pref.index(p.engine) if p.engine in pref else len(pref)))


def _reject(cand: HubModelFacts, reason: R, detail: str,
            gguf_file: str | None = None) -> RejectedCheckpoint:
    return RejectedCheckpoint(repo_id=cand.repo_id, commit_sha=cand.commit_sha,
                              producer=cand.repo_id.split("/")[0], reason=reason, detail=detail,
                              gguf_file=gguf_file)


def _candidate(base: HubModelFacts, cand: HubModelFacts, device: DeviceTarget, fmt: F,
               q: QuantizationInfo | None, bits: int | None, weights_bytes: int | None,
               evidence: list[str], warnings: list[str], found_by: list[str],
               gguf_file: str | None = None, gguf_type: str | None = None
               ) -> CheckpointCandidate | RejectedCheckpoint:
    paths = kernel_paths(fmt, device)
    if not paths:
        return _reject(cand, R.UNSUPPORTED_ON_DEVICE, unsupported_reason(fmt, device), gguf_file)
    best_tier = min((p.tier for p in paths), key=_TIER_RANK.__getitem__)
    producer = cand.repo_id.split("/")[0]
    if cand.license != base.license:
        warnings.append(f"license {cand.license} differs from the base's {base.license}: the "
                        "base model's license terms still apply")
    return CheckpointCandidate(
        repo_id=cand.repo_id, commit_sha=cand.commit_sha, producer=producer,
        provenance=provenance(producer, base.repo_id), found_by=found_by, license=cand.license,
        gated=cand.gated, format=fmt, weight_bits=bits, quantization=q, gguf_file=gguf_file,
        gguf_type=gguf_type, weights_bytes=weights_bytes, kernel_paths=paths, best_tier=best_tier,
        evidence=evidence + [f"revision pinned to {cand.commit_sha}"], warnings=warnings)


def _check_lineage(base: HubModelFacts, cand: HubModelFacts) -> tuple[str | None, list[str]]:
    declared = [b.lower() for b in cand.base_models]
    if declared and base.repo_id.lower() not in declared:
        return (f"declares base model {', '.join(cand.base_models)}, not {base.repo_id}; a "
                "quantization of another model is not this model"), []
    if not declared:
        return None, [f"declares no base_model; matched to {base.repo_id} by architecture only"]
    return None, []


def _assess_gguf(base: HubModelFacts, cand: HubModelFacts, device: DeviceTarget,
                 max_bits: int, found_by: list[str], warnings: list[str]) -> list:
    sig = _signature(base.config or {})
    out: list = []
    for g in cand.gguf_files:
        bits = gguf_nominal_bits(g.file_type)
        where = f"{g.path}: {g.file_type} ({g.file_type_source})"
        named = gguf_type_from_name(g.path)
        if g.file_type_source == "gguf header" and named and named != g.file_type:
            out.append(_reject(cand, R.NAME_MISMATCH, f"{g.path}: the name says {named} but "
                               f"the header's general.file_type is {g.file_type}", g.path))
            continue
        if bits is not None and bits > max_bits:
            out.append(_reject(cand, R.OUTSIDE_WEIGHT_BITS, f"{where}: {bits}-bit weights, "
                               f"outside the {max_bits}-bit search; raise max_weight_bits to "
                               "include it", g.path))
            continue
        evidence, file_warnings = [f"GGUF {where}"], list(warnings)
        if g.architecture is not None:
            mismatch = [f"{k} {got} != {want}" for k, got, want in (
                ("layers", g.block_count, sig["layers"]),
                ("hidden size", g.embedding_length, sig["hidden_size"])) if got != want]
            if mismatch:
                out.append(_reject(cand, R.ARCHITECTURE_MISMATCH, f"{g.path}: GGUF header "
                                   f"{g.architecture} {'; '.join(mismatch)} vs {base.repo_id}",
                                   g.path))
                continue
            norm = re.sub(r"[-_]", "", str(sig["model_type"]).lower())
            if _GGUF_ARCH_ALIASES.get(norm, norm) != re.sub(r"[-_]", "", g.architecture):
                file_warnings.append(f"GGUF architecture {g.architecture} vs base model_type "
                                     f"{sig['model_type']}: check llama.cpp supports it")
            evidence.append(f"GGUF header: {g.architecture}, {g.block_count} layers, "
                            f"hidden {g.embedding_length} = base")
        out.append(_candidate(base, cand, device, F.GGUF, None, bits, g.size_bytes, evidence,
                              file_warnings, found_by, gguf_file=g.path,
                              gguf_type=g.file_type))
    return out


def assess_variant(base: HubModelFacts, cand: HubModelFacts, device: DeviceTarget, *,
                   max_weight_bits: int = 4, found_by: list[str] | None = None
                   ) -> list[CheckpointCandidate | RejectedCheckpoint]:
    """Verify one repository against the base from metadata alone (pure: no I/O)."""
    found_by = found_by or []
    problem, warnings = _check_lineage(base, cand)
    if problem:
        return [_reject(cand, R.DIFFERENT_BASE_MODEL, problem)]
    claimed, claimed_bits = name_claims(cand.repo_id)
    if cand.gguf_files and cand.safetensors is None:
        return _assess_gguf(base, cand, device, max_weight_bits, found_by, warnings)
    if cand.config is None:
        return [_reject(cand, R.NO_QUANT_METADATA, "no config.json and no GGUF file: nothing "
                        "to verify the weights' format from")]
    try:
        fmt, q = checkpoint_format(cand)
    except InputError as exc:
        return [_reject(cand, R.UNREADABLE, f"quantization metadata unreadable: {exc}")]
    if fmt is F.UNQUANTIZED:
        says = f"the name says {'/'.join(sorted(claimed)).upper()} but " if claimed else ""
        reason = R.NO_QUANT_METADATA if claimed or claimed_bits else R.NOT_QUANTIZED
        return [_reject(cand, reason, f"{says}config.json has no quantization_config (and no "
                        f"hf_quant_config.json); safetensors hold {_dtypes(cand)}")]
    assert q is not None  # checkpoint_format gives None only with F.UNQUANTIZED, returned above
    wrong = [c for c in claimed if fmt not in _NAME_CLAIMS[c]]
    bits = q.bits if q else None
    if wrong or (claimed_bits and bits and claimed_bits != bits):
        says = "/".join(sorted(wrong)).upper() or f"{claimed_bits}-bit"
        return [_reject(cand, R.NAME_MISMATCH, f"the name says {says} but {q.source} says "
                        f"{q.method.value} {bits}-bit ({q.format}); a mislabelled checkpoint "
                        "cannot be trusted to be what it claims")]
    qdesc = (f"{q.source}: {q.method.value}, {bits}-bit, group {q.group_size}, {q.format} "
             f"({q.scheme})")
    s = cand.safetensors
    if s is not None and not (_PACKED_DTYPES.get(fmt, set()) & set(s.elements_by_dtype)):
        return [_reject(cand, R.METADATA_INCONSISTENT, f"{qdesc}, yet the safetensors hold "
                        f"{_dtypes(cand)}: no {'/'.join(sorted(_PACKED_DTYPES.get(fmt, {'?'})))} "
                        "packed weights")]
    evidence = [qdesc, f"safetensors headers: {_dtypes(cand)}" if s else
                "safetensors headers not read"]
    want, got = _signature(base.config or {}), _signature(cand.config)
    diff = [f"{k} {got[k]} != {want[k]}" for k in want if k != "vocab_size" and got[k] != want[k]]
    if diff:
        return [_reject(cand, R.ARCHITECTURE_MISMATCH, f"config.json differs from "
                        f"{base.repo_id}: {'; '.join(diff)}")]
    evidence.append(f"architecture {got['architecture']} ({got['model_type']}), {got['layers']} "
                    f"layers, hidden {got['hidden_size']}, heads {got['query_heads']}/"
                    f"{got['kv_heads']} = base")
    if got["vocab_size"] != want["vocab_size"]:
        return [_reject(cand, R.TOKENIZER_MISMATCH, f"vocab_size {got['vocab_size']} != "
                        f"{want['vocab_size']} of {base.repo_id}: a different tokenizer")]
    evidence.append(f"vocab_size {got['vocab_size']} = base")
    bt, ct = base.file("tokenizer.json"), cand.file("tokenizer.json")
    if bt and ct and (bt.lfs_sha256 or bt.blob_id) == (ct.lfs_sha256 or ct.blob_id):
        evidence.append("tokenizer.json identical to the base's (same content hash)")
    elif bt and ct:
        warnings.append("tokenizer.json differs from the base's file (same vocab size): "
                        "compare encodings before trusting quality results")
    if bits is not None and bits > max_weight_bits:
        return [_reject(cand, R.OUTSIDE_WEIGHT_BITS, f"{qdesc}: {bits}-bit weights, outside "
                        f"the {max_weight_bits}-bit search; raise max_weight_bits to include it")]
    if bits is None:
        warnings.append("the metadata does not state the weight bits")
    return [_candidate(base, cand, device, fmt, q, bits, s.total_bytes if s else None, evidence,
                       warnings, found_by)]


def rank(candidates: list[CheckpointCandidate], pref: list[EngineName]
         ) -> list[CheckpointCandidate]:
    """Best kernel tier, then provenance, then the engine `pref` tries first (the routing
    rule's order, infopt.engines.routing.engine_order_for: one rule for plan, shortlist and
    flow, handed in so the model room imports no engine)."""

    def key(c: CheckpointCandidate) -> tuple:
        best = _best_path(c.kernel_paths, pref)
        engine = pref.index(best.engine) if best and best.engine in pref else len(pref)
        fit = 0  # placeholder: the fit stage orders by memory fit here
        return (_TIER_RANK.get(c.best_tier, 3), _PROVENANCE_RANK[c.provenance], fit, engine,
                c.repo_id.lower(), c.gguf_file or "")

    return sorted(candidates, key=key)


def build_shortlist(base_repo: str, *, device: DeviceTarget, cache_dir: Path,
                    revision: str | None = None, endpoint: str | None = None,
                    token: str | None = None, max_weight_bits: int = 4, search_limit: int = 100,
                    timeout_s: float = DEFAULT_TIMEOUT_S, workers: int = 4,
                    engine_order: list[EngineName]) -> Shortlist:
    """Search the hub for quantized variants of `base_repo`, verify and rank them (ties go to
    the engine first in `engine_order`: the routing rule's order for the device and the
    target concurrency, infopt.engines.routing.engine_order_for)."""
    base = fetch_model_facts(base_repo, cache_dir=cache_dir, revision=revision, endpoint=endpoint,
                 token=token, timeout_s=timeout_s, read_weight_headers=True)
    if base.config is None:
        raise InputError(f"{base_repo} has no config.json (a GGUF-only repository?): name the "
                         "original Hugging Face model to shortlist its quantized variants.")
    endpoint = base.endpoint
    queries = [f"filter=base_model:quantized:{base_repo}", f"search={base_repo.split('/')[1]}"]
    found: dict[str, list[str]] = {}
    for label, kwargs in ((queries[0], {"filter": queries[0].split("=", 1)[1]}),
                          (queries[1], {"search": base_repo.split("/")[1]})):
        for rid in search_models(endpoint=endpoint, token=token, limit=search_limit, **kwargs):
            if rid.lower() != base_repo.lower():
                found.setdefault(rid, []).append(label)

    def one(rid: str) -> list[CheckpointCandidate | RejectedCheckpoint]:
        try:
            cand = fetch_model_facts(rid, cache_dir=cache_dir, endpoint=endpoint, token=token,
                         timeout_s=timeout_s, gguf_max_bits=max_weight_bits)
        except InputError as exc:  # one unreadable variant must not sink the shortlist
            reason = R.NO_ACCESS if isinstance(exc, HubAccessError) else R.UNREADABLE
            return [RejectedCheckpoint(repo_id=rid, commit_sha=None, producer=rid.split("/")[0],
                                       reason=reason, detail=str(exc))]
        return assess_variant(base, cand, device, max_weight_bits=max_weight_bits,
                              found_by=found[rid])

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = [r for batch in pool.map(one, sorted(found)) for r in batch]
    ref_paths = kernel_paths(F.UNQUANTIZED, device)
    best = _best_path(ref_paths, engine_order)
    reference = CheckpointCandidate(
        repo_id=base.repo_id, commit_sha=base.commit_sha, producer=base.repo_id.split("/")[0],
        provenance=Provenance.OFFICIAL, found_by=["requested"], license=base.license,
        gated=base.gated, format=F.UNQUANTIZED, weight_bits=None, quantization=None,
        weights_bytes=base.safetensors.total_bytes if base.safetensors else None,
        kernel_paths=ref_paths, best_tier=best.tier if best else None,
        evidence=[f"revision pinned to {base.commit_sha}", f"safetensors: {_dtypes(base)}"])
    return Shortlist(
        base_model=base.repo_id, base_commit_sha=base.commit_sha, endpoint=endpoint,
        device=device, max_weight_bits=max_weight_bits, reference=reference,
        candidates=rank([r for r in results if isinstance(r, CheckpointCandidate)],
                        engine_order),
        rejected=sorted((r for r in results if isinstance(r, RejectedCheckpoint)),
                        key=lambda r: (r.reason.value, r.repo_id, r.gguf_file or "")),
        queries=queries, ranking=RANKING)

