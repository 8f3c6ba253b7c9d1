"""Run the generative task sets (infopt.quality.tasksets) against an OpenAI-compatible server
through the openai SDK, greedy, and compare a candidate's pass rates with the reference's.

A set regresses only when the drop is beyond its sampling noise: the items are paired (the
same prompts on both), so the test is McNemar's exact one-sided test on the discordant items
(reference right and candidate wrong vs the reverse), p < 0.05, and the rate must also drop by
more than the tolerance. With a handful of items per set that takes a large drop (0/8 against
8/8 is p = 0.004; 6/8 against 8/8 is p = 0.25), so on a weak model (SmolLM2-135M) token
fidelity stays the decisive signal; the sets still run, report their noise, and decide for a
real model with more items."""

from __future__ import annotations

import openai

from infopt.contract.context import ProbeContext
from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint
from infopt.specs.quality import Interval, MeasureVerdict, TaskSetResult

from .tasksets import TaskItem


def _interval(k: int, n: int) -> Interval:
    from scipy.stats import binomtest  # 1.7 s to import: not on a bad-input path

    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return Interval(low=float(ci.low), high=float(ci.high))


def run_tasksets(endpoint: Endpoint, items: list[TaskItem], *, api_key: str | None = None,
                 timeout_s: float = 120.0) -> list[TaskSetResult]:
    sdk = ProbeContext(endpoint, api_key, timeout_s).sdk  # the contract's client settings
    by_set: dict[str, list[tuple[bool, str]]] = {}
    try:
        for item in items:
            r = sdk.chat.completions.create(
                model=endpoint.model, temperature=0.0, max_tokens=item.max_tokens,
                messages=[{"role": "user", "content": item.prompt}])
            text = r.choices[0].message.content or ""
            by_set.setdefault(item.set_name, []).append((item.check(text), text[:120]))
    except openai.APIConnectionError as exc:
        raise InputError(f"cannot reach {endpoint.base_url} ({exc}); give the base URL of a "
                         "running OpenAI-compatible server") from None
    except openai.APIStatusError as exc:
        raise InputError(f"{endpoint.base_url} refused a task-set chat request (HTTP "
                         f"{exc.status_code}: {str(exc)[:160]}); the task sets need "
                         "/v1/chat/completions; run without --tasks") from None
    return [TaskSetResult(set_name=name, passed=sum(ok for ok, _ in rows), total=len(rows),
                          interval=_interval(sum(ok for ok, _ in rows), len(rows)),
                          outcomes=[ok for ok, _ in rows], answers=[a for _, a in rows])
            for name, rows in by_set.items()]


def mcnemar_worse_p(reference: list[bool], candidate: list[bool]) -> float:
    """One-sided exact McNemar p-value that the candidate is worse on paired items."""
    lost = sum(r and not c for r, c in zip(reference, candidate, strict=True))
    gained = sum(c and not r for r, c in zip(reference, candidate, strict=True))
    if lost + gained == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue)


def taskset_verdicts(reference: list[TaskSetResult], candidate: list[TaskSetResult],
                     tolerance: float, alpha: float = 0.05) -> list[MeasureVerdict]:
    ref = {r.set_name: r for r in reference}
    out = []
    for c in candidate:
        r = ref[c.set_name]
        p = mcnemar_worse_p(r.outcomes, c.outcomes)
        threshold = r.rate - tolerance
        passed = not (p < alpha and c.rate < threshold)
        out.append(MeasureVerdict(
            measure=f"task:{c.set_name}", value=c.rate, floor=None, threshold=threshold,
            passed=passed, p_value=p,
            why=f"{c.set_name}: {c.passed}/{c.total} vs the reference's {r.passed}/{r.total} "
                f"on the same items (McNemar one-sided p = {p:.3f}; a regression needs "
                f"p < {alpha} and a drop beyond {tolerance:.0%})"))
    return out
