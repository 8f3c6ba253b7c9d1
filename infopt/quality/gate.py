"""The quality verdict: a candidate's fidelity against the noise floor (the reference scored by a
fresh restart of itself), with the request's tolerance as the largest accepted drop.

Thresholds, each a delta from the floor (from perfect when no floor was measured):
- top-1 agreement >= floor - tolerance (absolute fraction of positions): a pass when its whole
  interval lies at or above, a regression when wholly below, otherwise undecided (not a pass);
- perplexity ratio <= floor ratio x (1 + tolerance);
- mean delta-p of the reference token >= floor delta-p - tolerance.
The KL lower bound is reported, not gated: it has no scale a tolerance maps onto.
Task sets, when run, add one measure each (infopt.quality.taskrun: beyond-noise drops only).
The other measures fail on their point estimates (they are means over the same positions).
"""

from __future__ import annotations

from infopt.specs.quality import (
    Decision,
    FidelityResult,
    MeasureVerdict,
    QualityVerdict,
    TaskSetResult,
)

from .taskrun import taskset_verdicts


def _agreement(c: FidelityResult, floor: FidelityResult | None, tol: float) -> MeasureVerdict:
    """Decides only on the interval: a pass when the whole interval lies at or above the
    threshold, a regression when it lies wholly below; an interval that straddles it is
    undecided (98.0% over 245 tokens spans 95.3-99.1% even as independent positions, and the
    interval is clustered by prompt: infopt.quality.fidelity), never a pass: the sequential
    gate adds prompts until it clears one side (infopt.quality.sequential), or reports it
    undecided."""
    base = floor.top1_agreement if floor else 1.0
    threshold = base - tol
    lo, hi = c.top1_interval.low, c.top1_interval.high
    passed, undecided = lo >= threshold, lo < threshold <= hi
    why = (f"top-1 agreement {c.top1_agreement:.1%} ({c.top1_interval.confidence:.1%} "
           f"{lo:.1%}-{hi:.1%}, {c.positions} tokens) vs threshold {threshold:.1%} (floor "
           f"{base:.1%} - {tol:.1%})"
           + ("; the interval straddles the threshold: undecided" if undecided else ""))
    return MeasureVerdict(measure="top1_agreement", value=c.top1_agreement,
                          floor=floor.top1_agreement if floor else None, threshold=threshold,
                          passed=passed, why=why, undecided=undecided)


def _perplexity(c: FidelityResult, floor: FidelityResult | None, tol: float) -> MeasureVerdict:
    base = floor.perplexity_ratio if floor else 1.0
    threshold = base * (1 + tol)
    return MeasureVerdict(
        measure="perplexity_ratio", value=c.perplexity_ratio,
        floor=floor.perplexity_ratio if floor else None, threshold=threshold,
        passed=c.perplexity_ratio <= threshold,
        why=f"perplexity ratio {c.perplexity_ratio:.4f} on the reference's tokens vs "
            f"threshold {threshold:.4f} (floor {base:.4f} x (1 + {tol:g}))")


def _delta_p(c: FidelityResult, floor: FidelityResult | None, tol: float) -> MeasureVerdict:
    base = floor.delta_p_mean if floor else 0.0
    threshold = base - tol
    return MeasureVerdict(
        measure="delta_p_mean", value=c.delta_p_mean,
        floor=floor.delta_p_mean if floor else None, threshold=threshold,
        passed=c.delta_p_mean >= threshold,
        why=f"mean change in the reference token's probability {c.delta_p_mean:+.4f} vs "
            f"threshold {threshold:+.4f} (5th percentile {c.delta_p_p05:+.3f})")


def quality_verdict(candidate: FidelityResult | None, floor: FidelityResult | None,
                    tolerance: float, reference_tasks: list[TaskSetResult] | None = None,
                    candidate_tasks: list[TaskSetResult] | None = None,
                    fidelity_note: str | None = None,
                    extra_measures: list[MeasureVerdict] | None = None) -> QualityVerdict:
    """`candidate` None: token fidelity was not measured (`fidelity_note` says why); the task
    sets or lm-eval's metrics, one of which must then be given, decide alone."""
    measures = ([f(candidate, floor, tolerance) for f in (_agreement, _perplexity, _delta_p)]
                if candidate is not None else [])
    if reference_tasks and candidate_tasks:
        measures += taskset_verdicts(reference_tasks, candidate_tasks, tolerance)
    measures += extra_measures or []  # lm-eval's metrics (infopt.quality.lmeval)
    if not measures:
        raise ValueError("a quality verdict needs token fidelity, task sets or lm-eval")
    failed = [m for m in measures if not m.passed and not m.undecided]
    open_ = [m for m in measures if m.undecided]
    where = ("" if floor or candidate is None else
             " (no noise floor measured: thresholds from a perfect match)")
    if candidate is None:
        where = f" (task sets only: {fidelity_note})"
    decision: Decision = "fail" if failed else "undecided" if open_ else "pass"
    summary = {"pass": "quality passed" + where,
               "fail": "quality regressed: " + "; ".join(m.why for m in failed) + where,
               "undecided": "quality undecided (not accepted): " + "; ".join(
                   m.why for m in open_) + where}[decision]
    return QualityVerdict(passed=decision == "pass", decision=decision, candidate=candidate,
                          floor=floor,
                          tolerance=tolerance, measures=measures, summary=summary,
                          reference_tasks=reference_tasks or [],
                          candidate_tasks=candidate_tasks or [], fidelity_note=fidelity_note)
