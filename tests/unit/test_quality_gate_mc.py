"""The sequential quality gate's error rates, measured: a Monte Carlo of infopt.quality.sequential
on its own code path (`sequential_verdict`, `fidelity`, `paired_change`, with planted score
streams in place of an engine), at the settings a run uses by default and `make demo` keeps
(OptimizeRequest.quality_tolerance 0.02, quality_max_prompts 32: looks of 8, 16, 32 prompts;
DEFAULT_TOKENS 32 a prompt; a noise floor of 100%, as measured on llama.cpp: threshold 98%).

The truth is planted. Each text (prompt) draws its own share of "trouble" positions from a Beta
distribution (mean `trouble`, intra-text correlation `icc`: texts differ, so a text's positions
are correlated), and within a text trouble may come in runs (a Markov chain: after a trouble
position the next is one with probability `run`). A trouble position is the candidate missing
the reference's token (unpaired), or one of three paired outcomes: the candidate misses where
the incumbent does not, the reverse, or both miss. The true agreement and drop are expectations
over texts: the gate speaks for the user's texts, not only for the pool's 32.

How clustered, from the scores kept by the demo run of 2026-12-06 on this machine (llama.cpp
0.3.36, SmolLM2, 8-16 prompts of ~30 tokens, 7 candidates with misses): the per-prompt counts
of missed positions vary 1.1-2.0x (typically 1.5x) as much as independent positions would
(the design effect), and misses did not come in runs (adjacent pairs at or below chance).
`icc` 0.016 plants a design effect of 1.5 at 32 tokens, 0.03 one of 1.9; the stress plant
(icc 0.065, run 0.3: 3.7) is harsher than anything seen, and the stated limit.

A disagreeing position is a near-tie flipped (log-probabilities 0.01 apart), so perplexity and
delta-p stay far within tolerance and top-1 agreement alone decides, as it does in the kept runs.

The rates and their 95% Clopper-Pearson intervals are in docs/metrics.md (the quality gate
section); `python tests/unit/test_quality_gate_mc.py` prints them."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cache
from unittest.mock import patch

import numpy as np
import pytest

import infopt.quality.fidelity as fidelity_module
from infopt.quality.fidelity import fidelity
from infopt.quality.sequential import (
    GateSettings,
    change_margin,
    look_confidence,
    looks,
    paired_change,
    sequential_verdict,
)
from infopt.specs.quality import (
    PositionScore,
    QualityVerdict,
    ReferenceSet,
    ScoredSequence,
    TokenLogprob,
)

SEED = 47  # issue 47; a plant draws from default_rng([SEED, crc32 of its name])
SEQUENCES = 300  # simulated gate sequences per plant
TOKENS = 32  # infopt.quality.teacher.DEFAULT_TOKENS
BUDGET = 32  # OptimizeRequest.quality_max_prompts (default; examples/targets/demo.yaml)
TOLERANCE = 0.02  # OptimizeRequest.quality_tolerance (default)
THRESHOLD = 1.0 - TOLERANCE  # the floor is 100%
FAMILY_ALPHA = 0.05  # what the gate states for the whole sequence

_T, _O = 100, 101  # the reference's token, and the one a flipped near-tie prefers
_REF_POS = PositionScore(token_id=_T, logprob=-0.69, top=[
    TokenLogprob(token_id=_T, logprob=-0.69), TokenLogprob(token_id=_O, logprob=-0.70)])
_MISS_POS = PositionScore(token_id=_T, logprob=-0.70, top=[
    TokenLogprob(token_id=_O, logprob=-0.69), TokenLogprob(token_id=_T, logprob=-0.70)])


def _sequences(ok: np.ndarray) -> list[ScoredSequence]:
    return [ScoredSequence(prompt_name=f"p{i}", prompt_text=f"text {i}", prompt_ids=[1],
                           continuation=[_T] * TOKENS,
                           positions=[_REF_POS if f else _MISS_POS for f in row])
            for i, row in enumerate(ok)]


REFERENCE = ReferenceSet(endpoint="reference", top_k=2, self_agreement=1.0,
                         sequences=_sequences(np.ones((BUDGET, TOKENS), dtype=bool)))
FLOOR = fidelity(REFERENCE, REFERENCE.sequences, "floor")
MARGIN = change_margin(FLOOR, TOLERANCE)  # 1%: half the tolerance


@dataclass(frozen=True)
class Plant:
    name: str
    trouble: float  # expected share of trouble positions per text
    icc: float = 0.0  # correlation of two positions of one text (Beta per-text share)
    run: float = 0.0  # P(trouble | the previous position was trouble); 0: no runs
    # Of the trouble positions: (candidate misses only, incumbent misses only, both miss).
    # None: unpaired, every trouble position is a candidate miss.
    split: tuple[float, float, float] | None = None
    budget: int = BUDGET  # the request's quality_max_prompts

    @property
    def agreement(self) -> float:
        cand_miss = 1.0 if self.split is None else self.split[0] + self.split[2]
        return 1.0 - self.trouble * cand_miss

    @property
    def drop(self) -> float:
        return 0.0 if self.split is None else self.trouble * (self.split[0] - self.split[1])


def _trouble(rng: np.random.Generator, p: Plant) -> np.ndarray:
    """A texts x tokens mask of trouble positions."""
    shape = (BUDGET, TOKENS)
    if p.trouble == 0:
        return np.zeros(shape, dtype=bool)
    if p.icc > 0:
        s = 1 / p.icc - 1
        q = rng.beta(p.trouble * s, (1 - p.trouble) * s, size=BUDGET)
    else:
        q = np.full(BUDGET, p.trouble)
    if p.run == 0:
        return rng.random(shape) < q[:, None]
    q = np.minimum(q, 0.5)  # keeps the chain's entry probability <= 1 (a 1e-4 tail here)
    enter = q * (1 - p.run) / (1 - q)  # stationary at q: the run starts at the text's rate
    out = np.empty(shape, dtype=bool)
    out[:, 0] = rng.random(BUDGET) < q
    for j in range(1, TOKENS):
        out[:, j] = rng.random(BUDGET) < np.where(out[:, j - 1], p.run, enter)
    return out


def _draw(rng: np.random.Generator, p: Plant) -> tuple[np.ndarray, np.ndarray | None]:
    """The candidate's and the incumbent's agreement masks (the incumbent None: unpaired)."""
    trouble = _trouble(rng, p)
    if p.split is None:
        return ~trouble, None
    kind = rng.choice(3, size=trouble.shape, p=p.split)
    cand_ok = ~(trouble & (kind != 1))
    inc_ok = ~(trouble & (kind != 0))
    return cand_ok, inc_ok


@dataclass(frozen=True)
class Outcome:
    verdict: QualityVerdict
    covered: list[bool]  # per look: the agreement interval holds the true agreement
    drop_covered: list[bool]  # per look: the paired drop interval holds the true drop
    hits: list[int]  # per prompt: the candidate's agreeing positions (for the old interval)


def _simulate(rng: np.random.Generator, p: Plant) -> Outcome:
    cand_ok, inc_ok = _draw(rng, p)
    cand = _sequences(cand_ok)
    inc = _sequences(inc_ok) if inc_ok is not None else None
    plan = looks(p.budget)
    conf = look_confidence(len(plan))
    verdict = sequential_verdict(REFERENCE, FLOOR, GateSettings(TOLERANCE, p.budget),
                                 lambda n: cand[:n], inc, "incumbent" if inc else None)
    covered, drop_covered = [], []
    for n in plan:  # every look's intervals, reached or not: the family's coverage
        iv = fidelity(REFERENCE, cand[:n], "candidate", conf).top1_interval
        covered.append(iv.low <= p.agreement <= iv.high)
        if inc is not None:
            d = paired_change(REFERENCE, cand[:n], inc[:n], "incumbent", MARGIN,
                              conf).drop_interval
            drop_covered.append(d.low <= p.drop <= d.high)
    return Outcome(verdict, covered, drop_covered, cand_ok.sum(axis=1).tolist())


# Texts differ as much as in the kept demo runs (design effect 1.5), twice that spread
# (1.9: the largest single estimate there was 2.0), and the stress plant (3.7, in runs).
TEXTS, TEXTS_2X, RUNS = {"icc": 0.016}, {"icc": 0.03}, {"icc": 0.065, "run": 0.3}
PLANTS = [
    # Unpaired (question b). At the threshold an accept is a false accept (the worst case of
    # every agreement <= 98%) and a fail a false reject (the worst case of every >= 98%).
    Plant("at threshold, independent positions", 0.02),
    Plant("at threshold, texts differ", 0.02, **TEXTS),
    Plant("at threshold, texts differ 2x", 0.02, **TEXTS_2X),
    Plant("at threshold, stress (runs)", 0.02, **RUNS),
    Plant("below (97%), texts differ", 0.03, **TEXTS),
    Plant("within (99%), texts differ", 0.01, **TEXTS),
    Plant("identical to the reference", 0.0),
    # Paired (question a), the incumbent at 98.5%: the candidate's numerics are the
    # incumbent's (the gate should call it lossless), or flip both ways (1% discordant).
    Plant("paired, same numerics (drop 0)", 0.015, split=(0.0, 0.0, 1.0), **TEXTS),
    Plant("paired, flips both ways (drop 0)", 0.02, split=(0.25, 0.25, 0.5), **TEXTS),
    # Paired, a one-sided loss of the 1% margin from a perfect incumbent (the demo's kind of
    # loss): a lossless call is a false "unchanged" (the candidate, at 99%, is still within).
    Plant("paired, one-sided loss at margin", 0.01, split=(1.0, 0.0, 0.0), **TEXTS),
    Plant("paired, one-sided loss at margin, stress (runs)", 0.01, split=(1.0, 0.0, 0.0),
          **RUNS),
    # Paired, at both boundaries: the drop is the margin and the candidate at 98% (incumbent
    # at 99%): any accept, lossless or against the reference, is a false accept.
    Plant("paired, drop at margin, at threshold", 0.025, split=(0.6, 0.2, 0.2), **TEXTS),
    Plant("paired, drop at margin, stress (runs)", 0.025, split=(0.6, 0.2, 0.2), **RUNS),
    # Smaller budgets (quality_max_prompts 8: one look at 95%, as the flow tests run it; 16:
    # looks of 8 and 16 at 97.5%, as the integration tests do): with no miss, the 256
    # positions of the first look pass, and at the threshold all 8 texts agree now and then.
    Plant("budget 8: at threshold, texts differ", 0.02, budget=8, **TEXTS),
    Plant("budget 8: identical to the reference", 0.0, budget=8),
    Plant("budget 16: at threshold, texts differ", 0.02, budget=16, **TEXTS),
    Plant("budget 16: at threshold, texts differ 2x", 0.02, budget=16, **TEXTS_2X),
]
# The stated limits (docs/metrics.md), held to looser bounds so that a regression still shows.
STRESS = {"at threshold, stress (runs)", "paired, drop at margin, stress (runs)",
          "paired, one-sided loss at margin, stress (runs)",
          "budget 16: at threshold, texts differ 2x"}
BY_NAME = {p.name: i for i, p in enumerate(PLANTS)}

_KL = {(id(r), id(c)): fidelity_module.coarse_kl(r, c)
       for r in (_REF_POS,) for c in (_REF_POS, _MISS_POS)}


@cache
def outcomes(name: str) -> list[Outcome]:
    """The simulated sequences of one plant. The KL lower bound (reported, never gated) of
    the two planted pairs is looked up instead of recomputed: three quarters of the time."""
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    with patch.object(fidelity_module, "coarse_kl", lambda r, c: _KL[id(r), id(c)]):
        return [_simulate(rng, PLANTS[BY_NAME[name]]) for _ in range(SEQUENCES)]


def rate(flags: list[bool]) -> tuple[float, float, float]:
    """The share, with its 95% Clopper-Pearson interval over the simulated sequences."""
    from scipy.stats import binomtest

    k, n = sum(flags), len(flags)
    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    return k / n, float(ci.low), float(ci.high)


def _old_interval_covers(o: Outcome, p: Plant) -> bool:
    """Whether the interval the gate had before (Wilson over positions, as if independent)
    held the truth at every look."""
    from scipy.stats import binomtest

    plan = looks(p.budget)
    conf = look_confidence(len(plan))
    for n in plan:
        ci = binomtest(sum(o.hits[:n]), n * TOKENS).proportion_ci(conf, method="wilson")
        if not ci.low <= p.agreement <= ci.high:
            return False
    return True


def _accepted(name: str) -> tuple[float, float, float]:
    return rate([o.verdict.passed for o in outcomes(name)])


def _failed(name: str) -> tuple[float, float, float]:
    return rate([o.verdict.decision == "fail" for o in outcomes(name)])


def _covered(name: str) -> tuple[float, float, float]:
    return rate([all(o.covered) for o in outcomes(name)])


AT_OR_BELOW = ["at threshold, independent positions", "at threshold, texts differ",
               "at threshold, texts differ 2x", "below (97%), texts differ",
               "paired, drop at margin, at threshold", "budget 8: at threshold, texts differ",
               "budget 16: at threshold, texts differ"]
AT_OR_ABOVE = ["at threshold, independent positions", "at threshold, texts differ",
               "at threshold, texts differ 2x", "within (99%), texts differ",
               "identical to the reference", "paired, same numerics (drop 0)",
               "paired, flips both ways (drop 0)", "paired, one-sided loss at margin",
               "budget 8: at threshold, texts differ", "budget 8: identical to the reference",
               "budget 16: at threshold, texts differ"]


# What the gate states: 5% for the whole sequence of looks, both errors together. Each error
# alone stays within it; by design each side gets half (2.5%), which 300 sequences cannot
# resolve (a true 2% reads 0.7-3.7% with these seeds). The old gate failed 8.7-11.7% of the
# candidates at the threshold where texts differ: these would catch it.
SLACK = 0.01  # about one Monte Carlo standard error of a 95% coverage over 300 sequences


@pytest.mark.parametrize("name", AT_OR_BELOW)
def test_a_candidate_at_or_below_the_threshold_is_rarely_accepted(name):
    share, low, high = _accepted(name)
    assert share <= FAMILY_ALPHA, (name, share, low, high)


@pytest.mark.parametrize("name", AT_OR_ABOVE)
def test_a_candidate_at_or_above_the_threshold_is_rarely_failed(name):
    share, low, high = _failed(name)
    assert share <= FAMILY_ALPHA, (name, share, low, high)


@pytest.mark.parametrize("name", [p.name for p in PLANTS if p.name not in STRESS])
def test_the_family_of_intervals_keeps_its_stated_confidence(name):
    """Every look's agreement interval holds the truth together in >= 95% of the sequences
    (and the paired drop's, where there is one); no look's is shown short of its own
    confidence (98.3% at the default budget: the upper end of its Monte Carlo interval
    reaches it)."""
    out = outcomes(name)
    share, low, high = _covered(name)
    assert share >= 1 - FAMILY_ALPHA - SLACK, (name, share, low, high)
    plan = looks(PLANTS[BY_NAME[name]].budget)
    conf = look_confidence(len(plan))
    for k in range(len(plan)):
        look = rate([o.covered[k] for o in out])
        assert look[2] >= conf, (name, k, look)
    if out[0].drop_covered:
        assert rate([all(o.drop_covered) for o in out])[0] >= 1 - FAMILY_ALPHA - SLACK


def test_positions_taken_as_independent_fell_short_where_texts_differ():
    """The interval the gate had (Wilson over positions) misses the stated 95% as soon as texts
    differ as they did in the demo's runs; the prompt-clustered one keeps it on the same
    sequences. This is what the Monte Carlo is for: it could fail."""
    name = "at threshold, texts differ"
    old = rate([_old_interval_covers(o, PLANTS[BY_NAME[name]]) for o in outcomes(name)])
    assert old[2] < 1 - FAMILY_ALPHA, old  # shown short
    assert _covered(name)[0] >= 1 - FAMILY_ALPHA
    indep = "at threshold, independent positions"
    assert rate([_old_interval_covers(o, PLANTS[BY_NAME[indep]])
                 for o in outcomes(indep)])[0] >= 0.95


@pytest.mark.parametrize("name", sorted(STRESS))
def test_the_stated_limits_hold_within_looser_bounds(name):
    """Misses in runs within texts that differ 4x as much as independent positions (design
    effect 3.7): 32 prompts cannot see that spread reliably; nor can the 8 prompts of a first
    look that passes when all agree (budget 16) texts that differ twice as much as the demo's.
    Stated in docs/metrics.md, held here to looser bounds so that a regression still shows.
    The one-sided loss is within tolerance (99%): there a lossless call is the error."""
    out = outcomes(name)
    wrong = (rate([o.verdict.change == "lossless" for o in out]) if "loss at margin" in name
             else _accepted(name))
    assert wrong[0] <= 2 * FAMILY_ALPHA, (name, wrong)
    assert _covered(name)[0] >= 1 - 2 * FAMILY_ALPHA


def test_what_passes_passes_at_the_looks_it_did():
    """Power, at the same settings: a candidate identical to the reference passes at the
    second look (512 tokens), every time, and on the 8 prompts of the smallest budget; one
    with the incumbent's numerics is called lossless; a 3-point drop is never accepted."""
    same = outcomes("identical to the reference")
    assert all(o.verdict.passed and o.verdict.looks == [8, 16] for o in same)
    assert all(o.verdict.passed for o in outcomes("budget 8: identical to the reference"))
    lossless = rate([o.verdict.change == "lossless" for o in outcomes(
        "paired, same numerics (drop 0)")])
    assert lossless[0] >= 0.95
    assert _accepted("below (97%), texts differ")[0] == 0


def _row(p: Plant) -> str:
    out = outcomes(p.name)

    def cell(r: tuple[float, float, float]) -> str:
        return f"{r[0]:.1%} ({r[1]:.1%}-{r[2]:.1%})"

    old = rate([_old_interval_covers(o, p) for o in out])
    drop = (cell(rate([all(o.drop_covered) for o in out])) if out[0].drop_covered else "-")
    return (f"| {p.name} | {p.agreement:.3f} | {p.drop:+.3f} | {cell(_accepted(p.name))} | "
            f"{cell(_failed(p.name))} | "
            f"{cell(rate([o.verdict.change == 'lossless' for o in out]))} | "
            f"{cell(_covered(p.name))} | {cell(old)} | {drop} | "
            f"{np.mean([o.verdict.looks[-1] for o in out]):.1f} |")


if __name__ == "__main__":
    print("| plant | agreement | drop | accepted | failed | lossless | covered (all looks) | "
          "old interval covered | drop covered | prompts (mean) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for plant in PLANTS:
        print(_row(plant))
