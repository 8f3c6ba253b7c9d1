"""Token fidelity, pure: a candidate's teacher-forced scores of the reference's greedy tokens
against the reference's own scores of them (see specs.quality.FidelityResult for each measure).

Every measure is over the same positions, so the sample count is the number of scored tokens.
Top-1 agreement carries an interval clustered by prompt (`clustered_wilson`): the positions of
one text are not independent trials (a text full of near-ties flips many; in the demo's kept
runs misses varied over prompts 1.1-2.0x as much as independent positions would), so the
interval is a Wilson interval at the effective sample size the prompts' spread allows, with
Student's t on the prompt count. Its coverage, and the gate's error rates, are measured in
tests/unit/test_quality_gate_mc.py (docs/metrics.md, the quality section)."""

from __future__ import annotations

import math

import numpy as np

from infopt.specs.quality import (
    FidelityResult,
    Interval,
    PositionScore,
    ReferenceSet,
    ScoredSequence,
)

_TIE = 1e-6  # nats: a forced token level with the top-1 is the server's greedy choice too


def is_top1(p: PositionScore) -> bool:
    """Whether the forced token is (level with) the server's own most likely token."""
    return bool(p.top) and p.logprob >= p.top[0].logprob - _TIE


def self_agreement(sequences: list[ScoredSequence]) -> float:
    flags = [is_top1(p) for s in sequences for p in s.positions if p is not None]
    return sum(flags) / len(flags) if flags else 0.0


def coarse_kl(ref: PositionScore, cand: PositionScore) -> float:
    """KL(ref || cand) over the tokens both top-k lists hold (and the forced token, known
    exactly on both sides) plus one bin for all the rest: a lower bound on the full KL."""
    r = {t.token_id: math.exp(t.logprob) for t in ref.top}
    c = {t.token_id: math.exp(t.logprob) for t in cand.top}
    r[ref.token_id], c[cand.token_id] = math.exp(ref.logprob), math.exp(cand.logprob)
    common = r.keys() & c.keys()
    kl = sum(r[i] * math.log(r[i] / max(c[i], 1e-300)) for i in common if r[i] > 0)
    r_rest = max(0.0, 1.0 - sum(r[i] for i in common))
    c_rest = max(1e-12, 1.0 - sum(c[i] for i in common))
    if r_rest > 1e-12:
        kl += r_rest * math.log(r_rest / c_rest)
    return max(0.0, kl)  # rounding in the sums can leave a tiny negative


CLUSTERED_METHOD = ("Wilson at the effective sample size, clustered by prompt (design effect "
                    "from the prompts' spread, t on prompts - 1 df)")


def _wilson_bounds(p: float, n: float, q: float) -> tuple[float, float]:
    """Wilson's score interval for a share p of n trials (n need not be whole), quantile q."""
    q2n = q * q / n
    if p in (0.0, 1.0):  # the closed form: the far bound is exact, not 1 - 1e-16
        return (0.0, q2n / (1 + q2n)) if p == 0.0 else (1 / (1 + q2n), 1.0)
    centre = (p + q2n / 2) / (1 + q2n)
    half = q * math.sqrt(p * (1 - p) / n + q2n / (4 * n)) / (1 + q2n)
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered_wilson(hits: list[int], trials: list[int], confidence: float
                     ) -> tuple[float, float]:
    """The interval of sum(hits) / sum(trials) when trials come in clusters (the positions of
    one prompt; a cluster of no trials is left out). With k >= 2 clusters: Wilson's interval
    at the effective sample size n / deff, deff the ratio of the cluster-robust variance of
    the share (the linearized ratio estimator over clusters, k / (k - 1) small-sample factor)
    to the binomial one, never below 1, and Student's t with k - 1 degrees of freedom in place
    of the normal quantile: Korn & Graubard's interval for survey proportions (Survey
    Methodology 24(2), 1998, there with Clopper-Pearson), in Wilson's form. With all hits or
    none (no spread to estimate) or one cluster: plain Wilson over the trials, as before. So a
    perfect candidate still passes a 98% threshold on 8 prompts of 32 tokens at 95% (a budget
    of 8: 256 positions, lower bound 98.5%; with t on 7 it would need 274); what that costs,
    all-agreeing texts of a candidate at the threshold, is measured in
    tests/unit/test_quality_gate_mc.py."""
    from scipy.stats import norm, t  # 1.7 s to import: not on a bad-input path

    cells = [(h, m) for h, m in zip(hits, trials, strict=True) if m > 0]
    n = sum(m for _, m in cells)
    if n == 0:
        return 0.0, 1.0
    p = sum(h for h, _ in cells) / n
    tail = (1 + confidence) / 2
    k = len(cells)
    if k < 2 or p in (0.0, 1.0):
        return _wilson_bounds(p, n, float(norm.ppf(tail)))
    binomial = p * (1 - p) / n
    robust = k / (k - 1) * sum((h - p * m) ** 2 for h, m in cells) / (n * n)
    deff = max(1.0, robust / binomial)
    return _wilson_bounds(p, n / deff, float(t.ppf(tail, k - 1)))


def _first_divergence(seq: ScoredSequence) -> int | None:
    return next((i for i, p in enumerate(seq.positions) if p is not None and not is_top1(p)),
                None)


def fidelity(reference: ReferenceSet, candidate: list[ScoredSequence],
             endpoint: str, confidence: float = 0.95) -> FidelityResult:
    """The candidate's sequences against the reference's first len(candidate) sequences (the
    sequential gate scores a prefix of the prompt pool at each look)."""
    per_prompt = [[(r, c) for r, c in zip(rs.positions, cs.positions, strict=True)]
                  for rs, cs in zip(reference.sequences[:len(candidate)], candidate,
                                    strict=True)]
    scored = [[(r, c) for r, c in ps if r is not None and c is not None] for ps in per_prompt]
    pairs = [pc for ps in scored for pc in ps]
    if not pairs:
        raise ValueError("no scored positions to compare")
    hits = [sum(is_top1(c) for _, c in ps) for ps in scored]
    agree = sum(hits)
    low, high = clustered_wilson(hits, [len(ps) for ps in scored], confidence)
    dp = np.array([math.exp(c.logprob) - math.exp(r.logprob) for r, c in pairs])
    nll_gap = float(np.mean([r.logprob - c.logprob for r, c in pairs]))
    return FidelityResult(
        endpoint=endpoint, prompts=len(candidate), positions=len(pairs),
        unscored_positions=sum(map(len, per_prompt)) - len(pairs),
        top1_agreement=agree / len(pairs),
        top1_interval=Interval(low=low, high=high, confidence=confidence,
                               method=CLUSTERED_METHOD),
        delta_p_mean=float(dp.mean()), delta_p_p05=float(np.percentile(dp, 5)),
        perplexity_ratio=math.exp(nll_gap),
        kl_lower_bound_mean_nats=float(np.mean([coarse_kl(r, c) for r, c in pairs])),
        first_divergence=[_first_divergence(s) for s in candidate])
