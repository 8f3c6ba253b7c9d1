"""Shortlisted hub checkpoints as weight candidates of the ladder: which of the shortlist's
verified checkpoints an engine tries (the request's `model.try_checkpoints`, else, with downloads
pre-authorized, the best `max_checkpoints` it serves here), which files each needs, and how the
ladder names it. Pure: the flow downloads each behind the download gate (flows/weights.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from infopt.engines import serves
from infopt.engines.rules import WeightVariant
from infopt.specs.base import InputError
from infopt.specs.checkpoint import CheckpointCandidate, HubFile, Shortlist
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.request import Authorization, OptimizeRequest
from infopt.tuning.weights import BITS_PER_WEIGHT

_SHARD = re.compile(r"-\d{5}-of-(\d{5})\.gguf$")


def spec_of(c: CheckpointCandidate) -> str:
    """How `model.try_checkpoints` names it: "org/name:file.gguf", or "org/name"."""
    return f"{c.repo_id}:{c.gguf_file}" if c.gguf_file else c.repo_id


def _matches(spec: str, c: CheckpointCandidate) -> bool:
    repo, _, file = spec.partition(":")
    return repo.lower() == c.repo_id.lower() and (not file or file == c.gguf_file)


def check_checkpoints(request: OptimizeRequest, shortlist: Shortlist | None) -> None:
    """Every checkpoint `model.try_checkpoints` names is a verified shortlist candidate."""
    asked = request.model.try_checkpoints
    if shortlist is None or not asked:
        return
    if unknown := [s for s in asked if not any(_matches(s, c) for c in shortlist.candidates)]:
        have = ", ".join(spec_of(c) for c in shortlist.candidates) or "none"
        raise InputError(f"model.try_checkpoints {unknown}: not a verified candidate of the "
                         f"shortlist of {shortlist.base_model} (rejected ones are listed with "
                         f"their reasons by `infopt shortlist {shortlist.base_model}`); its "
                         f"candidates: {have}")


def pick_checkpoints(request: OptimizeRequest, shortlist: Shortlist | None, engine: str
                     ) -> tuple[list[CheckpointCandidate], str | None]:
    """(the shortlisted checkpoints `engine` tries, best first; when none, why): those with
    a kernel path for `engine` on the device in a format its adapter loads."""
    asked, m = request.model.try_checkpoints, request.model
    if shortlist is None:
        return [], None
    check_checkpoints(request, shortlist)
    served = [c for c in shortlist.candidates if serves(engine, model_format(c)) is None
              and any(p.engine.value == engine for p in c.kernel_paths)]
    if asked:
        return [c for c in served if any(_matches(s, c) for s in asked)], None
    if not served:
        return [], None
    if Authorization.DOWNLOAD not in request.authorize:
        return [], (f"shortlisted checkpoints {', '.join(spec_of(c) for c in served)}: not "
                    "tried (downloads were not authorized): list them in "
                    "model.try_checkpoints (each asks the download gate) or pre-authorize "
                    "with `authorize: [download]`")
    return served[:m.max_checkpoints], None


def model_format(c: CheckpointCandidate) -> ModelFormat:
    """How the checkpoint is laid out on disk once downloaded: one GGUF, or an HF directory."""
    return ModelFormat.GGUF if c.gguf_file else ModelFormat.HF


def checkpoint_files(c: CheckpointCandidate, files: list[HubFile]) -> list[HubFile]:
    """What serving `c` needs: its GGUF file (every shard of a split one), or the repository's
    files less other formats' weights (GGUF files, `original/` PyTorch copies)."""
    if c.gguf_file:
        shard = _SHARD.search(c.gguf_file)
        stem = c.gguf_file[:shard.start()] if shard else c.gguf_file
        return [f for f in files if f.path == c.gguf_file
                or (shard and f.path.startswith(stem) and _SHARD.search(f.path))]
    return hf_checkpoint_files(files)


def hf_checkpoint_files(files: list[HubFile]) -> list[HubFile]:
    """An HF repository's files less other formats' weights (GGUF files, `original/` PyTorch
    copies): what an engine loads of a checkpoint or a drafter."""
    return [f for f in files if not f.path.endswith(".gguf")
            and not f.path.startswith("original/")]


def variant_format(c: CheckpointCandidate) -> tuple[str, float | None]:
    """(its format name, bits per weight): the GGUF type, or the quantization format."""
    if c.gguf_type:
        return c.gguf_type, BITS_PER_WEIGHT.get(c.gguf_type, c.weight_bits)
    return c.format.value, c.weight_bits


def why_tried(c: CheckpointCandidate) -> str:
    tier = c.best_tier.value if c.best_tier else "unknown"
    return (f"shortlisted from the hub: {c.repo_id} at {c.commit_sha[:12]} by {c.producer} "
            f"({c.provenance.value}), {tier} kernels on this device, verified from "
            f"{c.evidence[0] if c.evidence else 'its metadata'}")


def identical_to(files: list[HubFile], local_digest: str) -> bool:
    """The one file is byte-for-byte the served checkpoint (its LFS sha256 is the digest)."""
    return (len(files) == 1 and files[0].lfs_sha256 is not None
            and local_digest == f"sha256:{files[0].lfs_sha256}")


_FLOAT_BITS = {"float32": 32.0, "float16": 16.0, "bfloat16": 16.0}


def served_precision(model: ModelProfile) -> tuple[str, float] | None:
    """(its format name, bits per weight) of the checkpoint the run serves: a GGUF file's type,
    an HF directory's quantized weight bits (FP8 -> 8, AWQ/GPTQ -> 4), or the dtype of an
    unquantized one; None when its metadata does not say. What a reference must exceed."""
    if model.format is ModelFormat.GGUF:
        gguf_type = model.weight_format.split(" ")[0]
        bits = BITS_PER_WEIGHT.get(gguf_type)
        return (gguf_type, bits) if bits else None
    q = model.inspection.quantization
    if q is not None:
        return (q.scheme, float(q.bits)) if q.bits else None
    dtype = model.inspection.weights_dtype or ""
    return (dtype, _FLOAT_BITS[dtype]) if dtype in _FLOAT_BITS else None


def may_raise_reference(served_bits: float | None,
                        picked: Sequence[CheckpointCandidate]) -> bool:
    """Whether a checkpoint not yet downloaded could become the quality reference
    (reference_weights): one with more bits per weight than the served checkpoint. When none
    could, the reference is the served checkpoint whatever the download gates answer, so the
    control and the baseline need not wait for them."""
    return bool(served_bits) and any((variant_format(c)[1] or 0.0) > (served_bits or 0.0)
                                     for c in picked)


def reference_weights(served_bits: float | None, variants: Sequence[WeightVariant],
                      fits: Callable[[str], bool]) -> WeightVariant | None:
    """The quality reference's weights: the downloaded hub checkpoint with the most bits per
    weight, when it has more than the served checkpoint and fits here (the specification: "the
    highest precision that fits"); None: the served checkpoint is the reference. Variants made
    here from the served file derive from its rounding and never qualify."""
    better = [v for v in variants if v.source and v.bits_per_weight and served_bits
              and v.bits_per_weight > served_bits and fits(v.path)]
    return max(better, key=lambda v: v.bits_per_weight or 0.0) if better else None
