"""report.md's kernel path: what the engine's own log says it selected for the recommended
configuration (infopt.engines.kernel_log), not what the flags asked for."""

from __future__ import annotations

from infopt.specs.results import KernelPath


def kernel_lines(k: KernelPath | None) -> list[str]:
    if k is None:
        return []
    out = ["## Kernel path (read from the engine's log)", ""]
    if k.log:
        out += [f"From `{k.log}`:", "", "| aspect | the engine's line |", "|---|---|",
                *[f"| {ln.aspect} | `{_cell(ln.line)}` |" for ln in k.lines]]
        if not k.lines:
            out.append("| — | no kernel-selection line found in that log |")
        out.append("")
    out += [f"- {n}" for n in k.notes] + [""]
    return out


def _cell(text: str) -> str:
    # A "|" inside a table cell ends it, even in code: llama.cpp's system_info is |-separated.
    return text.replace("|", "\\|")

