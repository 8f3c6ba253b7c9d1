"""The boundary search and the capacity plan on the probes the first `make bench-cluster` run
recorded (tests/fixtures/cluster/bench-boundaries.json: its source line says where and when).

The search replayed on them takes the same steps to the same bracket, except where the search
now narrows further: the two-replica bracket [4.18, 8.36] that the old search left around the
undecided 5.91 is now bisected on its lower side next.

The plan here is IN-SAMPLE, a regression check and no validation: its one fitted factor (the
wait stretch) is fitted to this run's one-replica bracket, and its shared-cores term was added
after this run's three-replica bracket was seen. The errors pinned below are what the model
gives on the data it was shaped on; the out-of-sample figure is
tests/unit/test_cluster_out_of_sample.py's."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from infopt.cluster.boundary import search_boundary
from infopt.cluster.capacity import calibrate, validate
from infopt.cluster.recorded import calibrated_on, load_run
from tests.fixture_data import FIXTURES, require

RUN = load_run(require(FIXTURES / "cluster" / "bench-boundaries.json"))
BOUNDARIES = RUN.boundaries


class _Unrecorded(Exception):
    """The search asked for a rate the recorded run never measured (there, it had stopped)."""


@pytest.mark.parametrize("n", sorted(BOUNDARIES))
def test_the_search_replayed_on_recorded_probes_takes_the_same_steps(n):
    recorded = BOUNDARIES[n]
    runs = defaultdict(list)  # the measured runs per rate, in order (pooled rows excluded)
    for p in recorded.probes:
        if not p.why.startswith("two runs pooled"):
            runs[p.rate_per_s].append(p)
    measured = [p.rate_per_s for p in recorded.probes if not p.why.startswith("two runs pooled")]
    asked: list[float] = []

    def measure_at(rate: float):
        asked.append(rate)
        if not runs[rate]:
            raise _Unrecorded(rate)
        return runs[rate].pop(0)

    if n == 2:
        # The old search stopped on the pooled, still undecided 5.91 with [4.18, 8.36] left;
        # this one goes on below it, at the geometric middle of [4.18, 5.91].
        with pytest.raises(_Unrecorded):
            search_boundary(measure_at, RUN.start_rate_per_s, max_probes=recorded.probes_budget)
        assert asked[:-1] == measured
        assert asked[-1] == pytest.approx(math.sqrt(4.181136172137675 * 5.913019480765828))
        return
    b = search_boundary(measure_at, RUN.start_rate_per_s, max_probes=recorded.probes_budget)
    assert [p.rate_per_s for p in b.probes] == [p.rate_per_s for p in recorded.probes]
    assert (b.meets_up_to_rate_per_s, b.misses_from_rate_per_s, b.shape) == (
        recorded.meets_up_to_rate_per_s, recorded.misses_from_rate_per_s, recorded.shape)
    if n == 1:  # 19% wide around the pooled undecided 1.92: each side is within 15% of it
        assert any("the sampling noise leaves this band, not the budget" in x for x in b.notes)


def test_the_plan_on_the_run_it_was_shaped_on_in_sample_regression():
    model = calibrated_on(RUN)
    assert "fitted to the measured one-replica boundary" in model.calibrated_from
    assert model.wait_scale == pytest.approx(0.0782, abs=1e-4)
    v = {x.replicas: x for x in validate(model, RUN.slos, BOUNDARIES, "pooled", in_sample={1})}
    assert v[1].in_sample and not v[2].in_sample and not v[3].in_sample
    # Errors against each bracket's reference rate (in-sample, see the module docstring):
    # one replica, the fit itself; two, -31% against the undecided 5.91 in a bracket 100%
    # wide; three, -6% against the middle 4.37 of a bracket 9% wide.
    assert v[1].error == pytest.approx(0.0, abs=0.005)
    assert (v[2].measured_reference_rate_per_s, v[2].bracket_width) == (
        pytest.approx(5.913, abs=1e-3), pytest.approx(1.0))
    assert v[2].error == pytest.approx(-0.309, abs=0.005)
    assert v[3].measured_reference_rate_per_s == pytest.approx(4.366, abs=1e-3)
    assert v[3].error == pytest.approx(-0.063, abs=0.005)
    # Without the host's two cores shared by three one-thread replicas, three overshoots.
    free = calibrate(BOUNDARIES[1], RUN.slots, RUN.slos)
    over = {x.replicas: x.error for x in validate(free, RUN.slos, BOUNDARIES, "pooled",
                                                  in_sample={1})}
    assert over[3] == pytest.approx(0.433, abs=0.005)
