"""The boundary search and the capacity plan on measurements recorded by `make bench-cluster`
(tests/fixtures/cluster/bench-boundaries.json: its source line says where and when): the search
replayed on the recorded probes takes the same steps to the same bracket, and the plan
calibrated on the one-replica boundary predicts the two- and three-replica ones within a few
percent, the shared cores of a 2-core host included (without them it overshoots three)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from infopt.cluster.boundary import search_boundary
from infopt.cluster.capacity import calibrate, validate
from infopt.specs.cluster import Boundary
from infopt.specs.traffic import Slo
from tests.fixture_data import FIXTURES

REC = json.loads((FIXTURES / "cluster" / "bench-boundaries.json").read_text())
SLOS = [Slo.model_validate(s) for s in REC["slos"]]
BOUNDARIES = {int(n): Boundary.model_validate(b) for n, b in REC["boundaries"].items()}


@pytest.mark.parametrize("n", sorted(BOUNDARIES))
def test_the_search_replayed_on_recorded_probes_takes_the_same_steps(n):
    recorded = BOUNDARIES[n]
    runs = defaultdict(list)  # the measured runs per rate, in order (pooled rows excluded)
    for p in recorded.probes:
        if not p.why.startswith("two runs pooled"):
            runs[p.rate_per_s].append(p)
    b = search_boundary(lambda rate: runs[rate].pop(0), REC["start_rate_per_s"],
                        max_probes=recorded.probes_budget)
    assert [p.rate_per_s for p in b.probes] == [p.rate_per_s for p in recorded.probes]
    assert (b.meets_up_to_rate_per_s, b.misses_from_rate_per_s, b.shape) == (
        recorded.meets_up_to_rate_per_s, recorded.misses_from_rate_per_s, recorded.shape)


def test_the_plan_calibrated_on_one_replica_predicts_two_and_three():
    model = calibrate(BOUNDARIES[1], REC["slots"], SLOS, host_cores=2, threads_per_replica=1)
    assert "fitted to the measured one-replica boundary" in model.calibrated_from
    errors = {v.replicas: v.error for v in validate(model, SLOS, BOUNDARIES, "pooled")}
    assert errors[1] == 0.0  # the fit: inside its own bracket
    assert abs(errors[2]) < 0.1 and abs(errors[3]) < 0.1, errors
    # Without the host's two cores shared by three one-thread replicas, three overshoots.
    free = calibrate(BOUNDARIES[1], REC["slots"], SLOS)
    over = {v.replicas: v.error for v in validate(free, SLOS, BOUNDARIES, "pooled")}
    assert over[3] > 0.3, over
