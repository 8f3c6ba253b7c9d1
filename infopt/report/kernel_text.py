"""report.md's kernel path: what the engine's own log says it selected for the recommended
configuration (infopt.engines.kernel_log), not what the flags asked for."""

from __future__ import annotations

from infopt.specs.results import KernelFinding, KernelPath, Trial


def kernel_lines(k: KernelPath | None, trials: list[Trial] | None = None) -> list[str]:
    if k is None:
        return []
    out = ["## Kernel path (read from the engine's log)", ""]
    if k.finding is not None:
        out += [_finding(k.finding), ""]
    if k.log:
        out += [f"From `{k.log}`:", "", "| aspect | the engine's line |", "|---|---|",
                *[f"| {ln.aspect} | `{_cell(ln.line)}` |" for ln in k.lines]]
        if not k.lines:
            out.append("| — | no kernel-selection line found in that log |")
        out.append("")
    out += [f"- {n}" for n in k.notes] + [""]
    return out + _trial_findings(trials or [])


def _finding(f: KernelFinding) -> str:
    mark = "**Flagged**" if f.flagged else "Checked"
    return (f"{mark} against the support matrix: **{f.verdict.value}**. {f.detail}."
            + (f" Expected: {f.expected}." if f.expected else ""))


def _trial_findings(trials: list[Trial]) -> list[str]:
    """Each trial's own kernel check, when any was read: the flagged ones named."""
    read = [(t.trial_id, f) for t in trials
            if t.kernels is not None and (f := t.kernels.finding) is not None]
    if not read:
        return []
    flagged = [(tid, f) for tid, f in read if f.flagged]
    out = [f"Kernels read per trial: {len(read)} trial(s); flagged: {len(flagged)}.", ""]
    out += [f"- {tid}: {_finding(f)}" for tid, f in flagged]
    return out + ([""] if flagged else [])


def _cell(text: str) -> str:
    # A "|" inside a table cell ends it, even in code: llama.cpp's system_info is |-separated.
    return text.replace("|", "\\|")
