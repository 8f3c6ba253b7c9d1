"""`infopt compare RUN_A RUN_B`: two finished runs side by side, on the same workload only. For
the winner and for the control (the engine's defaults: an engine upgrade shows here first),
each metric at the target level over its repeated trials, run B against run A, with the
bootstrap interval of the difference (the same rule as every ladder decision)."""

from __future__ import annotations

import statistics

from infopt.analysis.compare import bootstrap_diff
from infopt.report.rerender import load_measured_run
from infopt.specs.base import InputError, Spec
from infopt.specs.comparison import Comparison
from infopt.specs.results import OptimizationReport, Trial

# (metric, unit, higher is better, value of a trial at the target level)
METRICS = (
    ("objective", None, None, lambda t, c: t.objective_value),
    ("output tokens/s", "tokens/s", True, lambda t, c: t.benchmark.level(c).output_tokens_per_s),
    ("TTFT p50", "ms", False, lambda t, c: _ms(t.benchmark.level(c).ttft_s.p50)),
    ("ITL p50", "ms", False, lambda t, c: _ms(t.benchmark.level(c).itl_s.p50)),
    ("E2E p95", "ms", False, lambda t, c: _ms(t.benchmark.level(c).e2e_s.p95)),
)


def _ms(v: float | None) -> float | None:
    return None if v is None else 1000 * v


class MetricDelta(Spec):
    config: str  # "winner" or "control"
    metric: str
    unit: str | None
    a_median: float | None
    b_median: float | None
    n_a: int
    n_b: int
    comparison: Comparison | None  # None: fewer than 2 trials on a side
    note: str | None = None


class RunComparison(Spec):
    run_a: str
    run_b: str
    objective: str
    higher_is_better: bool
    a: str  # engine, version, winner label
    b: str
    deltas: list[MetricDelta]


def _same_workload(a: OptimizationReport, b: OptimizationReport) -> None:
    wa = a.workload.model_dump(mode="json")
    wb = b.workload.model_dump(mode="json")
    if diff := sorted(k for k in wa.keys() | wb.keys() if wa.get(k) != wb.get(k)):
        raise InputError(f"runs {a.run_id} and {b.run_id} measured different workloads "
                         f"(differing: {', '.join(diff)}): their numbers do not compare. "
                         "Compare runs made from the same target file.")


def _winner_trials(r: OptimizationReport) -> list[Trial]:
    won = next(t for t in r.trials if t.trial_id == r.winner_trial_id)
    return [t for t in r.trials if t.config == won.config and t.objective_value is not None]


def _control_trials(r: OptimizationReport) -> list[Trial]:
    own = [t for t in r.trials if t.role == "control" and t.config.engine.value == r.engine
           and t.objective_value is not None]
    return own or [t for t in r.trials if t.role == "baseline" and t.objective_value is not None
                   and t.config.engine.value == r.engine]


def _delta(config: str, metric, ta: list[Trial], tb: list[Trial], c: int, higher: bool,
           seed: int) -> MetricDelta:
    name, unit, metric_higher, get = metric
    va = [v for t in ta if (v := get(t, c)) is not None]
    vb = [v for t in tb if (v := get(t, c)) is not None]
    better = higher if metric_higher is None else metric_higher
    cmp = (bootstrap_diff(va, vb, higher_is_better=better, seed=seed)
           if len(va) >= 2 and len(vb) >= 2 else None)
    return MetricDelta(config=config, metric=name, unit=unit,
                       a_median=statistics.median(va) if va else None,
                       b_median=statistics.median(vb) if vb else None, n_a=len(va),
                       n_b=len(vb), comparison=cmp,
                       note=None if cmp else "fewer than 2 trials on a side: no interval")


def compare_runs(run_a: str, run_b: str, runs_dir: str | None = None,
                 seed: int = 0) -> RunComparison:
    _, a = load_measured_run(run_a, runs_dir)
    _, b = load_measured_run(run_b, runs_dir)
    _same_workload(a, b)
    from infopt.tuning.control import higher_is_better

    higher = higher_is_better(a.workload.objective)
    c = a.workload.target_concurrency
    deltas = [_delta(cfg, m, fa(a), fa(b), c, higher, seed)
              for cfg, fa in (("winner", _winner_trials), ("control", _control_trials))
              for m in METRICS]
    return RunComparison(run_a=run_a, run_b=run_b, objective=a.workload.objective.value,
                         higher_is_better=higher,
                         a=f"{a.engine} {a.engine_version}: {a.winner_label}",
                         b=f"{b.engine} {b.engine_version}: {b.winner_label}", deltas=deltas)


def render_comparison(rc: RunComparison) -> str:
    lines = [f"A = {rc.run_a} ({rc.a})", f"B = {rc.run_b} ({rc.b})",
             f"Objective: {rc.objective} ({'higher' if rc.higher_is_better else 'lower'} is "
             "better); medians over each configuration's trials at the target level; B - A "
             "with its 95% bootstrap interval.", "",
             f"{'config':8} {'metric':16} {'A (n)':>20} {'B (n)':>20} "
             f"{'B - A [95% interval]':>34}  verdict"]
    for d in rc.deltas:
        unit = f" {d.unit}" if d.unit else ""

        def cell(v, n, unit=unit):
            return "-" if v is None else f"{v:.4g}{unit} ({n})"
        if d.comparison is None:
            interval, verdict = "-", d.note
        else:
            c = d.comparison
            interval = f"{c.diff:+.4g} [{c.ci_low:+.4g}, {c.ci_high:+.4g}]"
            verdict = {"b_better": "B better", "a_better": "A better",
                       "no_difference": "no difference beyond the noise"}[c.verdict]
        lines.append(f"{d.config:8} {d.metric:16} {cell(d.a_median, d.n_a):>20} "
                     f"{cell(d.b_median, d.n_b):>20} {interval:>34}  {verdict}")
    return "\n".join(lines)
