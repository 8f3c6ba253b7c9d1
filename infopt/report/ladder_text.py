"""The report's tuning ladder: each dimension with its candidates, why each was tried, what became
of it (with the interval when it was confirmed), the Pareto set over every measured
configuration, and the configuration closest to its ceiling beside the winner."""

from __future__ import annotations

import statistics

from infopt.specs.ladder import CandidateResult
from infopt.specs.results import OptimizationReport


def _num(v: float | None, fmt: str = ".4g") -> str:
    return "—" if v is None else format(v, fmt)


def _interval(c: CandidateResult, drops_below: float | None = None) -> str:
    """Candidate against its incumbent in paired rounds: the ratio's interval and what the
    rounds could have detected; a screen alone: its one round's ratio and the ratio below which
    a screen drops a candidate (infopt.tuning.rounds.promising)."""
    d = c.rounds
    if d is not None:
        o = d.objective
        seen = "" if o.detectable is None else f"; could detect {o.detectable:.0%}"
        return (f"{o.ratio - 1:+.1%} [{o.ratio_low - 1:+.1%}, {o.ratio_high - 1:+.1%}] "
                f"({d.rounds} rounds{seen})")
    if c.values and c.incumbent_values and c.incumbent_values[0] > 0:
        slack = ("" if drops_below is None else
                 f"; a screen drops only what measures below {drops_below:+.1%}")
        return (f"{c.values[0] / c.incumbent_values[0] - 1:+.1%} (one round: a screen, "
                f"no interval{slack})")
    cmp = c.comparison
    if cmp is None:
        return "—"
    return f"{cmp.diff:+.3g} [{cmp.ci_low:+.3g}, {cmp.ci_high:+.3g}] ({cmp.n_b} vs {cmp.n_a})"


def ladder_lines(r: OptimizationReport, unit: str) -> list[str]:
    if r.ladder is None:
        return []
    lines = _engine_lines(r, unit) + ["## Tuning ladder (one dimension at a time, in the "
                                      "specification's order)" + (
                                          f": {r.engine}" if r.engines else ""), ""]
    lines += _steps(r.ladder, r.winner_label, unit) + _held_back(r.ladder, unit)
    for e in (r.engines.results if r.engines else []):
        if e.engine != r.engine and e.ladder is not None:
            lines += [f"### The comparator's ladder: {e.engine}", "",
                      *_steps(e.ladder, e.winner_label or "baseline", unit)]
    return lines + _pareto_lines(r) + _closest_lines(r)


def _engine_lines(r: OptimizationReport, unit: str) -> list[str]:
    """Both engines' winners, and which is recommended (the routing rule, measured)."""
    if r.engines is None or len(r.engines.results) < 2:
        return []
    lines = ["## Engines tuned (the routed engine and its comparator)", "",
             f"| engine | role | why | checkpoint | control median {unit} | winner | "
             f"winner median {unit} (trials) | launches |", "|---|---|---|---|---|---|---|---|"]
    for e in r.engines.results:
        if e.failed:
            lines.append(f"| {e.engine} | {e.role} | {e.reason} | `{e.model_path}` "
                         f"({e.model_format}) | — | failed: {e.failed[:200]} | — | — |")
            continue
        lines.append(f"| {e.engine} {e.engine_version or ''} | {e.role} | {e.reason} | "
                     f"`{e.model_path}` ({e.model_format}) | {_num(e.control_median)} | "
                     f"{e.winner_label} | {_num(e.winner_median)} ({len(e.winner_values)}) | "
                     f"{e.launches} |")
    return lines + ["", f"Recommended: **{r.engines.chosen}**: {r.engines.reason}.", ""]


_HELD_BACK = {"gate": "rejected by a gate",
              "undecided": "undecided (not accepted)",
              "within noise": "within the noise",
              "failed": "failed", "pruned": "pruned", "not run": "not run"}


def _dim(step) -> str:
    """The step's dimension, with its layout family where the step climbed one."""
    return step.dimension.value + (f" ({step.family})" if step.family else "")


