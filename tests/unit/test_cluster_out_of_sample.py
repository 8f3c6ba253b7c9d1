"""The capacity plan out of sample: the model calibrated on one recorded `make bench-cluster`
run predicts another run's boundaries without refitting (infopt.cluster.recorded), and the
error at 2 and 3 replicas is checked against each bracket's reference rate (the rate left
undecided inside it, two runs pooled, else its geometric middle), the bracket's width beside it.

What fits what: the model's one fitted number, the wait stretch, is fitted to the one-replica
bracket of a calibration run and to nothing else. A held-out run is predicted "remeasured":
its replica as its own one-replica probes measured it, the calibration's wait stretch carried
over, so each of its brackets is out of sample. Each held-out run's error is the figure README
and docs/measurements.md state, pinned in STATED: a new recording fails here until its figure
is stated.

Runs recorded before 2026-12-06 12:40 sent their probes as plain Poisson draws of 40 requests,
up to 39% off the rate each probe is labelled with (bench-second's "7.04 requests/s" probe was
sent at 4.29); their brackets are kept as recorded and said so. Probes are now sent at their
labelled rate (PoissonArrival.exact_mean)."""

from __future__ import annotations

import json

import pytest

from infopt.cluster.capacity import bracket_reference, calibrate, predict
from infopt.cluster.recorded import (
    RecordedRun,
    calibrated_on,
    load_run,
    predict_held_out,
    remeasured,
)
from tests.fixture_data import FIXTURES, require

DIR = FIXTURES / "cluster"
CALIBRATION = "bench-boundaries"
CAL = load_run(require(DIR / f"{CALIBRATION}.json"))


def _recorded_runs() -> list[str]:
    names = []
    for path in sorted(DIR.glob("*.json")):
        data = json.loads(path.read_text())
        if path.stem != CALIBRATION and isinstance(data, dict) and "boundaries" in data:
            names.append(path.stem)
    return names


# (calibration run, held-out run) -> the held-out run's error at 2 and 3 replicas, predicted
# "remeasured" (its replica from its own one-replica probes, the calibration's wait stretch
# carried over, nothing refitted): the figures README.md and docs/measurements.md state.
STATED: dict[tuple[str, str], dict[int, float]] = {
    # 2026-12-06 11:35, the same shape on an AVX-512 EPYC (the calibration ran on an AVX2-only
    # one). Its probes were plain Poisson draws of 40 requests, sent up to 39% below the rate
    # they are labelled with, so its brackets ("9% wide") are not what was sent: the error
    # stands as measured, the data behind it does not decide it.
    (CALIBRATION, "bench-second"): {2: 0.269, 3: 0.509},
    # 2026-12-06 12:42, the same shape, probes sent at their labelled rate (exact_mean).
    (CALIBRATION, "bench-exact"): {2: -0.009, 3: -0.009},
    # 2026-12-06 13:16, another shape: 96-token prompts (twice the calibration's), calibrated on
    # bench-exact. Its one replica is over-predicted (+43%) where the wait stretch of 48-token
    # requests is carried to a queue of twice-as-long prefills; pooled replicas dilute it.
    ("bench-exact", "bench-exact-prompt96"): {2: -0.154, 3: 0.052},
}


def test_every_recorded_run_is_held_out_with_its_error_stated():
    held_out = {h for _, h in STATED}
    missing = [n for n in _recorded_runs() if n not in held_out]
    assert not missing, (f"{missing}: predict each from a calibration run, state its "
                         "out-of-sample error in README.md and docs/measurements.md, then here")


@pytest.mark.parametrize("pair", sorted(STATED))
def test_a_recorded_run_predicted_from_the_calibration_run_without_refitting(pair):
    cal_name, name = pair
    cal = load_run(require(DIR / f"{cal_name}.json"))
    run = load_run(require(DIR / f"{name}.json"))
    h = predict_held_out(cal, run, calibration_name=cal_name, held_out_name=name)
    assert h.mode == "remeasured" and h.model.wait_scale == calibrated_on(cal).wait_scale
    assert not h.same_run and not any(x.in_sample for x in h.validations)
    v = {x.replicas: x for x in h.validations}
    for n in (2, 3):
        assert v[n].error is not None and v[n].bracket_width is not None, v[n]
        assert v[n].error == pytest.approx(STATED[pair][n], abs=0.005), (n, v[n])


def test_the_calibration_run_on_itself_is_said_in_sample():
    h = predict_held_out(CAL, CAL, calibration_name=CALIBRATION, held_out_name=CALIBRATION)
    v = {x.replicas: x for x in h.validations}
    assert h.same_run and v[1].in_sample and not v[2].in_sample


# The second run (2026-12-05 13:21, the same shape), as docs/measurements.md recorded it:
# replicas -> (met up to, missed from, undecided inside); its probes were not kept.
SECOND_RUN = {1: (2.24, 2.44, ()), 2: (4.48, 4.89, ()), 3: (4.48, 8.96, (6.34,))}


def test_the_second_runs_brackets_from_the_first_runs_model_unchanged():
    model = calibrated_on(CAL)
    errors, widths = {}, {}
    for n, (lo, hi, undecided) in SECOND_RUN.items():
        ref, _ = bracket_reference(lo, hi, undecided)
        assert ref is not None
        errors[n] = predict(model, CAL.slos, n, CAL.routing).max_rate_per_s / ref - 1
        widths[n] = hi / lo - 1
    # Out of sample, as stated: one replica -18% (its bracket 9% wide), two -13% (9%),
    # three -35% against the undecided 6.34 in a bracket 100% wide. The calibration run's
    # one replica measured ~18% slower than the second run's: the host's drift between runs.
    assert errors[1] == pytest.approx(-0.179, abs=0.005)
    assert errors[2] == pytest.approx(-0.127, abs=0.005) and widths[2] < 0.1
    assert errors[3] == pytest.approx(-0.355, abs=0.005) and widths[3] == 1.0


def test_remeasured_reads_the_held_out_replica_and_carries_the_stretch_only():
    other = CAL.model_copy(update={"threads_per_replica": 2})  # another shape, same probes
    fitted = calibrated_on(CAL)
    m = remeasured(fitted, other, CALIBRATION)
    mine = calibrate(other.boundaries[1], other.slots)
    assert m.service_mean_s == mine.service_mean_s and m.light_load_s == mine.light_load_s
    assert m.wait_scale == fitted.wait_scale and m.threads_per_replica == 2
    assert "carried from bench-boundaries" in m.calibrated_from and "not refitted" in \
        m.calibrated_from
    # Two threads a replica on two cores: one replica has them all, so more replicas only
    # share them (each serves 1/N as fast), predicted to serve about what one does.
    h = predict_held_out(CAL, other, held_out_name="threads-2")
    assert not h.same_run and not any(v.in_sample for v in h.validations)
    rates = {v.replicas: v.predicted_rate_per_s for v in h.validations}
    assert rates[2] == pytest.approx(rates[1], rel=0.02) == rates[3]
    with pytest.raises(ValueError, match="another shape"):
        predict_held_out(CAL, other, mode="transferred")


def test_a_recorded_run_round_trips_through_its_fixture(tmp_path):
    from infopt.cluster.recorded import write_run

    path = write_run(CAL, tmp_path / "x.json")
    assert load_run(path) == CAL
    assert RecordedRun.model_validate_json(path.read_text()).shape() == (1, 2, 1, 48, 16)
