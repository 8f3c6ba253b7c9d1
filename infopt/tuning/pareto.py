"""Across every measured configuration of a run: the Pareto set over throughput, latency,
memory and quality at the workload's target level, and the configuration closest to its
ceiling compared at the same level and envelope as the objective winner. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from infopt.specs.ladder import CeilingPick, ParetoPoint
from infopt.specs.results import Trial

# (axis, higher is better): the four axes the specification keeps.
AXES: tuple[tuple[str, bool], ...] = (("output_tokens_per_s", True), ("ttft_p50_s", False),
                                      ("itl_p50_s", False), ("memory_bytes", False),
                                      ("top1_agreement", True))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def config_label(t: Trial, with_engine: bool = False) -> str:
    """A trial's configuration name ("control", its candidate label); with its engine when a
    run tuned two (the report, the Pareto set and the plots name configurations alike)."""
    name = "control" if t.role == "control" else (t.value or t.trial_id)
    return f"{t.config.engine.value} {name}" if with_engine else name


def _label(t: Trial) -> str:
    return config_label(t)


def points(trials: list[Trial], target_concurrency: int,
           label_of: Callable[[Trial], str] | None = None) -> list[ParetoPoint]:
    """One point per measured configuration (its trials' medians at the target level)."""
    groups: dict[str, list[Trial]] = {}
    for t in trials:
        if t.benchmark is not None and t.objective_value is not None:
            groups.setdefault((label_of or _label)(t), []).append(t)
    # One memory axis for every point: a GPU engine's host RSS says nothing of what it
    # allocated on the GPU, so once NVML read any trial's GPU memory, only GPU memory counts.
    on_gpu = any(t.gpu_memory_bytes for t in trials)
    out = []
    for label, ts in groups.items():
        # Every grouped trial has a benchmark (the filter above); the check narrows the type.
        lvls = [lv for t in ts if t.benchmark is not None for lv in t.benchmark.levels
                if lv.concurrency == target_concurrency]
        top1 = [t.quality.candidate.top1_agreement for t in ts
                if t.quality is not None and t.quality.candidate is not None]
        memory = [t.gpu_memory_bytes for t in ts if t.gpu_memory_bytes] if on_gpu else \
            [lv.engine_rss_peak_bytes for lv in lvls if lv.engine_rss_peak_bytes]
        out.append(ParetoPoint(
            label=label, trial_ids=[t.trial_id for t in ts],
            output_tokens_per_s=_median([lv.output_tokens_per_s for lv in lvls]),
            ttft_p50_s=_median([lv.ttft_s.p50 for lv in lvls if lv.ttft_s.p50 is not None]),
            itl_p50_s=_median([lv.itl_s.p50 for lv in lvls if lv.itl_s.p50 is not None]),
            memory_bytes=int(statistics.median(memory)) if memory else None,
            memory_kind="gpu" if on_gpu else "host_rss",
            top1_agreement=_median(top1) if top1 else (
                1.0 if all(t.role == "control" for t in ts) else None),
            on_front=True))
    return front(out)


def _dominates(a: ParetoPoint, b: ParetoPoint) -> bool:
    """a at least as good as b on every axis both have, strictly better on one."""
    strictly = False
    for axis, higher in AXES:
        x, y = getattr(a, axis), getattr(b, axis)
        if x is None or y is None:
            if x is None and y is not None:
                return False  # unknown on a's side: a cannot be shown at least as good
            continue
        if (x < y) if higher else (x > y):
            return False
        strictly = strictly or x != y
    return strictly


def front(pts: list[ParetoPoint]) -> list[ParetoPoint]:
    out = []
    for p in pts:
        by = next((q for q in pts if q is not p and _dominates(q, p)), None)
        out.append(p.model_copy(update={"on_front": by is None,
                                        "dominated_by": by.label if by else None}))
    return out


def closest_to_ceiling(trials: list[Trial], winner_label: str,
                       label_of: Callable[[Trial], str] = _label) -> list[CeilingPick]:
    """Per (level, envelope): the configuration with the highest median measured/ceiling
    ratio, beside the winner's own ratio there. A higher fraction of a lower ceiling does not
    make a configuration faster: the winner is chosen on the objective, this is the gap."""
    table: dict[tuple[int, str], dict[str, list[float]]] = {}
    for t in trials:
        if t.objective_value is None:
            continue
        for c in t.ceilings:
            level = _level_of(c.metric)
            if level is None:
                continue
            table.setdefault((level, c.envelope.value), {}).setdefault(
                label_of(t), []).append(c.ratio)
    picks = []
    for (level, env), by_label in sorted(table.items()):
        medians = {k: statistics.median(v) for k, v in by_label.items()}
        best = max(medians, key=medians.__getitem__)
        picks.append(CeilingPick(level=level, envelope=env, label=best, ratio=medians[best],
                                 winner_label=winner_label,
                                 winner_ratio=medians.get(winner_label)))
    return picks


def _level_of(metric: str) -> int | None:
    """The concurrency in "decode tokens/s at concurrency 4 (...)"."""
    words = metric.split()
    if "concurrency" in words:
        i = words.index("concurrency")
        if i + 1 < len(words) and words[i + 1].isdigit():
            return int(words[i + 1])
    return None
