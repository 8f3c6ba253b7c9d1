"""Every trial of a run as table rows (the Prefect table artifact): measured values with their
units in the column names, at the workload's target concurrency."""

from __future__ import annotations

from infopt.specs.results import OptimizationReport, Trial
from infopt.specs.workload import OBJECTIVE_UNIT


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 2)


def trial_row(t: Trial, target: int, unit: str) -> dict:
    lvl = None
    if t.benchmark is not None:
        lvl = next((lv for lv in t.benchmark.levels if lv.concurrency == target), None)
    return {
        "trial": t.trial_id, "engine": t.config.engine.value, "role": t.role,
        "dimension": t.dimension, "change": t.value, "repeat": t.repeat,
        f"objective ({unit})": t.objective_value,
        "quality": None if t.quality is None else ("passed" if t.quality.passed else "failed"),
        f"TTFT p50 at {target} (ms)": _ms(lvl.ttft_s.p50) if lvl else None,
        f"ITL p50 at {target} (ms)": _ms(lvl.itl_s.p50) if lvl else None,
        "prompt tokens from the prefix cache (%)": (
            None if lvl is None or lvl.prefix_hit_ratio is None
            else round(100 * lvl.prefix_hit_ratio, 1)),
        "draft tokens accepted (%)": (
            None if lvl is None or lvl.draft_acceptance is None
            else round(100 * lvl.draft_acceptance, 1)),
        "requests": lvl.requests if lvl else None, "errors": lvl.errors if lvl else None,
        "failed": t.failed, "records": f"trials/{t.key}/requests.jsonl" if t.key else None,
    }


def trial_rows(r: OptimizationReport) -> list[dict]:
    unit = OBJECTIVE_UNIT[r.workload.objective]
    return [trial_row(t, r.workload.target_concurrency, unit) for t in r.trials]
