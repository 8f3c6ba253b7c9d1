"""What a re-optimization re-measures, read from an accepted run's report. Pure.

The winner (the configuration of `winner_trial_id`) and its runner-up (the other
configuration of the same engine with the best median objective; ties go to the one with more
trials), each with the objective values of its stored trials. A configuration is its serving
config without the port (a free one is picked per start), so the ladder's repeats of one
candidate, and an incumbent re-measured beside a candidate, are one group."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from infopt.specs.keys import content_key
from infopt.specs.results import OptimizationReport, Trial
from infopt.specs.serving import AnyServingConfig, config_identity
from infopt.tuning.control import higher_is_better
from infopt.tuning.pareto import config_label


@dataclass(frozen=True)
class Pick:
    slot: str  # "winner" or "runner-up": the trial ids of the re-measurement
    label: str
    config: Any  # the ServingConfig to start again
    stored: list[float]  # the stored trials' objective values
    stored_trial_ids: list[str]
    # Whether the stored values are steady-state rates (docs/metrics.md); a run stored before
    # the throughput objective read the steady-state window is compared on the whole window.
    steady: bool = True


def config_id(config: AnyServingConfig) -> str:
    """The configuration a trial measured, the same for its repeats (where it listens aside)."""
    return content_key(config_identity(config))


def measured_groups(report: OptimizationReport) -> dict[str, list[Trial]]:
    """The report engine's measured trials, grouped by configuration (first-seen order)."""
    groups: dict[str, list[Trial]] = {}
    for t in report.trials:
        if t.objective_value is not None and t.config.engine.value == report.engine:
            groups.setdefault(config_id(t.config), []).append(t)
    return groups


def stored_spread_groups(report: OptimizationReport) -> list[list[float]]:
    """Every stored configuration's objective values: the start-to-start noise (those with one
    trial add nothing to it)."""
    # measured_groups keeps measured trials only; the check narrows the type.
    return [[t.objective_value for t in g if t.objective_value is not None]
            for g in measured_groups(report).values()]


def objective_is_steady(t: Trial) -> bool:
    """Whether the trial's objective is a steady-state rate, or not a rate the window changes
    (a latency, goodput): the stored trials of an older run read the whole window."""
    if t.benchmark is None:
        return True
    w = t.benchmark.workload
    lv = t.benchmark.scenario(w.target_scenario).level
    return w.objective.value != "throughput" or lv.steady_output_tokens_per_s is not None


def as_stored(t: Trial, pick: Pick) -> float | None:
    """The fresh trial's objective as the pick's stored values define it."""
    if pick.steady or t.benchmark is None:
        return t.objective_value
    w = t.benchmark.workload
    return t.benchmark.scenario(w.target_scenario).level.output_tokens_per_s


def picks(report: OptimizationReport) -> list[Pick]:
    """[winner, runner-up] (the runner-up only when the run measured another configuration)."""
    groups = measured_groups(report)
    by_id = {t.trial_id: t for t in report.trials}
    winner = by_id.get(report.winner_trial_id)
    if winner is None or config_id(winner.config) not in groups:
        raise ValueError(f"report {report.run_id}: its winner trial {report.winner_trial_id} "
                         "has no measured objective to compare against")
    wid = config_id(winner.config)
    higher = higher_is_better(report.workload.objective)

    def pick(slot: str, cid: str, label: str) -> Pick:
        g = groups[cid]
        return Pick(slot=slot, label=label, config=g[0].config,
                    stored=[t.objective_value for t in g if t.objective_value is not None],
                    stored_trial_ids=[t.trial_id for t in g],
                    steady=all(objective_is_steady(t) for t in g))

    out = [pick("winner", wid, report.winner_label)]
    others = [(cid, g) for cid, g in groups.items() if cid != wid]
    if others:
        sign = 1 if higher else -1
        cid, g = max(others, key=lambda cg: (sign * statistics.median(
            [t.objective_value for t in cg[1] if t.objective_value is not None]), len(cg[1])))
        out.append(pick("runner-up", cid, config_label(g[0])))
    return out
