"""The climb: the tuning ladder's whole policy as a generator that yields the next `TrialSpec`
and receives the finished `Trial`. Pure (no Prefect, no engine, no I/O; the wall clock and the
checks that need the world are passed in), so a recorded run replays through it in a unit test
and a black-box search (infopt.tuning.blackbox) stands behind the same interface.

The policy: the control (the engine's defaults) and the baseline interleaved, `repeats` times
each (the baseline's first trial checks the whole API contract); a baseline lacking required
API features that one known change provides is re-planned once with that change; then every
dimension in the specification's order: candidates derived from the incumbent, pruned where this
machine cannot run or fit them, each screened with one gated trial, the promising ones (best
screen first, at most `CONFIRMATIONS_PER_STEP`) confirmed with repeats interleaved with the
incumbent's top-ups, and the first accepted carried forward. The trial and wall-time budgets
stop it between trials.

A driver (`drive`; flows/ladder.py, bench/tuner_bench.py, tests) runs each spec and sends back
the trial. When it starts a trial afresh (`-retryN`, tasks.trial.run_attempts) it sends the last
attempt; the climb counts the attempts from its id, so trial ids and budgets match the driver's
record of every attempt."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infopt.contract.remedies import remedy_for_required
from infopt.costmodel.kv_check import stop_reason as kv_stop_reason
from infopt.specs.approval import GateAnswer
from infopt.specs.contract import ContractGap, ContractRemedy
from infopt.specs.fit import LAYOUT_FAMILIES
from infopt.specs.ladder import (
    CandidateResult,
    CandidateStatus,
    Dimension,
    LadderCandidate,
    LadderOutcome,
    LadderStep,
)
from infopt.specs.request import Budgets
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig, same_config, with_knobs
from infopt.specs.trial import TrialRole, TrialSpec, changes_from
from infopt.tuning import decide

if TYPE_CHECKING:  # the adapters' rules and facts arrive as data
    from infopt.engines.ladder import DimensionRule, LadderFacts

LOG = logging.getLogger("infopt.tuning.climb")


@dataclass
class Incumbent:
    label: str  # "baseline" or the last accepted candidate's label
    config: AnyServingConfig
    trials: list[Trial]
    dimension: Dimension | None = None  # the dimension of its last change
    chain: list[str] = field(default_factory=list)  # accepted labels, in order

    @property
    def values(self) -> list[float]:
        return [t.objective_value for t in self.trials if t.objective_value is not None]

    @property
    def winner_label(self) -> str:
        return " + ".join(["baseline", *self.chain])


def _no_gaps(trial: Trial) -> list[ContractGap]:
    return []


def _runs_anywhere(config: AnyServingConfig) -> str | None:
    return None


@dataclass(frozen=True)
class ClimbPlan:
    """What the climb needs from the run: its fixed points and rules as data, and the checks
    that need the world (this CPU, the memory fit, the engine's contract remedies, the facts
    measured by the first baseline trial) as functions."""

    control: AnyServingConfig  # the engine's defaults: every change is stated against it
    baseline: AnyServingConfig
    engine: str
    rules: dict[Dimension, DimensionRule | None]  # infopt.tuning.ladder.rules_for
    facts: Callable[[Trial], LadderFacts]  # from the first baseline trial
    objective: str
    higher: bool  # higher objective is better
    budgets: Budgets
    seed: int = 0
    # Why a candidate's configuration cannot run here or does not fit (None: it can).
    why_pruned: Callable[[AnyServingConfig], str | None] = _runs_anywhere
    gaps: Callable[[Trial], list[ContractGap]] = _no_gaps  # the baseline's contract gaps
    approvals: dict[str, GateAnswer] = field(default_factory=dict)  # weights path -> answer
    id_prefix: str = ""  # a comparator engine's trials: "vllm-t00-control-r1"
    clock: Callable[[], float] = time.monotonic  # seconds, for the wall-time budget
    t_start: float | None = None  # on `clock`; None: when the climb starts
    # The flow passes Prefect's run logger (a LoggerAdapter), so the UI shows the decisions.
    log: logging.Logger | logging.LoggerAdapter = LOG


@dataclass
class ClimbOutcome:
    """What the climb decided. `ladder` None: the baseline was broken (`broken`, with its
    contract gaps), so nothing was climbed; the driver says why and stops."""

    ladder: LadderOutcome | None
    history: list[Incumbent]  # the incumbents in the order accepted, the baseline first
    pruned: list[str]  # "label: why", for the report
    launches: int  # attempts of the current plan (a re-plan starts it afresh)
    remedy: ContractRemedy | None = None  # the contract remedy the baseline was re-planned with
    first_gaps: list[ContractGap] = field(default_factory=list)  # the first baseline's gaps
    # Attempts the first plan made before the remedy re-planned it (its trials the re-planned
    # run reloads by key are not run again; the others are the report's evidence).
    replanned_after: int = 0
    broken: Trial | None = None
    broken_gaps: list[ContractGap] = field(default_factory=list)


Climb = Generator[TrialSpec, Trial, ClimbOutcome]


def climb(plan: ClimbPlan) -> Climb:
    """The ladder as a generator: `spec = gen.send(trial)` until it returns its outcome."""
    return _Climber(plan).run()


def drive(gen: Generator[TrialSpec, Trial, Any],
          run: Callable[[TrialSpec], list[Trial]]) -> tuple[Any, list[Trial]]:
    """Run every spec `gen` yields with `run` (the attempts of one trial, the last one the
    outcome), send it the last attempt; returns its outcome and every attempt, in order."""
    trials: list[Trial] = []
    try:
        spec = next(gen)
        while True:
            attempts = run(spec)
            trials.extend(attempts)
            spec = gen.send(attempts[-1])
    except StopIteration as done:
        return done.value, trials


def attempts_of(spec: TrialSpec, trial: Trial) -> int:
    """How many starts `trial` (the last attempt of `spec`) took: `<id>-retry<n>` is n + 1."""
    m = re.fullmatch(re.escape(spec.trial_id) + r"-retry(\d+)", trial.trial_id)
    return int(m.group(1)) + 1 if m else 1


def _carried(trial: Trial, config: AnyServingConfig) -> AnyServingConfig:
    # A start remedy (a known failure's contract-preserving fix, e.g. an explicit CPU KV space
    # where the defaults want more memory than is free) carries into every later trial, so no
    # candidate fails the same way first.
    return trial.config if trial.remedy is not None and trial.benchmark is not None else config


def _status(trial: Trial) -> CandidateStatus:
    failed = trial.failed or ""
    return ("gate" if failed.startswith("rejected by") else
            "undecided" if failed.startswith("undecided by") else "failed")


def _broken(trial: Trial, gaps: list[ContractGap]) -> bool:
    """Nothing to tune without a baseline that starts, keeps the API contract and passes the
    quality gate."""
    return (any(g.required for g in gaps) or trial.objective_value is None
            or (trial.quality is not None and not trial.quality.passed))


@dataclass
class _Replan:
    remedy: ContractRemedy
    gaps: list[ContractGap]


@dataclass
class _Broken:
    trial: Trial
    gaps: list[ContractGap]


def _screened_value(t: Trial) -> float:
    """A screened trial's objective: `_step` screens only trials that measured one."""
    assert t.objective_value is not None
    return t.objective_value


