"""What a user re-measuring the recommended configuration by hand should get: a 99% prediction
interval for one new measurement of it on this machine (an alarm band: outside it, something
changed; at 99% one honest re-run in a hundred falls outside by chance). Pure.

Each repeat is a fresh engine start, so the start-to-start spread is the noise a re-run meets.
Two or three repeats of one configuration say little about it, so the spread is pooled over
every configuration the run repeated (the relative variance, weighted by degrees of freedom:
configurations differ in level, hardly in relative noise), and the interval uses Student's t
with the pooled degrees of freedom: mean x (1 +/- t(0.995, dof) x s_rel x sqrt(1 + 1/n))."""

from __future__ import annotations

import math
import statistics


def pooled_relative_sd(groups: list[list[float]]) -> tuple[float, int]:
    """(pooled relative standard deviation, its degrees of freedom) over groups with >= 2."""
    num, dof = 0.0, 0
    for g in groups:
        if len(g) >= 2 and statistics.fmean(g):
            num += (len(g) - 1) * statistics.variance(g) / statistics.fmean(g) ** 2
            dof += len(g) - 1
    return (math.sqrt(num / dof), dof) if dof else (0.0, 0)


def reproduction_band(winner: list[float], groups: list[list[float]]
                      ) -> tuple[float, float | None, float | None, str]:
    """(the winner's mean, low, high, the rule in words); no band without a repeat."""
    from scipy.stats import t as student_t  # 1.7 s import: only when a report is written

    if not winner:
        raise ValueError("the winner has no measured objective")
    mean = statistics.fmean(winner)
    s_rel, dof = pooled_relative_sd(groups)
    if dof == 0:
        return mean, None, None, ("no configuration was repeated, so the run cannot state "
                                  "its start-to-start noise: raise budgets.repeats")
    half = float(student_t.ppf(0.995, dof)) * s_rel * math.sqrt(1 + 1 / len(winner))
    rule = (f"99% prediction interval for one new measurement: the mean of the winner's "
            f"{len(winner)} repeat(s) x (1 +/- t(0.995, {dof}) x {s_rel:.1%} x sqrt(1 + "
            f"1/{len(winner)})), {s_rel:.1%} being the start-to-start relative standard "
            f"deviation pooled over the run's repeated configurations ({dof} degrees of "
            "freedom)")
    return mean, mean * (1 - half), mean * (1 + half), rule
