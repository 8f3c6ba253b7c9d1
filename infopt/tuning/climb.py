"""The climb: the tuning ladder's whole policy as a generator that yields the next `TrialSpec`
and receives the finished `Trial`. Pure (no Prefect, no engine, no I/O; the wall clock and the
checks that need the world are passed in), so a recorded run replays through it in a unit test
and a black-box search (infopt.tuning.blackbox) stands behind the same interface.

The policy, every verdict on paired rounds (infopt.tuning.rounds: the candidate and its
incumbent measured back to back, alternating which goes first, so what drifts hits both):
- the control (the engine's defaults) and the baseline, `repeats` rounds (the baseline's first
  trial checks the whole API contract); a baseline lacking required API features that one
  known change provides is re-planned once with that change. Their paired spread is the run's
  noise, which sizes the measurement window of every later trial (budgets.window_rel_noise);
- every dimension in the specification's order: candidates derived from the incumbent, pruned
  where this machine cannot run or fit them, each screened with one paired round; the promising
  ones (best screen first, at most `CONFIRMATIONS_PER_STEP`) confirmed with rounds added until
  decided or `budgets.max_rounds`; the first accepted carried forward;
- the decision: the ladder's winner against the control, in paired rounds again, and the
  control's end against its start (drift: when it moved, the comparison is made afresh);
  the run recommends the defaults unless the winner beats them or they fail a hard
  requirement (infopt.tuning.final).
The trial and wall-time budgets stop the ladder between rounds; the decision always gets its
`repeats` rounds.

A driver (flows/climb.py; `drive` in infopt.tuning.climb_data for the bench and tests) runs
each spec and sends back the trial. A trial whose engine a signal killed is asked again
(`<id>-retryN`, up to `budgets.retries`), so the climb sees every attempt: its outcome carries
them all, in order, and trial ids and budgets count each."""

from __future__ import annotations

import math
import statistics
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infopt.analysis.paired import noise_sd_log
from infopt.contract.remedies import remedy_for_required
from infopt.costmodel.kv_check import stop_reason as kv_stop_reason
from infopt.specs.approval import GateAnswer
from infopt.specs.cluster import Verdict
from infopt.specs.contract import ContractGap, ContractRemedy
from infopt.specs.fit import LAYOUT_FAMILIES
from infopt.specs.ladder import (
    CandidateResult,
    CandidateStatus,
    ClimbProgress,
    Dimension,
    LadderCandidate,
    LadderOutcome,
    LadderStep,
)
from infopt.specs.paired import FinalDecision, RoundsDecision
from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig, same_config, with_knobs
from infopt.specs.trial import TrialDimension, TrialRole, TrialSpec, changes_from
from infopt.tuning import decide, rounds
from infopt.tuning.climb_data import (
    Climb,
    ClimbOutcome,
    ClimbPlan,
    Incumbent,
    drive,
)
from infopt.tuning.final import drift_check, recommend
from infopt.tuning.pairs import Pairs, fill, result_of
from infopt.tuning.slo_gate import binding, control_fails, slo_gate, with_slos

if TYPE_CHECKING:  # the adapters' rules and facts arrive as data
    from infopt.engines.rules import DimensionRule, LadderFacts

# The climb's data live in infopt.tuning.climb_data; named here for its callers.
__all__ = ["Climb", "ClimbOutcome", "ClimbPlan", "Incumbent", "climb", "drive"]

def climb(plan: ClimbPlan) -> Climb:
    """The ladder as a generator: `spec = gen.send(trial)` until it returns its outcome."""
    return _Climber(plan).run()


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