def _held_back(lad, unit: str) -> list[str]:
    """Why the winner is not faster: every candidate that did not count, grouped by what
    stopped it, so a small gain reads with its causes (a fast candidate the quality gate
    rejected, a gain inside the noise, a kernel this CPU lacks)."""
    groups: dict[str, list[str]] = {}
    for s in lad.steps:
        base = statistics.median(s.incumbent_values) if s.incumbent_values else None
        for c in s.candidates:
            if c.status not in _HELD_BACK:
                continue
            gain = (f"; median {c.median:.4g} {unit} vs the incumbent's {base:.4g}"
                    if c.median is not None and base else "")
            groups.setdefault(c.status, []).append(
                f"`{c.candidate.label}` ({_dim(s)}): {c.reason[:240]}{gain}")
    if not groups:
        return []
    lines = ["### What held the gain back", ""]
    for status, why in _HELD_BACK.items():
        lines += [f"- {why}: {item}" for item in groups.get(status, [])]
    return lines + [""]


def _steps(lad, winner_label: str, unit: str) -> list[str]:
    noise = ([f"Noise: one paired round's spread at the start (sd of the log ratio) "
              f"{lad.noise_sd_log:.3f}; {lad.window_why}.", ""]
             if lad.noise_sd_log is not None and lad.window_why else [])
    lines = [f"Rule: {lad.rule}.", "", *noise,
             f"Ladder winner: **{winner_label}**; {lad.launches} trials (measurement windows) "
             "in all" + (f"; stopped early: {lad.stopped}" if lad.stopped else "") + ".", "",
             f"| dimension | incumbent (median {unit}) | candidate | why tried | result | "
             f"median {unit} | candidate / incumbent, paired [interval] (rounds; the "
             "difference they could detect) |",
             "|---|---|---|---|---|---|---|"]
    for s in lad.steps:
        inc = f"{s.incumbent} ({_num(statistics.median(s.incumbent_values) if s.incumbent_values else None)})"
        if s.skipped:
            lines.append(f"| {_dim(s)} | {inc} | — | — | skipped: {s.skipped} | — "
                         "| — |")
            continue
        for c in s.candidates:
            status = ("**accepted**" if c.status == "accepted" else c.status) + (
                f": {c.reason}" if c.reason and c.status != "accepted" else "")
            lines.append(f"| {_dim(s)} | {inc} | `{c.candidate.label}` | "
                         f"{c.candidate.why} | {status[:300]} | {_num(c.median)} | "
                         f"{_interval(c, lad.screen_drops_below)} |")
        if s.accepted:
            lines.append(f"| {_dim(s)} | | | quality re-check of `{s.accepted}` | "
                         f"{s.quality_recheck} | | |")
    return lines + [""]


def _pareto_lines(r: OptimizationReport) -> list[str]:
    if not r.pareto:
        return []
    gpu = r.pareto[0].memory_kind == "gpu"
    memory = ("the GPU memory NVML reports for the engine's process group, summed over its "
              "GPUs" if gpu else "the engine's measured peak resident set")
    lines = ["### Pareto set (every measured configuration, at the target level)", "",
             f"Medians over each configuration's trials. Memory: {memory}. Quality: top-1 "
             "agreement with the reference (the control is the reference).", "",
             f"| configuration | out tok/s | TTFT p50 ms | ITL p50 ms | "
             f"{'GPU memory MiB' if gpu else 'peak RSS MiB'} | top-1 | on the front |",
             "|---|---|---|---|---|---|---|"]
    def ms(v):
        return "—" if v is None else f"{v * 1e3:.1f}"

    for p in sorted(r.pareto, key=lambda p: -(p.output_tokens_per_s or 0)):
        lines.append(
            f"| {p.label} | {_num(p.output_tokens_per_s, '.1f')} | {ms(p.ttft_p50_s)} | "
            f"{ms(p.itl_p50_s)} | "
            f"{'—' if p.memory_bytes is None else f'{p.memory_bytes / 2**20:.0f}'} | "
            f"{'—' if p.top1_agreement is None else f'{p.top1_agreement:.1%}'} | "
            + ("yes" if p.on_front else f"no (dominated by {p.dominated_by})") + " |")
    return lines + [""]


def _closest_lines(r: OptimizationReport) -> list[str]:
    if not r.closest_to_ceiling:
        return []
    lines = ["### Closest to its ceiling (same level, same envelope)", "",
             "Measured decode rate over the roofline ceiling (estimate), medians per "
             "configuration. A higher fraction of a lower ceiling is not faster: the winner is "
             "chosen on the objective.", "",
             "| concurrency | envelope | closest | ratio | winner | winner's ratio |",
             "|---|---|---|---|---|---|"]
    for c in r.closest_to_ceiling:
        lines.append(f"| {c.level} | {c.envelope} | {c.label} | {c.ratio:.2f} | "
                     f"{c.winner_label} | {_num(c.winner_ratio, '.2f')} |")
    return lines + [""]

