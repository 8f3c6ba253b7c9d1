"""Which kernels an engine selected, read from its own startup log (not from the flags): each
adapter declares, as data, the lines that say so per aspect (the weights' GEMM kernel, the MoE
backend, weights buffer and repacking, flash attention, the attention backend, compilation, the
KV cache, the engine's own fallback warnings), the knobs that make its version print them, what
its version selects without a line, and the names its log gives the support matrix's kernels.
Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from infopt.specs.results import KernelLine


@dataclass(frozen=True)
class KernelLog:
    patterns: tuple[tuple[str, str], ...]  # (aspect, regex matching the line's message)
    knobs: dict[str, Any] = field(default_factory=dict)  # make the engine print them
    # aspect -> what the version selects without logging it (said when no line was found)
    unlogged: dict[str, str] = field(default_factory=dict)
    # The support matrix's kernel (infopt.model.support_matrix, its `kernel` text) -> a regex
    # of the names this engine's log gives it (a pattern's `kernel` group): how a logged
    # kernel is told apart from the matrix's expected one (infopt.engines.kernel_verify).
    kernel_names: dict[str, str] = field(default_factory=dict)
    # Lines in which the engine itself says it fell back to a slower path.
    fallback_aspect: str = "fallback warning"


def read_kernel_lines(text: str, spec: KernelLog) -> list[KernelLine]:
    """Every matching line once, in log order, as (aspect, the message without its prefix)."""
    out, seen = [], set()
    compiled = [(aspect, re.compile(rx)) for aspect, rx in spec.patterns]
    for raw in text.splitlines():
        for aspect, rx in compiled:
            m = rx.search(raw)
            if m and (aspect, m.group(0)) not in seen:
                seen.add((aspect, m.group(0)))
                out.append(KernelLine(aspect=aspect, line=m.group(0).strip(),
                                      kernel=m.groupdict().get("kernel")))
                break
    return out


def unlogged_notes(lines: list[KernelLine], spec: KernelLog) -> list[str]:
    found = {ln.aspect for ln in lines}
    return [f"{aspect}: no log line; {why}" for aspect, why in spec.unlogged.items()
            if aspect not in found]