class _Climber:
    """The climb's state: attempts so far (trial ids count them), the budgets' stop, the
    pruned candidates, the noise and window the start measured, and what progress needs."""

    def __init__(self, plan: ClimbPlan) -> None:
        self.p = plan
        self.launches = 0
        self.stopped: str | None = None
        self.pruned: list[str] = []
        self.t_start = plan.clock() if plan.t_start is None else plan.t_start
        b = plan.budgets
        self.policy = rounds.RoundsPolicy(
            objective=plan.objective, higher=plan.higher, min_rounds=max(2, b.repeats),
            max_rounds=max(2, b.repeats, b.max_rounds), min_gain=b.min_gain)
        self.confirming = b.repeats >= 2  # one round decides nothing
        self.round_no = 0  # paired rounds so far: each round's prompts are its own (seed)
        self.noise: float | None = None  # sd of log(b/a) of one paired round, from the start
        self.window: int | None = None  # measured requests per window after the start
        self.window_why: str | None = None
        self.phase, self.left, self.steps_left = "start", 0, 0
        self.trial_s: list[float] = []
        self.trials: list[Trial] = []  # every attempt, in order: the outcome carries them

    # -- trials -------------------------------------------------------------------------------

    def _trial(self, spec: TrialSpec) -> Generator[TrialSpec, Trial, Trial]:
        """`spec`, started afresh (`<id>-retryN`) up to `budgets.retries` times while a signal
        kills its engine mid-trial (a fault of the machine, not of the configuration); every
        attempt is kept, so a resumed run reloads each and the report shows each failure."""
        self._progress(spec)
        t0 = self.p.clock()
        trial = yield spec
        self.trials.append(trial)
        retries, n = self.p.budgets.retries, 1
        while trial.killed_by_signal is not None and n <= retries:
            self.p.log.warning("%s: its engine was killed by signal %d; starting it afresh "
                               "(retry %d of %d)", spec.trial_id, trial.killed_by_signal, n,
                               retries)
            trial = yield spec.model_copy(update={"trial_id": f"{spec.trial_id}-retry{n}"})
            self.trials.append(trial)
            n += 1
        self.trial_s.append(max(0.0, self.p.clock() - t0))
        self.launches += n
        self.left = max(0, self.left - 1)
        if trial.kv is not None and trial.kv.stops_ladder and self.stopped is None:
            self.stopped = kv_stop_reason(trial.trial_id, trial.kv)
            self.p.log.warning("ladder: %s", self.stopped)
        return trial

    def _progress(self, spec: TrialSpec) -> None:
        if self.p.progress is None:
            return
        final = 0 if self.phase == "decision" else 2 * self.policy.min_rounds
        planned = self.launches + 1 + self.left + self.steps_left + final
        mean = sum(self.trial_s) / len(self.trial_s) if self.trial_s else None
        self.p.progress(ClimbProgress(
            trial=self.launches + 1, planned=max(planned, self.launches + 1), phase=self.phase,
            label=spec.value or spec.role.value, elapsed_s=self.p.clock() - self.t_start,
            eta_s=None if mean is None else mean * (planned - self.launches)))

    def _spec(self, role: TrialRole, config: AnyServingConfig, label: str | None,
              dimension: TrialDimension | None, repeat: int, *, with_contract: bool = False,
              approvals: list[GateAnswer] | None = None,
              incumbent: AnyServingConfig | None = None) -> TrialSpec:
        name = "control" if role is TrialRole.CONTROL else label
        # Both windows of a round send the same prompts; every round its own (a reused engine
        # must not find the last round's prompts in its cache).
        return TrialSpec(trial_id=f"{self.p.id_prefix}t{self.launches:02d}-{name}-r{repeat}",
                         role=role, config=config, changes=changes_from(self.p.control, config),
                         dimension=dimension, value=label, repeat=repeat,
                         seed=self.p.seed + max(0, self.round_no - 1),
                         with_contract=with_contract, approvals=approvals or [],
                         incumbent=incumbent, measured_requests=self.window)

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
            replanned_after, self.launches, self.round_no = self.launches, 0, 0
            baseline = with_knobs(p.baseline, remedy.knob_changes)
            start = yield from self._measure_start(baseline, allow_remedy=False)
        if isinstance(start, _Broken):
            return ClimbOutcome(ladder=None, history=[], pruned=self.pruned,
                                launches=self.launches, broken=start.trial,
                                broken_gaps=start.gaps, remedy=remedy, first_gaps=first_gaps,
                                replanned_after=replanned_after, trials=self.trials)
        assert not isinstance(start, _Replan)  # allow_remedy=False: re-planned at most once
        base, control = start
        ladder, history = yield from self._climb(base, p.facts(base.trials[0]))
        decision, chosen = yield from self._decide(history[-1], control)
        ladder.decision, ladder.launches = decision, self.launches  # the decision's included
        return ClimbOutcome(ladder=ladder, history=history, pruned=self.pruned,
                            launches=self.launches, remedy=remedy, first_gaps=first_gaps,
                            replanned_after=replanned_after, chosen=chosen,
                            trials=self.trials)

    def _measure_start(self, baseline: AnyServingConfig, allow_remedy: bool
                       ) -> Generator[TrialSpec, Trial,
                                      tuple[Incumbent, Incumbent | None] | _Replan | _Broken]:
        """The control and the baseline, `repeats` paired rounds (the control first in odd
        rounds). When the control is the baseline (vLLM's defaults serve the full context) it
        runs alone. Returns (baseline, control) incumbents, or why nothing can be climbed."""
        p = self.p
        separate = not same_config(p.control, baseline)
        control, base_trials, ctrl_trials = p.control, [], []
        self.left = (2 if separate else 1) * p.budgets.repeats
        for rnd in range(1, p.budgets.repeats + 1):
            self.round_no += 1
            order = ["control", "baseline"] if separate else ["baseline"]
            for who in order if rnd % 2 else reversed(order):
                if who == "control":
                    c = yield from self._trial(self._spec(TrialRole.CONTROL, control, None,
                                                          None, rnd))
                    control = _carried(c, control)
                    ctrl_trials.append(c)
                    continue
                t = yield from self._trial(self._spec(TrialRole.BASELINE, baseline,
                                                      "baseline", None, rnd,
                                                      with_contract=rnd == 1))
                if rnd == 1:
                    gaps = p.gaps(t)
                    remedy = remedy_for_required(gaps)
                    if allow_remedy and remedy is not None:
                        return _Replan(remedy, gaps)
                    if _broken(t, gaps):
                        return _Broken(t, gaps)
                baseline = _carried(t, baseline)
                base_trials.append(t)
        base = Incumbent("baseline", baseline, base_trials, role=TrialRole.BASELINE)
        ctrl = (Incumbent("control", control, ctrl_trials, role=TrialRole.CONTROL)
                if separate else None)
        self._size_window(ctrl, base)
        return base, ctrl

    def _size_window(self, control: Incumbent | None, base: Incumbent) -> None:
        """The noise of one paired round (the spread of log(baseline/control) over the start's
        rounds; with no separate control, sqrt(2) x the baseline's own spread), and the window
        that brings one window's noise to budgets.window_rel_noise: noise shrinks as the root
        of the requests counted, so the requests scale as the square of the ratio."""
        b = self.p.budgets
        if control is not None:
            pairs = [(c.objective_value, t.objective_value)
                     for c, t in zip(control.trials, base.trials, strict=False)
                     if c.objective_value and t.objective_value]
            self.noise = (noise_sd_log([a for a, _ in pairs], [b for _, b in pairs])
                          if len(pairs) >= 2 else None)
        else:
            vals = [v for v in base.values if v > 0]
            self.noise = (math.sqrt(2) * statistics.stdev([math.log(v) for v in vals])
                          if len(vals) >= 2 else None)
        n0 = self.p.window_requests
        if self.noise is None or n0 is None:
            self.window_why = ("windows keep the workload's own requests: " +
                               ("fewer than 2 rounds measured the noise" if n0 else
                                "no window size given"))
            return
        per_window = self.noise / math.sqrt(2)
        want = (per_window / b.window_rel_noise) ** 2
        scale = min(max(1.0, want), b.max_window_scale)
        self.window = math.ceil(n0 * scale) if scale > 1 else None
        self.window_why = (
            f"one window's noise at the start was {per_window:.1%} (the spread of log "
            f"ratios of paired rounds, {self.noise:.3f}, over sqrt 2) against the target "
            f"{b.window_rel_noise:.0%}: " + (
                f"{n0} -> {self.window} measured requests per window (x{scale:.2f}"
                + (", capped by budgets.max_window_scale" if want > scale else "") + ")"
                if self.window else f"the workload's {n0} measured requests suffice"))
        self.p.log.info("noise: %s", self.window_why)

    def _climb(self, inc: Incumbent, facts: LadderFacts
               ) -> Generator[TrialSpec, Trial, tuple[LadderOutcome, list[Incumbent]]]:
        """Every dimension in order from `inc`; returns the outcome and the incumbents in the
        order they were accepted (the baseline first: the fallbacks of the final check)."""
        p = self.p
        history, steps = [inc], []
        dims = list(p.rules.items())
        for n, (dim, rule) in enumerate(dims):
            self.phase = dim.value
            self.steps_left = self._future(dims[n + 1:], inc, facts)
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
            rule=decide.rule_text(p.objective, p.higher, b.min_gain, self.policy),
            steps=steps, accepted=inc.chain, winner_label=inc.winner_label,
            stopped=self.stopped, launches=self.launches, noise_sd_log=self.noise,
            window_requests=self.window, window_why=self.window_why,
            screen_drops_below=rounds.screen_threshold(self.policy, self.noise)), history

    def _future(self, dims: list, inc: Incumbent, facts: LadderFacts) -> int:
        """An estimate of the windows the dimensions after this one will take: a screen round
        per candidate their rules derive from today's incumbent, and one confirmation each."""
        windows = 0
        for _, rule in dims:
            derived = decide.derive(rule, self.p.engine, inc.config, facts)
            if not isinstance(derived, str):
                windows += 2 * len(derived) + 2 * (self.policy.min_rounds - 1)
        return windows

    def _families(self, inc: Incumbent, dim: Dimension, rule: DimensionRule | None,
                  facts: LadderFacts,
                  steps: list[LadderStep], history: list[Incumbent]
                  ) -> Generator[TrialSpec, Trial, Incumbent]:
        """The parallel layouts family by family (TP -> PP -> DP -> EP), one step each with its
        own screens and confirmations, each family's candidates derived from the incumbent the
        families before it left (so PP competes with the TP winner, not with TP=1). Returns
        the incumbent after the last family."""
        p = self.p
        for family in LAYOUT_FAMILIES:
            self.phase = f"{dim.value} {family}"
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

    # -- paired rounds ------------------------------------------------------------------------

    def _round(self, inc: Incumbent, config: AnyServingConfig, label: str,
               dim: TrialDimension, k: int, approvals: list[GateAnswer],
               candidate_first: bool
               ) -> Generator[TrialSpec, Trial, tuple[Trial | None, Trial]]:
        """One paired round: the candidate's window and the incumbent's, back to back (the
        candidate first when asked: a candidate its gates reject costs no incumbent window).
        Returns (the incumbent's trial or None, the candidate's trial)."""
        self.round_no += 1

        # The decision's winner was gated in the ladder: it modifies nothing now.
        def cand() -> Generator[TrialSpec, Trial, Trial]:
            return self._trial(self._spec(TrialRole.TUNING, config, label, dim, k,
                                          approvals=approvals,
                                          incumbent=None if dim == "decision" else inc.config))

        def mine() -> Generator[TrialSpec, Trial, Trial]:
            return self._trial(self._spec(inc.role, inc.config,
                                          None if inc.role is TrialRole.CONTROL else inc.label,
                                          inc.dimension, len(inc.trials) + 1))

        if candidate_first:
            t = yield from cand()
            if t.objective_value is None:
                return None, t
            i = yield from mine()
        else:
            i = yield from mine()
            t = yield from cand()
        inc.trials.append(i)
        return i, t

    def _sequence(self, inc: Incumbent, config: AnyServingConfig, label: str,
                  dim: TrialDimension, pairs: Pairs, approvals: list[GateAnswer],
                  force_min: bool = False
                  ) -> Generator[TrialSpec, Trial, tuple[RoundsDecision | None, str | None]]:
        """Rounds added to `pairs` until the policy decides (infopt.tuning.rounds) or the budget
        ends them; `force_min`: the first `repeats` rounds run whatever the budget (the final
        decision). Returns (decision or None, why it failed or None)."""
        misses = 0
        while True:
            n = len(pairs.a)
            out_of_budget = not self.budget_left() and not (force_min
                                                            and n < self.policy.min_rounds)
            decision = rounds.decide(pairs.a, pairs.b, pairs.sec("a"), pairs.sec("b"),
                                     self.policy, last=out_of_budget)
            if decision is not None or out_of_budget:
                return decision, None
            self.left = 2 * max(1, self.policy.min_rounds - n)
            made = len(pairs.rounds) + len(pairs.aside) + misses
            i, t = yield from self._round(inc, config, label, dim, made + 1, approvals,
                                          candidate_first=made % 2 == 0)
            pairs.ids += [x.trial_id for x in (t, i) if x is not None]
            if t.objective_value is None:
                return None, f"a round did not measure ({t.failed})"
            if i is None or i.objective_value is None:  # the incumbent's window: round void
                misses += 1
                if misses > 2:
                    return None, ("the incumbent's windows did not measure ("
                                  f"{(i.failed if i is not None else None) or 'no value'})")
                continue
            pairs.add(i, t)

    def _step(self, inc: Incumbent, dim: Dimension, cands: list[LadderCandidate]
              ) -> Generator[TrialSpec, Trial, tuple[LadderStep, Incumbent | None]]:
        """Screen each kept candidate with one paired round (an ordered series stops at its
        first ratio no better than the one before), then confirm the promising ones."""
        step = LadderStep(dimension=dim, incumbent=inc.label, incumbent_values=inc.values)
        kept, step.candidates = self._prune(inc, cands)
        screened: list[tuple[LadderCandidate, Pairs]] = []
        series_last: dict[str, float] = {}
        stopped_series: dict[str, str] = {}
        for n, c in enumerate(kept):
            self.left = 2 * (len(kept) - n) + 2 * (self.policy.min_rounds - 1)
            if c.series in stopped_series:
                step.candidates.append(CandidateResult(candidate=c, status="not run",
                                                       reason=stopped_series[c.series]))
                continue
            if not self.budget_left():
                assert self.stopped is not None  # budget_left() is False only once it is set
                step.candidates.append(CandidateResult(candidate=c, status="not run",
                                                       reason=self.stopped))
                continue
            pairs = Pairs()
            i, t = yield from self._round(inc, decide.apply(inc.config, c), c.label, dim, 1,
                                          self._approvals(c), candidate_first=True)
            pairs.ids += [x.trial_id for x in (t, i) if x is not None]
            if t.objective_value is None:
                step.candidates.append(CandidateResult(
                    candidate=c, status=_status(t), reason=t.failed or "no measurement",
                    trial_ids=pairs.ids))
                continue
            if i is None or i.objective_value is None:
                step.candidates.append(CandidateResult(
                    candidate=c, status="failed", trial_ids=pairs.ids,
                    reason="its incumbent's paired window did not measure "
                           f"({i.failed if i else 'no trial'})"))
                continue
            pairs.add(i, t)
            screened.append((c, pairs))
            if c.series:
                if decide.series_stops(series_last.get(c.series), pairs.screen_log(self.p.higher),
                                       True):
                    stopped_series[c.series] = (f"{c.series} stopped climbing at {c.label}: "
                                                "its ratio to the incumbent was no better than "
                                                "the value before it")
                series_last[c.series] = pairs.screen_log(self.p.higher)
        new = yield from self._confirm(inc, dim, screened, step)
        return step, new

    def _approvals(self, c: LadderCandidate) -> list[GateAnswer]:
        path = c.changes.get("model_path")
        return [self.p.approvals[path]] if isinstance(path, str) and path in self.p.approvals \
            else []

    def _confirm(self, inc: Incumbent, dim: Dimension,
                 screened: list[tuple[LadderCandidate, Pairs]], step: LadderStep
                 ) -> Generator[TrialSpec, Trial, Incumbent | None]:
        """The promising candidates, best screen first, confirmed with paired rounds until
        decided; the first accepted becomes the new incumbent."""
        p = self.p
        order = sorted(screened, key=lambda cp: -cp[1].screen_log(p.higher))
        confirmations = 0
        for n, (c, pairs) in enumerate(order):
            result = result_of(c, pairs)
            step.candidates.append(result)
            if not rounds.promising(pairs.a[0], pairs.b[0], pairs.first_sec("a"),
                                    pairs.first_sec("b"), self.policy, self.noise):
                result.reason = (f"screened {pairs.b[0]:.4g} against the incumbent's "
                                 f"{pairs.a[0]:.4g} in the same round "
                                 f"({pairs.b[0] / pairs.a[0] - 1:+.1%}): too far below for "
                                 "a confirmation")
                continue
            if not self.confirming or confirmations >= decide.CONFIRMATIONS_PER_STEP \
                    or not self.budget_left():
                result.status, result.reason = "not run", (
                    self.stopped or ("repeats=1: one round decides nothing" if not
                                     self.confirming else
                                     f"promising ({pairs.b[0]:.4g}) but the step's "
                                     f"{decide.CONFIRMATIONS_PER_STEP} confirmations were "
                                     "spent"))
                continue
            confirmations += 1
            config = decide.apply(inc.config, c)
            decision, failed = yield from self._sequence(inc, config, c.label, dim, pairs,
                                                         self._approvals(c))
            fill(result, pairs, decision, failed)
            if result.status != "accepted":
                continue
            gate = slo_gate(pairs.b_trials)
            if gate is not None and not gate.passed:  # the SLOs bind: it cannot replace
                result.status, result.reason = "gate", (
                    f"beat its incumbent ({result.reason}) but "
                    f"{'misses' if gate.verdict is Verdict.MISSES else 'is not shown to meet'} "
                    f"the SLOs: {binding(gate)}")
                p.log.info("ladder %s: %s rejected by the SLOs (%s)", dim.value, c.label,
                           binding(gate))
                continue
            step.accepted = c.label
            q = pairs.b_trials[0].quality
            step.quality_recheck = q.summary if q is not None else "no quality reference"
            p.log.info("ladder %s: %s accepted (%s)", dim.value, c.label, result.reason)
            for c2, p2 in order[n + 1:]:  # screened lower: kept in the record, not confirmed
                r2 = result_of(c2, p2)
                r2.status, r2.reason = "not run", (
                    f"screened {p2.b[0]:.4g} once; its confirmation did not run: {c.label} "
                    "screened better and was accepted")
                step.candidates.append(r2)
            return Incumbent(c.label, config, list(pairs.b_trials), dim,
                             [*inc.chain, c.label])
        return None

    # -- the decision -------------------------------------------------------------------------

    def _decide(self, winner: Incumbent, control: Incumbent | None
                ) -> Generator[TrialSpec, Trial, tuple[FinalDecision, Incumbent]]:
        """The ladder's winner against the control in paired rounds (and again, afresh, when
        the control drifted between the start and the end); what the run recommends."""
        p = self.p
        self.phase, self.steps_left = "decision", 0
        if control is None:  # the control is the baseline
            if not winner.chain:
                return with_slos(FinalDecision(
                    recommended="winner", winner_label=winner.winner_label,
                    why="the engine's defaults are the baseline, and the ladder kept them: "
                        "nothing to compare"), slo_gate(winner.trials), None), winner
            control = Incumbent("control", p.control, [], role=TrialRole.CONTROL)
            start_values: list[float] = []
        else:
            start_values = control.values
        ineligible = p.control_ineligible(control.trials[0]) if control.trials else None
        if not self.confirming or (control.trials and control.trials[0].objective_value is None):
            why = None if self.confirming else "repeats=1: one round decides nothing"
            cgate = slo_gate(control.trials)
            decision = with_slos(recommend(winner.winner_label, None, None,
                                           ineligible or control_fails(cgate), None,
                                           not_compared=why), slo_gate(winner.trials), cgate)
            return decision, (winner if decision.recommended == "winner" else control)
        first = yield from self._against(winner, control)
        drift, again = drift_check(start_values, control.values[len(start_values):]), None
        if drift is not None and drift.moved:
            p.log.warning("drift: %s; the winner is compared with the control afresh",
                          drift.why)
            again = yield from self._against(winner, control)
        cgate = slo_gate(control.trials)
        decision = recommend(winner.winner_label, first, again,
                             ineligible or control_fails(cgate), drift)
        decision = with_slos(decision, slo_gate(winner.trials), cgate)
        p.log.info("decision: %s", decision.why)
        return decision, (winner if decision.recommended == "winner" else control)

    def _against(self, winner: Incumbent, control: Incumbent
                 ) -> Generator[TrialSpec, Trial, RoundsDecision | None]:
        pairs = Pairs()
        # The winner's windows carry its own label (one configuration, one name in the
        # report), the "decision" dimension telling them from the ladder's.
        decision, failed = yield from self._sequence(control, winner.config, winner.label,
                                                     "decision", pairs, [], force_min=True)
        winner.trials.extend(pairs.b_trials)
        if failed is not None:
            self.p.log.warning("decision: %s", failed)
        return decision
