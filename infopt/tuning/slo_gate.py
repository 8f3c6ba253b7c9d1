"""The SLOs as a hard gate (issue 49): a configuration whose measured requests at the target load
do not meet every SLO beyond the sampling noise cannot win, replace the incumbent or be the
engines' choice. Each SLO is judged on the requests of all the configuration's measured trials
pooled (their counts add up; the percentiles shown are the worst trial's), with the exact share
interval the cluster's SLO boundary uses (infopt.analysis.slo_share): met, missed, or undecided,
and undecided is not accepted. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from infopt.analysis.slo_share import DEFAULT_CONFIDENCE, check, meeting_count, overall
from infopt.specs.cluster import SloCheck, Verdict
from infopt.specs.paired import FinalDecision
from infopt.specs.results import ScenarioResult, SloOutcome, Trial


@dataclass(frozen=True)
class SloGate:
    """A configuration's SLO verdict at one load: every SLO's pooled check and what it says."""

    scenario: str
    concurrency: int
    verdict: Verdict
    why: str
    checks: list[SloCheck]

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.MEETS


def _scenarios(trials: Sequence[Trial], name: str | None) -> list[ScenarioResult]:
    out = []
    for t in trials:
        b = t.benchmark
        if b is None or t.objective_value is None:
            continue
        want = name or b.workload.load_scenario
        out += [s for s in b.scenarios if s.name == want]
    return out


def slo_gate(trials: Sequence[Trial], scenario: str | None = None,
             confidence: float = DEFAULT_CONFIDENCE) -> SloGate | None:
    """The SLOs judged on every measured trial's `scenario` (default: the target load) pooled;
    None when the workload states no SLOs or no trial measured it."""
    found = _scenarios(trials, scenario)
    if not found or not found[0].slos:
        return None
    checks = []
    for i, slo in enumerate(found[0].slos):
        requests = sum(s.level.requests for s in found)
        meeting = sum(meeting_count(s.slos[i].requests_meeting_fraction, s.level.requests)
                      for s in found)
        seen = [v for s in found if (v := s.slos[i].observed_s) is not None]
        checks.append(check(slo.metric, slo.percentile, slo.max_s, max(seen, default=None),
                            requests, meeting, confidence))
    verdict, why = overall(checks)
    return SloGate(scenario=found[0].name, concurrency=found[0].level.concurrency,
                   verdict=verdict, why=why, checks=checks)


def _generations(n: int) -> str:
    return f"{n} concurrent generation{'' if n == 1 else 's'}"


def binding(gate: SloGate) -> str:
    """The SLO that binds hardest (missed before undecided, then by how far its percentile is
    over its limit), with by how much and at which load."""
    open_ = [c for c in gate.checks if c.verdict is not Verdict.MEETS]
    if not open_:
        return "every SLO is met"

    def over(c: SloCheck) -> float:
        return (c.observed_s / c.max_s) if c.observed_s is not None else float("inf")

    c = max(open_, key=lambda c: (c.verdict is Verdict.MISSES, over(c)))
    seen = ("every request failed or none had it" if c.observed_s is None else
            f"{c.observed_s:.3g} s measured ({over(c) - 1:+.0%})")
    state = "missed" if c.verdict is Verdict.MISSES else "not shown met"
    return (f"{c.metric} p{c.percentile} <= {c.max_s:g} s {state} at the target load "
            f"({_generations(gate.concurrency)}, scenario {gate.scenario}): {seen}; "
            f"{c.meeting} of {c.requests} requests within it, so {c.share_low:.0%}-"
            f"{c.share_high:.0%} of requests where {c.percentile}% are needed")


def loads_met(trials: Sequence[Trial]) -> list[tuple[int, str, Verdict]]:
    """Each measured load of these trials (a concurrency sweep's levels) with its SLO verdict,
    lowest load first: where the configuration does meet its SLOs, if anywhere."""
    names: list[str] = []
    for t in trials:
        if t.benchmark is not None and t.objective_value is not None:
            names += [s.name for s in t.benchmark.scenarios if s.name not in names]
    gates = [g for n in names if (g := slo_gate(trials, n)) is not None]
    return [(g.concurrency, g.scenario, g.verdict) for g in sorted(gates,
                                                                  key=lambda g: g.concurrency)]


def control_fails(control: SloGate | None) -> str | None:
    """The defaults' SLO failure as a hard requirement they fail (None: they meet the SLOs or
    the workload states none), so a winner that meets them is recommended instead."""
    return None if control is None or control.passed else f"the SLOs: {binding(control)}"


def with_slos(d: FinalDecision, winner: SloGate | None, control: SloGate | None
              ) -> FinalDecision:
    """The decision with the SLOs binding: the recommended configuration must meet them; when
    it does not and the other one does, the other is recommended; when neither does, the
    decision says so and names the binding SLO."""
    if winner is None and control is None:
        return d
    mine, other = (winner, control) if d.recommended == "winner" else (control, winner)
    if mine is None or mine.passed:
        return d.model_copy(update={"slos_met": True})
    name = "the ladder's winner" if d.recommended == "winner" else "the engine's defaults"
    if other is not None and other.passed:
        swap = "control" if d.recommended == "winner" else "winner"
        return d.model_copy(update={
            "recommended": swap, "slos_met": True,
            "why": f"{name} misses the SLOs ({binding(mine)}); the "
                   f"{'defaults' if swap == 'control' else 'winner'} meet them, so "
                   f"{'they are' if swap == 'control' else 'it is'} recommended ({d.why})"})
    return d.model_copy(update={"slos_met": False, "slo_binding": binding(mine),
                                "why": f"no configuration meets the SLOs: {binding(mine)} "
                                       f"({d.why})"})


def _loads_line(name: str, trials: Sequence[Trial]) -> str | None:
    got = loads_met(trials)
    if not got:
        return None
    return f"{name}: " + "; ".join(
        f"{v.value} at {_generations(c)} (scenario {n})"
        for c, n, v in got)


class Measured(NamedTuple):
    """A configuration as the report names it, with the trials that measured it."""

    label: str
    trials: Sequence[Trial]


def slo_outcome(chosen: Measured, others: Sequence[Measured], target_concurrency: int,
                model: str) -> SloOutcome | None:
    """The SLOs against the recommended configuration (`chosen`: its label and trials), and,
    when it misses them, the smallest viable alternatives: the highest load a measured
    configuration does meet them at (`others` too), the replicas that load implies (an
    estimate), and what the plan can size (more GPUs)."""
    label, trials = chosen
    gate = slo_gate(trials)
    if gate is None:
        return None
    if gate.passed:
        return SloOutcome(met=True)
    everyone = [chosen, *others]
    loads = [line for n, t in everyone if (line := _loads_line(n, t)) is not None]
    met_at = [(c, n) for n, t in everyone for c, _, v in loads_met(t) if v is Verdict.MEETS]
    alternatives = []
    if met_at:
        c, n = max(met_at)
        alternatives.append(
            f"fewer concurrent generations: {n} meets the SLOs at {c} (measured); the target "
            f"load of {target_concurrency} would take {math.ceil(target_concurrency / c)} "
            f"replicas of it (an estimate: replicas assumed not to slow each other)")
    else:
        alternatives.append("no measured load met the SLOs, down to the lowest measured: a "
                            "smaller or more quantized model, or faster hardware")
    if any(c.metric == "e2e" and c.verdict is not Verdict.MEETS for c in gate.checks):
        alternatives.append("shorter outputs: end-to-end latency grows with every output "
                            "token, so a lower output cap (max_tokens) shortens it (not "
                            "measured here)")
    alternatives.append(f"more GPUs: `infopt plan --model {model} --gpu-count N "
                        f"--concurrency {target_concurrency}` sizes them (the plan's "
                        "estimate, not measured)")
    return SloOutcome(met=False, binding=f"{label}: {binding(gate)}", loads=loads,
                      alternatives=alternatives)
