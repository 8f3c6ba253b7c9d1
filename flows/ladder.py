"""The tuning ladder inside the optimize flow: the control and the baseline measured with
repeats, then every dimension in the specification's order (infopt.tuning.ladder): derive
candidates from the incumbent, prune what this machine cannot run or fit, screen each with one
gated trial, confirm the promising ones with repeats, carry the accepted change forward.

Every trial is persisted under its key (tasks.trial): a resumed run re-derives the same
candidates from the same loaded measurements and re-runs nothing that completed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from infopt.engines import adapter_for
from infopt.engines.ladder import LadderFacts
from infopt.specs.approval import GateAnswer
from infopt.specs.ladder import (
    CandidateResult,
    Dimension,
    LadderCandidate,
    LadderOutcome,
    LadderStep,
)
from infopt.specs.plan import MemoryFit
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import Trial
from infopt.specs.trial import TrialRole, TrialSpec, changes_from
from infopt.tuning import ladder as lad
from infopt.tuning.plan import same_config
from infopt.tuning.search import higher_is_better, runnable_candidates
from tasks.trial import TrialContext, run_attempts


@dataclass
class Incumbent:
    label: str  # "baseline" or the last accepted candidate's label
    config: Any
    trials: list[Trial]
    dimension: str | None = None  # the dimension of its last change
    chain: list[str] = field(default_factory=list)  # accepted labels, in order

    @property
    def values(self) -> list[float]:
        return [t.objective_value for t in self.trials if t.objective_value is not None]

    @property
    def winner_label(self) -> str:
        return " + ".join(["baseline", *self.chain])


@dataclass
class LadderRun:
    """What the ladder shares while it runs: the trials so far and the budgets."""

    request: OptimizeRequest
    ctx: TrialContext
    control: Any
    key: Callable[[TrialSpec], str]  # the trial's persistence key
    fit: Callable[[Any], MemoryFit]
    t_start: float
    trials: list[Trial] = field(default_factory=list)
    stopped: str | None = None
    pruned: list[str] = field(default_factory=list)  # "label: why", for the report
    id_prefix: str = ""  # a comparator engine's trials: "vllm-t00-control-r1"

    @property
    def higher(self) -> bool:
        return higher_is_better(self.ctx.workload.objective)

    def budget_left(self) -> bool:
        b = self.request.budgets
        if b.max_trials is not None and len(self.trials) >= b.max_trials:
            self.stopped = f"trial budget spent ({b.max_trials} trials)"
        elif b.max_wall_s is not None and time.monotonic() - self.t_start > b.max_wall_s:
            self.stopped = f"wall-time budget spent ({b.max_wall_s:.0f} s)"
        if self.stopped:
            get_run_logger().warning("ladder: %s after %d trials", self.stopped,
                                     len(self.trials))
        return self.stopped is None

    def spec(self, role: TrialRole, config: Any, label: str | None, dimension: str | None,
             repeat: int, *, with_contract: bool = False,
             approvals: list[GateAnswer] | None = None, incumbent: Any = None) -> TrialSpec:
        name = "control" if role is TrialRole.CONTROL else label
        return TrialSpec(trial_id=f"{self.id_prefix}t{len(self.trials):02d}-{name}-r{repeat}",
                         role=role,
                         config=config, changes=changes_from(self.control, config),
                         dimension=dimension, value=label, repeat=repeat,
                         seed=self.request.seed, with_contract=with_contract,
                         approvals=approvals or [], incumbent=incumbent)

    def run(self, spec: TrialSpec) -> Trial:
        attempts = run_attempts(spec, self.key(spec), self.fit(spec.config), self.ctx,
                                self.request.budgets.retries)
        self.trials.extend(attempts)
        return attempts[-1]


def measure_start(run: LadderRun, baseline: Any,
                  after_baseline: Callable[[Trial], None]) -> Incumbent:
    """The control and the baseline, interleaved, `repeats` times each (the baseline's first
    trial checks the whole API contract; `after_baseline` may stop or re-plan the run). When
    the control is the baseline (vLLM's defaults serve the full context) it runs once."""
    separate = not same_config(run.control, baseline)
    base_trials: list[Trial] = []
    control = run.control
    for rnd in range(1, run.request.budgets.repeats + 1):
        if separate:
            c = run.run(run.spec(TrialRole.CONTROL, control, None, None, rnd))
            control = _carried(c, control)
        t = run.run(run.spec(TrialRole.BASELINE, baseline, "baseline", None, rnd,
                             with_contract=rnd == 1))
        if rnd == 1:
            after_baseline(t)
        # A start remedy (a known failure's contract-preserving fix, e.g. an explicit CPU KV
        # space where the defaults want more memory than is free) carries into every later
        # trial, so no candidate fails the same way first.
        baseline = _carried(t, baseline)
        base_trials.append(t)
    return Incumbent("baseline", baseline, base_trials)


def _carried(trial: Trial, config: Any) -> Any:
    return trial.config if trial.remedy is not None and trial.benchmark is not None else config


def control_values(run: LadderRun) -> tuple[list[float], bool]:
    """The control's measurements, and whether the baseline's stood in for them."""
    own = [t.objective_value for t in run.trials if t.role == "control"
           and t.objective_value is not None]
    if any(t.role == "control" for t in run.trials):
        return own, False
    return [t.objective_value for t in run.trials if t.role == "baseline"
            and t.objective_value is not None], True


def climb(run: LadderRun, inc: Incumbent, facts: LadderFacts,
          approvals: dict[str, GateAnswer]) -> tuple[LadderOutcome, list[Incumbent]]:
    """Every dimension in order from `inc`; returns the outcome and the incumbents in the
    order they were accepted (the baseline first: the fallbacks of the final check)."""
    adapter = adapter_for(inc.config.engine)
    history, steps = [inc], []
    for dim, rule in lad.rules_for(adapter, run.request.dimensions, run.request.tune).items():
        derived = (f"not run: {run.stopped}" if run.stopped else
                   lad.derive(rule, adapter.name.value, inc.config, facts))
        if isinstance(derived, str):
            steps.append(LadderStep(dimension=dim, incumbent=inc.label,
                                    incumbent_values=inc.values, skipped=derived))
            continue
        step, new = _step(run, inc, dim, derived, approvals)
        steps.append(step)
        if new is not None:
            inc = new
            history.append(inc)
    r = run.request
    return LadderOutcome(
        objective=run.ctx.workload.objective.value, higher_is_better=run.higher,
        rule=lad.rule_text(run.ctx.workload.objective.value, run.higher, r.budgets.min_gain,
                           r.budgets.repeats),
        steps=steps, accepted=inc.chain, winner_label=inc.winner_label,
        stopped=run.stopped, launches=len(run.trials)), history


def _prune(run: LadderRun, inc: Incumbent, cands: list[LadderCandidate]
           ) -> tuple[list[LadderCandidate], list[CandidateResult]]:
    """Candidates this machine can run and fit at the full context, and the others, pruned."""
    kept, pruned = [], []
    for c in cands:
        config = lad.apply(inc.config, c)
        runnable, refused = runnable_candidates({c.label: config}, run.ctx.hw.engine_cpu_isa)
        if not runnable:
            pruned.append(CandidateResult(candidate=c, status="pruned",
                                          reason="; ".join(refused)))
            continue
        fit = run.fit(config)
        if not fit.fits:
            pruned.append(CandidateResult(
                candidate=c, status="pruned", reason=(
                    f"does not fit at the full context: {fit.gap_bytes / 2**30:.2f} GiB short "
                    "per device; options: " + "; ".join(fit.alternatives))))
            continue
        kept.append(c)
    run.pruned += [f"{p.candidate.label}: {p.reason}" for p in pruned]
    return kept, pruned


def _status(trial: Trial) -> str:
    failed = trial.failed or ""
    return ("gate" if failed.startswith("rejected by") else
            "undecided" if failed.startswith("undecided by") else "failed")


def _step(run: LadderRun, inc: Incumbent, dim: Dimension, cands: list[LadderCandidate],
          approvals: dict[str, GateAnswer]) -> tuple[LadderStep, Incumbent | None]:
    log = get_run_logger()
    step = LadderStep(dimension=dim, incumbent=inc.label, incumbent_values=inc.values)
    kept, step.candidates = _prune(run, inc, cands)
    screened: list[tuple[LadderCandidate, Trial]] = []
    series_last: dict[str, float] = {}
    stopped_series: dict[str, str] = {}
    for c in kept:
        if c.series in stopped_series:
            step.candidates.append(CandidateResult(candidate=c, status="not run",
                                                   reason=stopped_series[c.series]))
            continue
        if not run.budget_left():
            step.candidates.append(CandidateResult(candidate=c, status="not run",
                                                   reason=run.stopped))
            continue
        config = lad.apply(inc.config, c)
        t = run.run(run.spec(TrialRole.TUNING, config, c.label, dim.value, 1,
                             approvals=_approvals(c, approvals), incumbent=inc.config))
        if t.objective_value is None:
            step.candidates.append(CandidateResult(candidate=c, status=_status(t),
                                                   reason=t.failed or "no measurement",
                                                   trial_ids=[t.trial_id]))
            continue
        screened.append((c, t))
        if c.series:
            if lad.series_stops(series_last.get(c.series), t.objective_value, run.higher):
                stopped_series[c.series] = (f"{c.series} stopped climbing at {c.label}: no "
                                            "better than the value before it")
            series_last[c.series] = t.objective_value
    new = _confirm(run, inc, dim, screened, step, log)
    return step, new


def _approvals(c: LadderCandidate, approvals: dict[str, GateAnswer]) -> list[GateAnswer]:
    path = c.changes.get("model_path")
    return [approvals[path]] if isinstance(path, str) and path in approvals else []


def _confirm(run: LadderRun, inc: Incumbent, dim: Dimension,
             screened: list[tuple[LadderCandidate, Trial]], step: LadderStep, log
             ) -> Incumbent | None:
    """The promising candidates, best screen first, confirmed with repeats against the
    incumbent (topped up to as many); the first accepted becomes the new incumbent."""
    r = run.request
    sign = 1 if run.higher else -1
    order = sorted(screened, key=lambda ct: -sign * ct[1].objective_value)
    confirmations = 0
    for c, first in order:
        values = [first.objective_value]
        result = CandidateResult(candidate=c, status="worse", reason="", median=values[0],
                                 trial_ids=[first.trial_id], values=values)
        step.candidates.append(result)
        if not lad.promising(inc.values, values[0], run.higher, r.budgets.min_gain):
            worst = min(inc.values) if run.higher else max(inc.values)
            result.reason = (f"screened {values[0]:.4g}: no better than the incumbent's worst "
                             f"repeat ({worst:.4g})")
            continue
        if confirmations >= lad.CONFIRMATIONS_PER_STEP or not run.budget_left():
            result.status, result.reason = "not run", (
                run.stopped or f"promising ({values[0]:.4g}) but the step's "
                f"{lad.CONFIRMATIONS_PER_STEP} confirmations were spent")
            continue
        confirmations += 1
        trials = [first] + _repeats(run, inc, c, dim)
        result.values = [t.objective_value for t in trials if t.objective_value is not None]
        result.trial_ids = [t.trial_id for t in trials]
        result.median = lad.median(result.values)
        ok, result.comparison, result.reason = lad.judge(
            inc.values, result.values, run.higher, r.seed, r.budgets.min_gain)
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
        log.info("ladder %s: %s accepted (%s)", dim.value, c.label, result.reason)
        return Incumbent(c.label, lad.apply(inc.config, c), trials, dim.value,
                         [*inc.chain, c.label])
    return None


def _repeats(run: LadderRun, inc: Incumbent, c: LadderCandidate, dim: Dimension
             ) -> list[Trial]:
    """The candidate's remaining repeats, each after an incumbent trial while the incumbent
    has fewer than `repeats` (so drift hits both alike); returns the candidate's trials."""
    out: list[Trial] = []
    config = lad.apply(inc.config, c)
    role = TrialRole.BASELINE if inc.label == "baseline" else TrialRole.TUNING
    for rnd in range(2, run.request.budgets.repeats + 1):
        if len(inc.trials) < rnd and run.budget_left():
            inc.trials.append(run.run(run.spec(role, inc.config, inc.label, inc.dimension,
                                               len(inc.trials) + 1)))
        if not run.budget_left():
            break
        out.append(run.run(run.spec(TrialRole.TUNING, config, c.label, dim.value, rnd,
                                    incumbent=inc.config)))
    return out


def weight_approvals(variants: dict[str, Path], answers: dict[str, GateAnswer]
                     ) -> dict[str, GateAnswer]:
    """model path -> the gate answer that let it be made."""
    return {str(path): answers[fmt] for fmt, path in variants.items() if fmt in answers}
