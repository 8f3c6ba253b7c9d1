"""The band a re-measurement by hand should fall in (infopt.tuning.reproduce)."""

from __future__ import annotations

import math

import pytest

from infopt.tuning.reproduce import pooled_relative_sd, reproduction_band


def test_the_noise_is_pooled_over_every_repeated_configuration():
    s, dof = pooled_relative_sd([[100.0, 110.0], [50.0, 50.0, 56.0], [7.0]])
    # (1 x var/mean^2 of the first) + (2 x that of the second), over 3 degrees of freedom;
    # the single-repeat configuration adds nothing.
    a = 50.0 / 105.0 ** 2
    b = 12.0 / 52.0 ** 2
    assert dof == 3 and s == pytest.approx(math.sqrt((a + 2 * b) / 3))


def test_the_band_is_a_t_prediction_interval_around_the_winners_mean():
    from scipy.stats import t

    groups = [[50.0, 54.0], [40.0, 44.0, 48.0]]
    mean, low, high, rule = reproduction_band([50.0, 54.0], groups)
    s, dof = pooled_relative_sd(groups)
    half = t.ppf(0.995, 3) * s * math.sqrt(1.5)
    assert mean == 52.0 and (low, high) == (pytest.approx(52 * (1 - half)),
                                            pytest.approx(52 * (1 + half)))
    assert "t(0.995, 3)" in rule and "prediction interval" in rule


def test_without_a_repeat_no_band_is_claimed():
    mean, low, high, rule = reproduction_band([100.0], [[100.0], [90.0]])
    assert (mean, low, high) == (100.0, None, None) and "budgets.repeats" in rule
    with pytest.raises(ValueError):
        reproduction_band([], [[1.0, 2.0]])


def test_the_winners_weights_are_named_by_digest_and_origin(tmp_path):
    import hashlib

    from infopt.report.reproduce import weights_identity

    snap = tmp_path / "hub" / "models--org--m-GGUF" / "snapshots" / ("ab" * 20)
    snap.mkdir(parents=True)
    f = snap / "m.Q4_0.gguf"
    f.write_bytes(b"GGUF weights")
    w = weights_identity(str(f), "org/m", None)
    assert w.digest == "sha256:" + hashlib.sha256(b"GGUF weights").hexdigest()
    assert w.source == f"hub org/m-GGUF at revision {'ab' * 20}"
    local = tmp_path / "x.gguf"
    local.write_bytes(b"x")
    assert weights_identity(str(local), "org/m", "main").source == \
        "local file; its model is hub org/m at revision main"
    assert weights_identity(str(local), None, None).source == "local file"

