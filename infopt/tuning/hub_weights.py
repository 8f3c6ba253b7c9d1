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
from infopt.specs.hardware import HardwareInventory
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


# At or below this many bits per weight, the served checkpoint's own rounding is large enough
# that a reference of its own weights hides it: the base is asked for (the specification's
# "an appropriate higher-precision reference").
REFERENCE_MAX_SERVED_BITS = 8.0
# Of the host's memory (all its GPUs, or its RAM) the base's weights may take and still leave
# room for a KV cache and activations on some layout.
REFERENCE_FIT_SHARE = 0.9


def host_capacity_bytes(hw: HardwareInventory) -> int:
    """What the largest layout of this host holds: every GPU's memory, or the RAM."""
    if hw.gpus:
        return sum(g.memory_total_bytes or 0 for g in hw.gpus)
    return hw.host.ram_total_bytes


def reference_checkpoint(shortlist: Shortlist | None, engine: str, served_bits: float | None,
                         capacity_bytes: int) -> tuple[CheckpointCandidate | None, str | None]:
    """(the shortlist's unquantized base to ask the download gate for as the quality
    reference, or None; when None for a reason the report should give, the reason). Asked,
    not only taken under pre-authorization: when the served checkpoint is 8-bit or less, the
    engine loads the base's format, and its weights fit some layout of the host."""
    if shortlist is None or served_bits is None or served_bits > REFERENCE_MAX_SERVED_BITS:
        return None, None
    base = shortlist.reference
    name = f"the unquantized base {base.repo_id}"
    if (why := serves(engine, model_format(base))) is not None:
        return None, f"{name} was not asked for as the quality reference: {engine} {why}"
    need = base.weights_bytes
    if need is not None and need > REFERENCE_FIT_SHARE * capacity_bytes:
        return None, (f"{name} ({need / 2**30:.1f} GiB of weights) was not asked for as the "
                      f"quality reference: more than {REFERENCE_FIT_SHARE:.0%} of this host's "
                      f"{capacity_bytes / 2**30:.1f} GiB on any layout")
    # The shortlist leaves an unquantized base's bits unset (it lists 16- and 32-bit dtypes
    # alike); 16 is the least it holds, and all the reference choice needs is "more".
    return base.model_copy(update={"weight_bits": base.weight_bits or 16}), None


def why_reference(c: CheckpointCandidate, served_fmt: str | None) -> str:
    return (f"the unquantized base {c.repo_id} at {c.commit_sha[:12]}, asked for as the "
            f"quality reference: the served {served_fmt or 'checkpoint'} is "
            f"{REFERENCE_MAX_SERVED_BITS:g}-bit or less, so a reference of its own weights "
            "would hide its rounding")
