"""The sourced GPU catalog and robust name matching.

`gpu_catalog.csv` beside this module holds one row per SKU: vendor peak figures in bytes, bytes/s
and dense operations/s (see `infopt.specs.gpu` for the conventions), each row with its source and
a `source_tier`. Rows were checked against recorded nvidia-smi/deviceQuery output where it exists
(the `nvml_memory_total_mib`, `memory_bus_width_bits` and `sm_count` columns come from there).

Matching accepts NVML names ("NVIDIA A100-SXM4-80GB", "Tesla T4"), catalog keys and common
aliases ("H100 SXM", "h100"). A name that fits several rows ("A100 80GB": SXM4 or PCIe) is
reported as ambiguous, never guessed; an optional memory size (NVML's total) narrows it.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import Field

from infopt.specs.base import InputError, Spec
from infopt.specs.gpu import FormFactor, GpuProbe, GpuSpec

CATALOG_PATH = Path(__file__).with_name("gpu_catalog.csv")

MIB = 1 << 20
GIB = 1 << 30

# A memory hint fits a row within this fraction of its nominal or NVML-reported size: NVML totals
# sit 0-6 % under the nominal GiB (ECC, firmware reservation: L40S 46068 MiB of 48 GiB), while
# the closest same-family SKUs differ by >= 17 % (H100 80 vs 94 GB).
MEMORY_HINT_TOLERANCE = 0.08

_INT_COLUMNS = {"memory_gib_nominal", "memory_bytes", "nvml_memory_total_mib", "memory_bus_width_bits",
                "sm_count"}
_FLOAT_COLUMNS = {"bandwidth_bytes_per_s", "dense_fp16_flops_per_s", "dense_bf16_flops_per_s",
                  "dense_fp8_flops_per_s", "dense_int8_ops_per_s", "dense_fp4_flops_per_s",
                  "nvlink_bytes_per_s_per_direction", "tdp_w"}

_FORM_TOKENS = {"sxm": FormFactor.SXM, "sxm2": FormFactor.SXM, "sxm4": FormFactor.SXM,
                "sxm5": FormFactor.SXM, "hgx": FormFactor.SXM, "pcie": FormFactor.PCIE,
                "nvl": FormFactor.NVL}
_MEMORY_TYPE_TOKENS = {"hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7"}
# Words that say nothing about the SKU. Anything else left over ("ti", "d", "laptop", "3e")
# marks a variant the catalog does not hold, so the name is reported unknown, not matched.
_FILLER_TOKENS = {"nvidia", "geforce", "tesla", "tensor", "core", "gpu", "generation", "graphics",
                  "card"}


def parse_catalog(text: str) -> list[GpuSpec]:
    """Rows of the catalog CSV text as typed specs; empty cells are None."""
    rows = []
    for raw in csv.DictReader(io.StringIO(text)):
        values: dict[str, object] = {}
        for column, cell in raw.items():
            cell = (cell or "").strip()
            if column == "aliases":
                values[column] = [a.strip() for a in cell.split("|") if a.strip()]
            elif cell == "":
                continue
            elif column in _INT_COLUMNS:
                values[column] = int(cell)
            elif column in _FLOAT_COLUMNS:
                values[column] = float(cell)
            else:
                values[column] = cell
        rows.append(GpuSpec.model_validate(values))
    return rows


@functools.cache
def load_catalog() -> tuple[GpuSpec, ...]:
    return tuple(parse_catalog(CATALOG_PATH.read_text()))


def known_gpu_names(catalog: tuple[GpuSpec, ...] | None = None) -> list[str]:
    return [spec.name for spec in (catalog or load_catalog())]


def normalize_gpu_name(name: str) -> str:
    """Lowercase words and numbers: "NVIDIA A100-SXM4-80GB" -> "a100 sxm4 80gb"."""
    text = name.lower().replace("pci-e", "pcie").replace("pci e", "pcie")
    text = re.sub(r"[^a-z0-9]+", " ", text)
    text = re.sub(r"\b(rtx|gtx)(\d)", r"\1 \2", text)  # "rtx4090" -> "rtx 4090"
    text = re.sub(r"\b(\d+)\s+(gb|gib)\b", r"\1gb", text)  # "80 GB" -> "80gb"
    return " ".join(text.split())


class MatchStatus(StrEnum):
    MATCHED = "matched"
    AMBIGUOUS = "ambiguous"
    UNKNOWN = "unknown"


class GpuMatch(Spec):
    query: str
    status: MatchStatus
    spec: GpuSpec | None = None
    candidates: list[str] = Field(default_factory=list)  # keys, when ambiguous
    reason: str = ""


def _family_pattern(family: str) -> re.Pattern[str]:
    return re.compile(r"(?<![a-z0-9])" + r"\s+".join(map(re.escape, family.split())) + r"(?![a-z0-9])")


def _fits_memory(spec: GpuSpec, memory_bytes: int) -> bool:
    refs = [spec.memory_bytes]
    if spec.nvml_memory_total_mib:
        refs.append(spec.nvml_memory_total_mib * MIB)
    return any(abs(memory_bytes - ref) <= MEMORY_HINT_TOLERANCE * ref for ref in refs)


def resolve_gpu(name: str, memory_bytes: int | None = None,
                catalog: tuple[GpuSpec, ...] | None = None) -> GpuMatch:
    """Match a GPU name (NVML or user alias) to one catalog row, or say why not.

    `memory_bytes` (NVML's total) narrows a name without a size and vetoes a row whose size
    does not fit (an unknown variant sharing a family name is not silently matched).
    """
    rows = catalog or load_catalog()
    text = normalize_gpu_name(name)
    for spec in rows:  # exact key or alias first
        if text in {normalize_gpu_name(spec.key), *(normalize_gpu_name(a) for a in spec.aliases)}:
            if memory_bytes is None or _fits_memory(spec, memory_bytes):
                return GpuMatch(query=name, status=MatchStatus.MATCHED, spec=spec)

    families = sorted({spec.family for spec in rows}, key=len, reverse=True)
    found = [(family, m) for family in families if (m := _family_pattern(family).search(text))]
    if not found:
        return GpuMatch(query=name, status=MatchStatus.UNKNOWN, reason="no catalog family in the name")
    if len(found) > 1:
        return GpuMatch(query=name, status=MatchStatus.UNKNOWN, reason="several GPU families in the name")
    family, hit = found[0]

    rest = (text[: hit.start()] + " " + text[hit.end():]).split()
    forms = {_FORM_TOKENS[t] for t in rest if t in _FORM_TOKENS}
    sizes = {int(t[:-2]) for t in rest if re.fullmatch(r"\d+gb", t)}
    mem_types = {t for t in rest if t in _MEMORY_TYPE_TOKENS}
    leftover = [t for t in rest if t not in _FORM_TOKENS and t not in _MEMORY_TYPE_TOKENS
                and t not in _FILLER_TOKENS and not re.fullmatch(r"\d+gb", t)]
    if leftover:
        return GpuMatch(query=name, status=MatchStatus.UNKNOWN,
                        reason=f"variant words {' '.join(leftover)!r} match no catalog row")

    candidates = [s for s in rows if s.family == family
                  and (not forms or s.form_factor in forms)
                  and (not sizes or s.memory_gib_nominal in sizes)
                  and (not mem_types or s.memory_type.lower() in mem_types)]
    if candidates and memory_bytes is not None:
        fitting = [s for s in candidates if _fits_memory(s, memory_bytes)]
        if not fitting:
            return GpuMatch(query=name, status=MatchStatus.UNKNOWN,
                            reason=f"no catalog row for {family} with {memory_bytes / GIB:.1f} GiB")
        candidates = fitting
    if not candidates:
        return GpuMatch(query=name, status=MatchStatus.UNKNOWN,
                        reason=f"no catalog row for {family} with those words")
    if len(candidates) > 1:
        return GpuMatch(query=name, status=MatchStatus.AMBIGUOUS, candidates=[s.key for s in candidates],
                        reason="add the form factor (SXM, PCIe, NVL) or the memory size")
    return GpuMatch(query=name, status=MatchStatus.MATCHED, spec=candidates[0])


def match_gpu(name: str, memory_bytes: int | None = None) -> GpuSpec | None:
    """The catalog row for a name, or None when unknown or ambiguous (use resolve_gpu for why)."""
    return resolve_gpu(name, memory_bytes).spec


def lowest_compute_capability(gpus: Sequence[GpuProbe]) -> tuple[str, str] | None:
    """The lowest compute capability among `gpus` (what every engine must support) and where it
    comes from: NVML's figure, else the GPU's catalog row (a recorded nvidia-smi may not state
    it); None when neither knows any."""
    found = []
    for g in gpus:
        if g.compute_capability:
            found.append((float(g.compute_capability), g.compute_capability, "NVML"))
        elif (spec := match_gpu(g.name, g.memory_total_bytes)) is not None:
            found.append((float(spec.compute_capability), spec.compute_capability,
                          f"catalog row {spec.key}"))
    return min(found)[1:] if found else None


def lookup_gpu(name: str, memory_bytes: int | None = None) -> GpuSpec:
    """The catalog row for a user-given name; InputError saying what to change otherwise."""
    match = resolve_gpu(name, memory_bytes)
    if match.spec is not None:
        return match.spec
    if match.status is MatchStatus.AMBIGUOUS:
        by_key = {spec.key: spec.name for spec in load_catalog()}
        options = ", ".join(f"{by_key[k]!r}" for k in match.candidates)
        raise InputError(f"GPU {name!r} is ambiguous: it fits {options}. Name one of them "
                         f"(add SXM, PCIe or NVL, or the memory size).")
    raise InputError(f"Unknown GPU {name!r} ({match.reason}). Known GPUs: "
                     f"{', '.join(known_gpu_names())}. Use one of these names, or leave the GPU "
                     f"unset to use measured figures only.")