class _Climber:
    """The climb's state: attempts so far (trial ids count them), the budgets' stop, the
    pruned candidates."""

    def __init__(self, plan: ClimbPlan) -> None:
        self.p = plan
        self.launches = 0
        self.stopped: str | None = None
        self.pruned: list[str] = []
        self.t_start = plan.clock() if plan.t_start is None else plan.t_start

    # -- trials -------------------------------------------------------------------------------

    def _trial(self, spec: TrialSpec) -> Generator[TrialSpec, Trial, Trial]:
        trial = yield spec
        self.launches += attempts_of(spec, trial)
        if trial.kv is not None and trial.kv.stops_ladder and self.stopped is None:
            self.stopped = kv_stop_reason(trial.trial_id, trial.kv)
            self.p.log.warning("ladder: %s", self.stopped)
        return trial

    def _spec(self, role: TrialRole, config: AnyServingConfig, label: str | None,
              dimension: Dimension | None, repeat: int, *, with_contract: bool = False,
              approvals: list[GateAnswer] | None = None,
              incumbent: AnyServingConfig | None = None) -> TrialSpec:
        name = "control" if role is TrialRole.CONTROL else label
        return TrialSpec(trial_id=f"{self.p.id_prefix}t{self.launches:02d}-{name}-r{repeat}",
                         role=role, config=config, changes=changes_from(self.p.control, config),
                         dimension=dimension, value=label, repeat=repeat, seed=self.p.seed,
                         with_contract=with_contract, approvals=approvals or [],
                         incumbent=incumbent)

    def budget_left(self) -> bool:
        b = self.p.budgets
        if self.stopped is None:
            if b.max_trials is not None and self.launches >= b.max_trials:
                self.stopped = f"trial budget spent ({b.max_trials} trials)"
            elif b.max_wall_s is not None and self.p.clock() - self.t_start > b.max_wall_s:
                self.stopped = f"wall-time budget spent ({b.max_wall_s:.0f} s)"
            if self.stopped:
                self.p.log.warning("ladder: %s after %d trials", self.stopped, self.launches)
        return self.stopped is None

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> Climb:
        p = self.p
        start = yield from self._measure_start(p.baseline, allow_remedy=True)
        remedy: ContractRemedy | None = None
        first_gaps: list[ContractGap] = []
        replanned_after = 0
        if isinstance(start, _Replan):
            p.log.warning("the baseline lacks required API features; candidate change: %s",
                          start.remedy.change)
            remedy, first_gaps = start.remedy, start.gaps
            replanned_after, self.launches = self.launches, 0
            baseline = with_knobs(p.baseline, remedy.knob_changes)
            start = yield from self._measure_start(baseline, allow_remedy=False)
        if isinstance(start, _Broken):
            return ClimbOutcome(ladder=None, history=[], pruned=self.pruned,
                                launches=self.launches, broken=start.trial,
                                broken_gaps=start.gaps, remedy=remedy, first_gaps=first_gaps,
                                replanned_after=replanned_after)
        assert isinstance(start, Incumbent)
        ladder, history = yield from self._climb(start, p.facts(start.trials[0]))
        return ClimbOutcome(ladder=ladder, history=history, pruned=self.pruned,
                            launches=self.launches, remedy=remedy, first_gaps=first_gaps,
                            replanned_after=replanned_after)

    def _measure_start(self, baseline: AnyServingConfig, allow_remedy: bool):
        """The control and the baseline, interleaved, `repeats` times each. When the control
        is the baseline (vLLM's defaults serve the full context) it runs once."""
        separate = not same_config(self.p.control, baseline)
        control, base_trials = self.p.control, []
        for rnd in range(1, self.p.budgets.repeats + 1):
            if separate:
                c = yield from self._trial(self._spec(TrialRole.CONTROL, control, None, None,
                                                      rnd))
                control = _carried(c, control)
            t = yield from self._trial(self._spec(TrialRole.BASELINE, baseline, "baseline",
                                                  None, rnd, with_contract=rnd == 1))
            if rnd == 1:
                gaps = self.p.gaps(t)
                remedy = remedy_for_required(gaps)
                if allow_remedy and remedy is not None:
                    return _Replan(remedy, gaps)
                if _broken(t, gaps):
                    return _Broken(t, gaps)
            baseline = _carried(t, baseline)
            base_trials.append(t)
        return Incumbent("baseline", baseline, base_trials)

    def _climb(self, inc: Incumbent, facts: LadderFacts):
        """Every dimension in order from `inc`; returns the outcome and the incumbents in the
        order they were accepted (the baseline first: the fallbacks of the final check)."""
        p = self.p
        history, steps = [inc], []
        for dim, rule in p.rules.items():
            derived = (f"not run: {self.stopped}" if self.stopped else
                       decide.derive(rule, p.engine, inc.config, facts))
            if isinstance(derived, str):
                steps.append(LadderStep(dimension=dim, incumbent=inc.label,
                                        incumbent_values=inc.values, skipped=derived))
                continue
            if any(c.family for c in derived):
                inc = yield from self._families(inc, dim, rule, facts, steps, history)
                continue
            step, new = yield from self._step(inc, dim, derived)
            steps.append(step)
            if new is not None:
                inc = new
                history.append(inc)
        b = p.budgets
        return LadderOutcome(
            objective=p.objective, higher_is_better=p.higher,
            rule=decide.rule_text(p.objective, p.higher, b.min_gain, b.repeats),
            steps=steps, accepted=inc.chain, winner_label=inc.winner_label,
            stopped=self.stopped, launches=self.launches), history

    def _families(self, inc: Incumbent, dim: Dimension, rule: DimensionRule | None,
                  facts: LadderFacts,
                  steps: list[LadderStep], history: list[Incumbent]):
        """The parallel layouts family by family (TP -> PP -> DP -> EP), one step each with its
        own screens and confirmations, each family's candidates derived from the incumbent the
        families before it left (so PP competes with the TP winner, not with TP=1). Returns
        the incumbent after the last family."""
        p = self.p
        for family in LAYOUT_FAMILIES:
            derived = decide.derive(rule, p.engine, inc.config, facts)
            mine = [c for c in derived if c.family == family] \
                if not isinstance(derived, str) else []
            skipped = (f"not run: {self.stopped}" if self.stopped else None if mine else
                       f"no {family} layout to try from {inc.label} on {facts.gpu_count} GPUs"
                       + (" (expert parallelism is for MoE models whose expert count the "
                          "ranks divide)" if family == "EP" else ""))
            if skipped is not None:
                steps.append(LadderStep(dimension=dim, family=family, incumbent=inc.label,
                                        incumbent_values=inc.values, skipped=skipped))
                continue
            step, new = yield from self._step(inc, dim, mine)
            step.family = family
            steps.append(step)
            if new is not None:
                inc = new
                history.append(inc)
        return inc

    def _prune(self, inc: Incumbent, cands: list[LadderCandidate]
               ) -> tuple[list[LadderCandidate], list[CandidateResult]]:
        kept, pruned = [], []
        for c in cands:
            why = self.p.why_pruned(decide.apply(inc.config, c))
            if why is None:
                kept.append(c)
            else:
                pruned.append(CandidateResult(candidate=c, status="pruned", reason=why))
        self.pruned += [f"{r.candidate.label}: {r.reason}" for r in pruned]
        return kept, pruned

    def _step(self, inc: Incumbent, dim: Dimension, cands: list[LadderCandidate]):
        """Screen each kept candidate once (an ordered series stops at its first value no
        better than the one before), then confirm the promising ones."""
        step = LadderStep(dimension=dim, incumbent=inc.label, incumbent_values=inc.values)
        kept, step.candidates = self._prune(inc, cands)
        screened: list[tuple[LadderCandidate, Trial]] = []
        series_last: dict[str, float] = {}
        stopped_series: dict[str, str] = {}
        for c in kept:
            if c.series in stopped_series:
                step.candidates.append(CandidateResult(candidate=c, status="not run",
                                                       reason=stopped_series[c.series]))
                continue
            if not self.budget_left():
                assert self.stopped is not None  # budget_left() is False only once it is set
                step.candidates.append(CandidateResult(candidate=c, status="not run",
                                                       reason=self.stopped))
                continue
            t = yield from self._trial(self._spec(
                TrialRole.TUNING, decide.apply(inc.config, c), c.label, dim, 1,
                approvals=self._approvals(c), incumbent=inc.config))
            if t.objective_value is None:
                step.candidates.append(CandidateResult(candidate=c, status=_status(t),
                                                       reason=t.failed or "no measurement",
                                                       trial_ids=[t.trial_id]))
                continue
            screened.append((c, t))
            if c.series:
                if decide.series_stops(series_last.get(c.series), t.objective_value,
                                       self.p.higher):
                    stopped_series[c.series] = (f"{c.series} stopped climbing at {c.label}: "
                                                "no better than the value before it")
                series_last[c.series] = t.objective_value
        new = yield from self._confirm(inc, dim, screened, step)
        return step, new

    def _approvals(self, c: LadderCandidate) -> list[GateAnswer]:
        path = c.changes.get("model_path")
        return [self.p.approvals[path]] if isinstance(path, str) and path in self.p.approvals \
            else []

    def _confirm(self, inc: Incumbent, dim: Dimension,
                 screened: list[tuple[LadderCandidate, Trial]], step: LadderStep):
        """The promising candidates, best screen first, confirmed with repeats against the
        incumbent (topped up to as many); the first accepted becomes the new incumbent."""
        p, b = self.p, self.p.budgets
        sign = 1 if p.higher else -1
        order = sorted(screened, key=lambda ct: -sign * _screened_value(ct[1]))
        confirmations = 0
        for i, (c, first) in enumerate(order):
            values = [_screened_value(first)]
            result = CandidateResult(candidate=c, status="worse", reason="", median=values[0],
                                     trial_ids=[first.trial_id], values=values)
            step.candidates.append(result)
            if not decide.promising(inc.values, values[0], p.higher, b.min_gain):
                worst = min(inc.values) if p.higher else max(inc.values)
                result.reason = (f"screened {values[0]:.4g}: no better than the incumbent's "
                                 f"worst repeat ({worst:.4g})")
                continue
            if confirmations >= decide.CONFIRMATIONS_PER_STEP or not self.budget_left():
                result.status, result.reason = "not run", (
                    self.stopped or f"promising ({values[0]:.4g}) but the step's "
                    f"{decide.CONFIRMATIONS_PER_STEP} confirmations were spent")
                continue
            confirmations += 1
            trials = [first] + (yield from self._repeats(inc, c, dim))
            result.values = [t.objective_value for t in trials if t.objective_value is not None]
            result.trial_ids = [t.trial_id for t in trials]
            result.median = decide.median(result.values)
            ok, result.comparison, result.reason = decide.judge(
                inc.values, result.values, p.higher, p.seed, b.min_gain)
            failed = [t for t in trials if t.objective_value is None]
            if failed:
                ok = False
                result.reason = f"a repeat did not measure ({failed[0].failed}); " + result.reason
            if not ok:
                result.status = "within noise"
                continue
            result.status = "accepted"
            step.accepted = c.label
            q = trials[0].quality
            step.quality_recheck = q.summary if q is not None else "no quality reference"
            p.log.info("ladder %s: %s accepted (%s)", dim.value, c.label, result.reason)
            for c2, t2 in order[i + 1:]:  # screened lower: kept in the record, not confirmed
                v = _screened_value(t2)
                step.candidates.append(CandidateResult(
                    candidate=c2, status="not run", median=v, values=[v],
                    trial_ids=[t2.trial_id],
                    reason=f"screened {v:.4g} once; its confirmation did not run: {c.label} "
                           "screened better and was accepted"))
            return Incumbent(c.label, decide.apply(inc.config, c), trials, dim,
                             [*inc.chain, c.label])
        return None

    def _repeats(self, inc: Incumbent, c: LadderCandidate, dim: Dimension):
        """The candidate's remaining repeats, each after an incumbent trial while the
        incumbent has fewer than `repeats` (so drift hits both alike); returns the candidate's
        trials. The incumbent's top-ups carry no `incumbent` (it is not a change)."""
        out: list[Trial] = []
        config = decide.apply(inc.config, c)
        role = TrialRole.BASELINE if inc.label == "baseline" else TrialRole.TUNING
        for rnd in range(2, self.p.budgets.repeats + 1):
            if len(inc.trials) < rnd and self.budget_left():
                inc.trials.append((yield from self._trial(self._spec(
                    role, inc.config, inc.label, inc.dimension, len(inc.trials) + 1))))
            if not self.budget_left():
                break
            out.append((yield from self._trial(self._spec(
                TrialRole.TUNING, config, c.label, dim, rnd, incumbent=inc.config))))
        return out
