"""The quality gate as a sequential decision, pure: a candidate is scored on a growing prefix of
the prompt pool (looks of 8, 16, 32 ... prompts up to the request's budget) until the data
decide, and the two questions of the specification are kept apart:

(a) Did this change cost quality? The candidate is paired against the incumbent it modifies
    (same prompts, same positions; `paired_change`). A change whose drop in agreement with the
    reference's tokens is shown to lie within the noise margin is lossless: it passes unless the
    candidate is itself established below the threshold. So a scheduling, prefill or
    speculative knob is never charged with the distance its incumbent's weights already have.
(b) Is it still within the user's tolerance of the reference? Every other change (shown to
    change the numerics, or not shown unchanged) is judged against the reference, decisively:
    its whole agreement interval must clear the threshold (floor - tolerance). An interval that
    straddles the threshold after the last look is "undecided", which is not accepted.

Several looks at growing data inflate the chance of a wrong call; each look's intervals are
taken at 1 - 0.05 / (number of looks) (Bonferroni), so the whole sequence aims at 95%. The
positions of one text are not independent trials (texts differ in how many near-ties they
hold), so the agreement interval and the paired drop's discordant share are clustered by
prompt (infopt.quality.fidelity.clustered_wilson: Wilson at the effective sample size, t on
prompts - 1), and the drop's two factors split the look's miss rate. Measured, not assumed
(tests/unit/test_quality_gate_mc.py, docs/metrics.md): at the default tolerance and budget,
with texts as clustered as the demo's (design effect 1.5) the family of intervals covers the
truth in >= 95% of simulated sequences and a candidate at the threshold is accepted in ~1%
and failed in ~1%; positions treated as independent covered ~90% there and failed ~9%.
Much harsher clustering (design effect ~4, misses in runs) is beyond what the prompt count
can see: 91-94%.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infopt.specs.quality import (
    FidelityResult,
    Interval,
    PairedChange,
    QualityVerdict,
    ReferenceSet,
    ScoredSequence,
)

from .fidelity import clustered_wilson, fidelity, is_top1
from .gate import quality_verdict

FIRST_LOOK_PROMPTS = 8  # one prompt of each kind (infopt.quality.prompts)
FAMILY_ALPHA = 0.05
PAIRED_METHOD = ("McNemar: Wilson on the discordant share (clustered by prompt) x Wilson on "
                 "its split, each at half the miss rate")


def looks(budget: int, first: int = FIRST_LOOK_PROMPTS) -> list[int]:
    """The prompt counts of each look: doubling from `first`, the last one the budget."""
    if budget < 1:
        raise ValueError("the prompt budget must be at least 1")
    out, n = [], min(first, budget)
    while n < budget:
        out.append(n)
        n *= 2
    return out + [budget]


def look_confidence(n_looks: int) -> float:
    return 1 - FAMILY_ALPHA / max(1, n_looks)


def change_margin(floor: FidelityResult | None, tolerance: float) -> float:
    """The largest drop against the incumbent still called unchanged: what a restart of the
    reference at another batch size already moves (the floor's disagreement), and at least half
    the tolerance. Half: a change inside it cannot by itself spend the whole budget, and a
    smaller margin could not be shown with a few hundred positions (the upper bound on zero
    discordant positions out of 512 is already 1.3%). A lossless call is still
    refused when the candidate is established below the threshold (the budget stays checked)."""
    noise = 1.0 - floor.top1_agreement if floor is not None else 0.0
    return max(noise, tolerance / 2)


def _scale(rate: tuple[float, float], factor: float) -> tuple[float, float]:
    """The range of rate x factor over the rate's interval (the factor may be negative)."""
    a, b = rate[0] * factor, rate[1] * factor
    return min(a, b), max(a, b)


def paired_change(reference: ReferenceSet, candidate: list[ScoredSequence],
                  incumbent: list[ScoredSequence], incumbent_key: str, margin: float,
                  confidence: float) -> PairedChange:
    """The candidate's drop in agreement against the incumbent's, over the prompts both scored
    and the positions all three servers reported. Its interval: the drop is d x (2p - 1), with
    d the share of discordant positions and p the share of those the incumbent got right; the
    product's range over the two factors' intervals bounds the drop. Each factor's interval
    is at 1 - (1 - confidence) / 2, so both hold together at `confidence` (Bonferroni; at
    `confidence` each, the pair was only sure at 2 x confidence - 1). d's interval is clustered
    by prompt (`clustered_wilson`: discordant positions come by text). p's is Wilson over the
    discordant positions (unknown, [0, 1], when there are none): in the case that matters, a
    one-sided loss, its upper bound is 1 however the loss is spread, and the simulated mixed
    losses (tests/unit/test_quality_gate_mc.py) keep their coverage without clustering it;
    clustered, with t on the few prompts that hold a discordance, it cost most of the power
    to call a change that flips both ways unchanged."""
    n_prompts = min(len(candidate), len(incumbent))
    b_per, c_per, n_per = [], [], []  # per prompt: incumbent-only, candidate-only, positions
    for ref, cand, inc in zip(reference.sequences[:n_prompts], candidate[:n_prompts],
                              incumbent[:n_prompts], strict=True):
        if not (ref.prompt_name == cand.prompt_name == inc.prompt_name):
            raise ValueError(f"paired scores are of other prompts ({ref.prompt_name}, "
                             f"{cand.prompt_name}, {inc.prompt_name})")
        b = c = positions = 0
        for r, x, y in zip(ref.positions, cand.positions, inc.positions, strict=True):
            if r is None or x is None or y is None:
                continue
            positions += 1
            cand_ok, inc_ok = is_top1(x), is_top1(y)
            b += inc_ok and not cand_ok
            c += cand_ok and not inc_ok
        b_per.append(b)
        c_per.append(c)
        n_per.append(positions)
    positions, b, c = sum(n_per), sum(b_per), sum(c_per)
    if positions == 0:
        raise ValueError("no position both the candidate and the incumbent scored")
    each = 1 - (1 - confidence) / 2
    disc_per = [x + y for x, y in zip(b_per, c_per, strict=True)]
    disc = clustered_wilson(disc_per, n_per, each)
    p = clustered_wilson([b], [b + c], each) if b + c else (0.0, 1.0)  # one cluster: Wilson
    lows, highs = zip(_scale(disc, 2 * p[0] - 1), _scale(disc, 2 * p[1] - 1), strict=True)
    low, high = min(lows), max(highs)
    return PairedChange(incumbent_key=incumbent_key, prompts=n_prompts, positions=positions,
                        incumbent_only=b, candidate_only=c, drop=(b - c) / positions,
                        drop_interval=Interval(low=low, high=high, confidence=confidence,
                                               method=PAIRED_METHOD),
                        margin=margin, unchanged=high <= margin)


def decide_look(reference: ReferenceSet, floor: FidelityResult | None, tolerance: float,
                candidate: list[ScoredSequence], incumbent: list[ScoredSequence] | None,
                incumbent_key: str | None, confidence: float, endpoint: str
                ) -> QualityVerdict:
    """The verdict on what has been scored so far (its decision may be "undecided")."""
    fid = fidelity(reference, candidate, endpoint, confidence)
    verdict = quality_verdict(fid, floor, tolerance)
    if not incumbent or incumbent_key is None:
        return verdict.model_copy(update={"change": "unpaired"})
    paired = paired_change(reference, candidate, incumbent, incumbent_key,
                           change_margin(floor, tolerance), confidence)
    agreement = next(m for m in verdict.measures if m.measure == "top1_agreement")
    others_failed = [m for m in verdict.measures if m is not agreement and not m.passed]
    established_below = not agreement.passed and not agreement.undecided
    if paired.unchanged and not others_failed and not established_below:
        why = (f"unchanged against the incumbent: drop {paired.drop:+.2%} of "
               f"{paired.positions} paired positions ({paired.drop_interval.confidence:.1%} "
               f"interval {paired.drop_interval.low:+.2%} to {paired.drop_interval.high:+.2%}, "
               f"within the {paired.margin:.1%} margin)")
        return verdict.model_copy(update={
            "passed": True, "decision": "pass", "change": "lossless", "paired": paired,
            "summary": f"quality passed: {why}; against the reference "
                       f"{fid.top1_agreement:.1%} agreement"})
    return verdict.model_copy(update={"change": "lossy", "paired": paired})


ScoreMore = Callable[[int], list[ScoredSequence]]  # the first n prompts' scores, n growing


@dataclass(frozen=True)
class GateSettings:
    tolerance: float
    budget: int  # the most prompts the gate may score (<= the reference's prompts)
    first: int = FIRST_LOOK_PROMPTS  # the prompts of the first look
    budget_source: str = "the request's quality_max_prompts"  # what set the budget, for the why


def sequential_verdict(reference: ReferenceSet, floor: FidelityResult | None,
                       settings: GateSettings, score_first: ScoreMore,
                       incumbent: list[ScoredSequence] | None = None,
                       incumbent_key: str | None = None, endpoint: str = "candidate"
                       ) -> QualityVerdict:
    """Look after look until decided (`score_first` keeps what it scored). The pairing
    uses the prompts the incumbent has scores for; past them only question (b) can decide."""
    budget = min(settings.budget, len(reference.sequences))
    plan = looks(budget, settings.first)
    confidence = look_confidence(len(plan))
    done: list[int] = []
    for n in plan:
        scores = score_first(n)
        done.append(n)
        verdict = decide_look(reference, floor, settings.tolerance, scores, incumbent,
                              incumbent_key, confidence, endpoint)
        if verdict.decision != "undecided":
            break
    else:
        verdict = verdict.model_copy(update={"summary": verdict.summary + (
            f"; still undecided after {budget} prompts ({settings.budget_source}): "
            "not accepted")})
    return verdict.model_copy(update={"looks": done, "prompt_budget": budget})
