"""Paired rounds (infopt.analysis.paired, infopt.tuning.rounds, infopt.tuning.final): the
interval on per-round ratios, the sequential rule's error rates measured on simulated
sequences (seeded), the tie broken by secondary measures, the drift check and the
recommendation rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infopt.analysis.compare import bootstrap_diff
from infopt.analysis.paired import noise_sd_log, paired_compare
from infopt.specs.base import InputError
from infopt.tuning import rounds
from infopt.tuning.final import drift_check, recommend

POLICY = rounds.RoundsPolicy(objective="throughput", higher=True, min_rounds=3, max_rounds=8)


def test_pairing_cancels_drift_that_hides_a_gain_from_an_unpaired_comparison():
    """The machine slows 3x over the run; the candidate is 20% faster in every round. Unpaired,
    the spread of the drift swamps the gain; paired, the ratio is the same every round."""
    speed = [1.0, 0.8, 0.6, 0.45, 0.33]
    a = [50 * s for s in speed]
    b = [60 * s * (1 + 0.01 * (-1) ** k) for k, s in enumerate(speed)]
    paired = paired_compare(a, b, higher_is_better=True)
    unpaired = bootstrap_diff(a, b, higher_is_better=True, seed=0)
    assert paired.verdict == "b_better" and paired.ratio == pytest.approx(1.2, rel=0.01)
    assert unpaired.verdict == "no_difference"


def test_the_interval_is_students_t_on_the_log_ratios():
    a, b = [100, 100, 100, 100], [110, 120, 115, 105]
    c = paired_compare(a, b, higher_is_better=True, confidence=0.95)
    d = np.log(np.array(b) / np.array(a))
    half = 3.182446305284263 * d.std(ddof=1) / 2  # t(0.975, 3) * sd / sqrt(4)
    assert math.log(c.ratio_low) == pytest.approx(d.mean() - half)
    assert math.log(c.ratio_high) == pytest.approx(d.mean() + half)
    assert c.verdict == "b_better" and c.sd_log == pytest.approx(d.std(ddof=1))


def test_a_latency_is_better_when_lower():
    c = paired_compare([2.0, 2.1, 1.9], [1.0, 1.05, 0.95], higher_is_better=False)
    assert c.verdict == "b_better" and c.ratio == pytest.approx(0.5)


def test_equivalent_only_when_the_whole_interval_is_within_the_margin():
    tight = paired_compare([100] * 6, [100, 101, 99, 100.5, 99.5, 100], higher_is_better=True)
    loose = paired_compare([100] * 3, [90, 110, 100], higher_is_better=True)
    assert tight.verdict == "equivalent" and loose.verdict == "undecided"
    assert loose.detectable > tight.detectable


@pytest.mark.parametrize("a, b", [([1, 2], [1]), ([1, 0], [1, 2]), ([1, math.nan], [1, 2]),
                                  ([1], [2])])
def test_bad_rounds_say_what_to_change(a, b):
    with pytest.raises(InputError):
        paired_compare(a, b, higher_is_better=True)


def test_noise_of_one_round_is_the_spread_of_the_log_ratios():
    assert noise_sd_log([10, 10, 10], [12, 12, 12]) == 0.0
    assert noise_sd_log([10], [12]) is None


def _sequence(rng: np.random.Generator, true_ratio: float, sd: float,
              policy: rounds.RoundsPolicy, ttft_ratio: float = 1.0):
    a, b, a_sec, b_sec = [], [], {"ttft_p50_s": []}, {"ttft_p50_s": []}
    while True:
        x = 50 * math.exp(rng.normal(0, sd))
        a.append(x)
        b.append(x * true_ratio * math.exp(rng.normal(0, sd)))
        t = math.exp(rng.normal(0, sd))
        a_sec["ttft_p50_s"].append(t)
        b_sec["ttft_p50_s"].append(t * ttft_ratio * math.exp(rng.normal(0, sd)))
        d = rounds.decide(a, b, a_sec, b_sec, policy)
        if d is not None:
            return d


def test_the_sequence_keeps_its_error_rate_across_looks_and_measures():
    """No difference on any measure, 10% noise per window: over 600 simulated sequences, the
    share that accepts (a gain, or a tie won on TTFT) stays within the family's 5% (the
    Bonferroni split makes it conservative; an unadjusted look at every round would not)."""
    rng = np.random.default_rng(7)
    states = [_sequence(rng, 1.0, 0.1, POLICY).state for _ in range(600)]
    false_accept = sum(s in ("gain", "tie_break") for s in states) / len(states)
    false_reject = sum(s in ("worse", "tie_lost") for s in states) / len(states)
    assert false_accept <= 0.05 and false_reject <= 0.05, (false_accept, false_reject)
    # ... and futility stops most of them early instead of spending every round on a tie.
    assert sum(s == "no_gain" for s in states) / len(states) > 0.8


def test_a_real_gain_is_found_with_power_at_the_noise_it_was_sized_for():
    """+20% at 5% noise per window (what the window sizing aims at): found in nearly every
    sequence, mostly within the minimum rounds."""
    rng = np.random.default_rng(11)
    found = [_sequence(rng, 1.2, 0.05, POLICY) for _ in range(300)]
    assert sum(d.state == "gain" for d in found) / len(found) > 0.95
    assert np.median([d.rounds for d in found]) <= 5


def test_a_tie_is_broken_by_ttft_and_a_worse_ttft_loses_it():
    rng = np.random.default_rng(3)
    better = [_sequence(rng, 1.0, 0.02, POLICY, ttft_ratio=0.5) for _ in range(50)]
    worse = [_sequence(rng, 1.0, 0.02, POLICY, ttft_ratio=2.0) for _ in range(50)]
    assert sum(d.state == "tie_break" for d in better) >= 45
    # A worse TTFT never wins a tie (a rare false "gain" on the objective aside: the 5%).
    assert not any(d.state == "tie_break" for d in worse)
    assert sum(d.state in ("tie_lost", "no_gain", "undecided") for d in worse) >= 45
    assert not any(d.state in ("gain", "tie_lost") for d in better)
    assert "TTFT p50" in better[0].why


def test_an_open_question_at_the_last_round_is_undecided_with_what_could_be_seen():
    a = [100, 100, 100, 100, 100, 100, 100, 100]
    b = [112, 100, 116, 104, 114, 102, 113, 105]
    d = rounds.decide(a, b, {}, {}, POLICY)
    assert d.state == "undecided" and d.rounds == 8
    assert "could have detected a difference of" in d.why
    assert rounds.decide(a[:4], b[:4], {}, {}, POLICY) is None  # more rounds needed
    assert rounds.decide(a[:4], b[:4], {}, {}, POLICY, last=True).state == "undecided"


def test_the_policy_refuses_rounds_that_cannot_decide():
    with pytest.raises(ValueError):
        rounds.RoundsPolicy(objective="throughput", higher=True, min_rounds=1, max_rounds=4)
    with pytest.raises(ValueError):
        rounds.RoundsPolicy(objective="throughput", higher=True, min_rounds=5, max_rounds=4)
    assert "Bonferroni" in POLICY.text() and "TTFT p50, then ITL p50" in POLICY.text()


def test_screening_keeps_a_low_round_of_a_real_gain_and_drops_a_clear_loss():
    assert rounds.promising(50, 48, {}, {}, POLICY, noise_sd_log=0.1)  # -4%: within 1 sd
    assert not rounds.promising(50, 35, {}, {}, POLICY, noise_sd_log=0.1)  # -30%
    # Tied on the objective, twice as fast to the first token: worth confirming.
    assert rounds.promising(50, 47, {"ttft_p50_s": 2.0}, {"ttft_p50_s": 1.0}, POLICY, 0.05)
    assert not rounds.promising(50, 47, {"ttft_p50_s": 2.0}, {"ttft_p50_s": 2.0}, POLICY, 0.05)


def test_drift_is_a_move_beyond_the_noise_and_beyond_ten_percent():
    moved = drift_check([40, 41, 39], [20, 21, 19])
    steady = drift_check([40, 41, 39], [40, 40.5, 39.5])
    small = drift_check([40, 40.1, 39.9], [38, 38.1, 37.9])  # -5%, well outside the noise
    assert moved.moved and moved.change == pytest.approx(-0.5)
    assert not steady.moved and not small.moved
    assert "beyond the noise and 10%" in small.why
    assert drift_check([40], [20, 21]) is None


def _decision(state: str):
    a, b = [100, 100, 100], {"gain": [130, 131, 129], "tie": [100, 101, 99],
                             "worse": [70, 71, 69]}[state]
    return rounds.decide(a, b, {}, {}, POLICY, last=True)


def test_the_recommendation_is_the_winner_only_when_it_earns_it():
    assert recommend("baseline + x", _decision("gain"), None, None, None).recommended == "winner"
    tie = recommend("baseline + x", _decision("tie"), None, None, None)
    assert tie.recommended == "control" and "run them" in tie.why
    lost = recommend("baseline", _decision("worse"), None, "4,096 of 8,192 context tokens",
                     None)
    assert lost.recommended == "winner" and "4,096 of 8,192" in lost.why
    assert lost.at_least_as_good is False and "not shown at least as good" in lost.why
    assert recommend("b", _decision("gain"), None, None, None).at_least_as_good is True
    # After drift the fresh comparison decides.
    again = recommend("baseline + x", _decision("gain"), _decision("tie"), None, None)
    assert again.recommended == "control"


def test_one_disturbed_round_is_set_aside_and_only_one_in_four():
    from infopt.tuning.pairs import outlier_round

    d = [0.17, 0.16, 0.18, 0.64, 0.17]  # one incumbent window at half speed
    assert outlier_round(d) == 3
    assert outlier_round([0.17, 0.16, 0.18, 0.19, 0.17]) is None
    assert outlier_round([0.17, 0.16, 0.64]) is None  # too few to tell
    # Rounds that agree to within the 1% floor set nothing aside.
    assert outlier_round([0.100, 0.100, 0.100, 0.104]) is None


def test_the_screen_threshold_is_the_one_the_screen_applies():
    t = rounds.screen_threshold(POLICY, 0.05)
    assert t == pytest.approx(math.expm1(-0.05))
    assert rounds.promising(100, 100 * (1 + t) * 1.001, {}, {}, POLICY, 0.05)
    assert not rounds.promising(100, 100 * (1 + t) * 0.999, {}, {}, POLICY, 0.05)
    assert rounds.screen_threshold(POLICY, None) is None


def test_a_round_budget_below_the_minimum_says_what_to_change():
    from pydantic import ValidationError

    from infopt.specs.request import Budgets

    with pytest.raises(ValidationError, match=r"max_rounds \(3\) is below budgets.repeats \(5\)"):
        Budgets(repeats=5, max_rounds=3)
    assert Budgets(repeats=1).max_rounds == 8  # one round: a look only
