"""The kernel an engine logged selecting, against the support matrix's expected path for the
checkpoint's format on this device (infopt.model.support_matrix): as expected, a fallback (a
slower path than the matrix expects here, or the engine's own fallback warning where the matrix
expects better), another path (one the matrix places on other devices), unrecognized, or not
logged (undecided). The names a log gives each matrix kernel are the adapter's data
(KernelLog.kernel_names). Pure."""

from __future__ import annotations

import re

from infopt.engines.kernel_log import KernelLog
from infopt.model.support_matrix import ROWS, SupportRow, matches, where
from infopt.specs.checkpoint import CheckpointFormat, DeviceTarget, KernelTier
from infopt.specs.results import KernelFinding, KernelLine
from infopt.specs.results import KernelVerdict as V
from infopt.specs.serving import EngineName

_RANK = {KernelTier.FALLBACK: 0, KernelTier.OPTIMIZED: 1, KernelTier.NATIVE: 2}
KERNEL_ASPECTS = ("weights GEMM", "MoE backend")  # the lines that name a weights kernel


def _said(row: SupportRow) -> str:
    return (f"{row.kernel} ({row.tier.value}: {row.math}) on {where(row)}, per "
            f"{row.source_url}")


def verify(engine: EngineName, fmt: CheckpointFormat, device: DeviceTarget,
           lines: list[KernelLine], spec: KernelLog) -> KernelFinding:
    rows = [r for r in ROWS if r.engine is engine and r.format is fmt and r.supported]
    expected = next((r for r in rows if matches(r, fmt, device)), None)
    found = [ln.kernel for ln in lines if ln.aspect in KERNEL_ASPECTS and ln.kernel]
    warnings = [ln.line for ln in lines if ln.aspect == spec.fallback_aspect]
    if expected is None:
        return KernelFinding(verdict=V.NO_EXPECTATION, expected=None, found=found, detail=(
            f"the support matrix has no {engine.value} path for {fmt.value} on "
            f"{device.kind.value} {device.compute_capability or ''}".rstrip()))
    exp = _said(expected)
    judged = [(name, row_of(name, rows, spec)) for name in found]
    if warnings and _RANK[expected.tier] > _RANK[KernelTier.FALLBACK]:
        return KernelFinding(verdict=V.FALLBACK, expected=exp, found=found, detail=(
            f"{engine.value} says it fell back: {warnings[0][:200]}; the matrix expects "
            f"{expected.kernel} here"))
    slower = [(n, r) for n, r in judged if r is not None and r is not expected
              and _RANK[r.tier] < _RANK[expected.tier]]
    if slower:
        name, row = slower[0]
        assert row is not None
        return KernelFinding(verdict=V.FALLBACK, expected=exp, found=found, detail=(
            f"{name} is the matrix's {row.kernel} ({row.tier.value}, {where(row)}), slower "
            f"than the {expected.kernel} ({expected.tier.value}) it expects on this device"))
    unknown = [n for n, r in judged if r is None]
    if unknown:
        return KernelFinding(verdict=V.UNRECOGNIZED, expected=exp, found=found, detail=(
            f"{', '.join(unknown)}: not a name the matrix's {engine.value} paths for "
            f"{fmt.value} know; expected {expected.kernel}"))
    other = [(n, r) for n, r in judged if r is not None and r is not expected]
    if other:
        name, elsewhere = other[0]
        return KernelFinding(verdict=V.OTHER_PATH, expected=exp, found=found, detail=(
            f"{name} is the matrix's {elsewhere.kernel} for {where(elsewhere)}, not the "
            f"{expected.kernel} "
            "it expects on this device: the matrix or the engine's selection disagrees"))
    if not found:
        named = bool(spec.kernel_names.get(expected.kernel))
        return KernelFinding(verdict=V.NOT_LOGGED, expected=exp, found=[], detail=(
            f"no line names the weights' kernel ({engine.value} logs none for {expected.kernel}"
            f"{'' if named else ' that infopt reads'}): undecided"))
    return KernelFinding(verdict=V.AS_EXPECTED, expected=exp, found=found, detail=(
        f"{', '.join(dict.fromkeys(found))}: the matrix's {expected.kernel} "
        f"({expected.tier.value})"))


def row_of(name: str, rows: list[SupportRow], spec: KernelLog) -> SupportRow | None:
    """The matrix path whose logged names include `name` (the first, in the matrix's order)."""
    return next((r for r in rows if (rx := spec.kernel_names.get(r.kernel))
                 and re.fullmatch(rx, name)), None)
