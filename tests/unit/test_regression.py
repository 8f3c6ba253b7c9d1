"""The upgrade regression verdict (infopt.tuning.regression): ratio bounds with the pooled
start-to-start noise, confirmed only by consecutive rounds."""

import pytest

from infopt.specs.reoptimize import ReoptimizeRound
from infopt.tuning.regression import judge, needs_another_round, outcome


def _judge(stored, fresh, higher=True):
    return judge("winner", stored, fresh, [stored, fresh], higher_is_better=higher,
                 bound=0.95, confidence=0.95)


def test_a_threefold_drop_is_a_regression_and_noise_is_not():
    bad = _judge([40.0, 42.0], [13.0, 14.0])
    assert bad.verdict == "regression" and bad.ratio_high < 0.95 and 0.3 < bad.ratio < 0.35
    same = _judge([40.0, 42.0], [38.0, 43.0])
    assert same.verdict == "no change" and same.ratio_low < 1 < same.ratio_high


def test_lower_is_better_objectives_invert_the_ratio():
    slower = _judge([0.010, 0.011], [0.030, 0.031], higher=False)  # ITL tripled
    assert slower.verdict == "regression" and slower.ratio < 0.4
    faster = _judge([0.030, 0.031], [0.010, 0.0105], higher=False)
    assert faster.verdict == "improvement"


def test_without_a_repeat_the_noise_cannot_be_stated():
    with pytest.raises(ValueError, match="repeated"):
        judge("w", [40.0], [13.0], [[40.0], [13.0]], higher_is_better=True, bound=0.95,
              confidence=0.95)


def test_confirmation_needs_consecutive_flagged_rounds():
    bad = ReoptimizeRound(round=1, checks=[_judge([40.0, 42.0], [13.0, 14.0])])
    ok = ReoptimizeRound(round=2, checks=[_judge([40.0, 42.0], [41.0, 40.5])])
    assert needs_another_round([bad], 2) and not needs_another_round([ok], 2)
    assert outcome([bad], 2) == "suspected regression"
    assert outcome([bad, bad.model_copy(update={"round": 2})], 2) == "regression"
    assert outcome([bad, ok], 2) == "no change"
