"""The capacity plan out of sample: the model calibrated on one recorded `make bench-cluster`
run predicts another run's boundaries without refitting (infopt.cluster.recorded), and the
error at 2 and 3 replicas is checked against each bracket's reference rate (the rate left
undecided inside it, two runs pooled, else its geometric middle), the bracket's width beside it.

What fits what: the model's one fitted number, the wait stretch, is fitted to the one-replica
bracket of CALIBRATION (the first run, tests/fixtures/cluster/bench-boundaries.json) and to
nothing else. Every other recorded run in tests/fixtures/cluster/ is held out: predicted
"remeasured" (its replica as its own one-replica probes measured it, nothing fitted, the
calibration's wait stretch carried over), so each of its brackets is out of sample. Each
held-out run's error is the figure README and docs/measurements.md state, pinned in STATED: a
new recording fails here until its figure is stated.

Until a second run is recorded with its probes (`python -m bench.cluster_bench --record
bench-second`, see docs/measurements.md), the recorded-run test runs the calibration run on
itself: a placeholder, in-sample, that validates nothing. The one out-of-sample figure there is
now is the second run's brackets (2026-12-05 13:21), as docs/measurements.md recorded them; its
probes were not kept, so only the calibration run's model unchanged ("transferred": the same
shape) can predict them."""

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


HELD_OUT = _recorded_runs()

# The error each held-out run is stated with (README, docs/measurements.md), per replica
# count, "remeasured" from CALIBRATION. The placeholder's are in-sample.
STATED: dict[str, dict[int, float]] = {
    CALIBRATION: {2: -0.309, 3: -0.063},  # in-sample placeholder: the run on itself
    # 2026-12-06 11:35, the same shape on an AVX-512 EPYC (the calibration ran on an AVX2-only
    # one): brackets 9% wide; over-predicted, the client and router share the two cores.
    "bench-second": {2: 0.269, 3: 0.509},
}


@pytest.mark.parametrize("name", HELD_OUT or [CALIBRATION])
def test_a_recorded_run_predicted_from_the_calibration_run_without_refitting(name):
    run = CAL if name == CALIBRATION else load_run(DIR / f"{name}.json")
    h = predict_held_out(CAL, run, calibration_name=CALIBRATION, held_out_name=name)
    assert h.mode == "remeasured" and h.model.wait_scale == calibrated_on(CAL).wait_scale
    v = {x.replicas: x for x in h.validations}
    if h.same_run:  # the placeholder: in-sample, said so
        assert name == CALIBRATION and v[1].in_sample
    else:
        assert not any(x.in_sample for x in h.validations)
    assert name in STATED, (
        f"{name}: state its out-of-sample error in README.md and docs/measurements.md, then "
        f"here: {({n: round(x.error, 3) for n, x in v.items() if x.error is not None})}")
    for n in (2, 3):
        assert v[n].error is not None and v[n].bracket_width is not None, v[n]
        assert v[n].error == pytest.approx(STATED[name][n], abs=0.005), (n, v[n])


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
