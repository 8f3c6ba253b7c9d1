"""Token fidelity, pure: a candidate's teacher-forced scores of the reference's greedy tokens
against the reference's own scores of them (see specs.quality.FidelityResult for each measure).

Every measure is over the same positions, so the sample count is the number of scored tokens;
top-1 agreement carries a Wilson interval (the positions are treated as independent trials,
which they are not quite: neighbouring tokens of one text are correlated, so the interval is
somewhat optimistic; the per-prompt first-divergence positions show the clustering)."""

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


def _first_divergence(seq: ScoredSequence) -> int | None:
    return next((i for i, p in enumerate(seq.positions) if p is not None and not is_top1(p)),
                None)


def fidelity(reference: ReferenceSet, candidate: list[ScoredSequence],
             endpoint: str, confidence: float = 0.95) -> FidelityResult:
    """The candidate's sequences against the reference's first len(candidate) sequences (the
    sequential gate scores a prefix of the prompt pool at each look)."""
    every = [(r, c) for rs, cs in zip(reference.sequences[:len(candidate)], candidate,
                                      strict=True)
             for r, c in zip(rs.positions, cs.positions, strict=True)]
    pairs = [(r, c) for r, c in every if r is not None and c is not None]
    if not pairs:
        raise ValueError("no scored positions to compare")
    agree = sum(is_top1(c) for _, c in pairs)
    from scipy.stats import binomtest  # 1.7 s to import: not on a bad-input path

    ci = binomtest(agree, len(pairs)).proportion_ci(confidence, method="wilson")
    dp = np.array([math.exp(c.logprob) - math.exp(r.logprob) for r, c in pairs])
    nll_gap = float(np.mean([r.logprob - c.logprob for r, c in pairs]))
    return FidelityResult(
        endpoint=endpoint, prompts=len(candidate), positions=len(pairs),
        unscored_positions=len(every) - len(pairs),
        top1_agreement=agree / len(pairs),
        top1_interval=Interval(low=float(ci.low), high=float(ci.high), confidence=confidence),
        delta_p_mean=float(dp.mean()), delta_p_p05=float(np.percentile(dp, 5)),
        perplexity_ratio=math.exp(nll_gap),
        kl_lower_bound_mean_nats=float(np.mean([coarse_kl(r, c) for r, c in pairs])),
        first_divergence=[_first_divergence(s) for s in candidate])
