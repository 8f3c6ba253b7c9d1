"""bench/cluster_bench.py's out-of-sample options without running the bench: the arguments are
checked before a half-hour run starts, a run's report becomes a fixture the out-of-sample test
loads, and the printed error names its reference rate and the bracket's width."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench import cluster_bench
from infopt.cluster.capacity import validate
from infopt.cluster.recorded import calibrated_on, load_run, predict_held_out, write_run
from infopt.specs.cluster import ClusterReport
from tests.fixture_data import FIXTURES

CAL_PATH = FIXTURES / "cluster" / "bench-boundaries.json"


def test_the_arguments_are_checked_before_the_run(tmp_path):
    a = cluster_bench._args(["--record", "bench-threads2", "--threads-per-replica", "2",
                             "--calibrate-from", str(CAL_PATH)])
    assert (a.record, a.threads_per_replica, a.prompt_tokens, a.probe_requests) == (
        "bench-threads2", 2, 48, 40)
    with pytest.raises(SystemExit):  # the calibration fixture is never overwritten
        cluster_bench._args(["--record", "bench-boundaries"])
    with pytest.raises(SystemExit):
        cluster_bench._args(["--record", "../x"])
    with pytest.raises(SystemExit):
        cluster_bench._args(["--calibrate-from", str(tmp_path / "missing.json")])


def test_a_runs_report_becomes_a_fixture_the_held_out_test_can_load(tmp_path):
    cal = load_run(CAL_PATH)
    model = calibrated_on(cal)
    report = ClusterReport(run_id="c1", created_at="now", baseline_run="r1",
                           engine="llamacpp", engine_version="b1",
                           winner_command="llama-server -m m.gguf", slos=cal.slos,
                           boundaries=cal.boundaries,
                           boundary_routes={2: "vllm-router 0.1.17, load_aware"}, routers=[],
                           plan=None)
    stored = SimpleNamespace(hardware=SimpleNamespace(host=SimpleNamespace(
        cpu_model="AMD EPYC", usable_cpus=2)))
    args = cluster_bench._args(["--threads-per-replica", "1"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("flows.cluster._slots", lambda _stored: 1)
        run = cluster_bench._recorded(args, ["--record", "x"], stored, report)
    assert run.shape() == cal.shape() and run.start_rate_per_s == cal.start_rate_per_s
    assert "--record x, AMD EPYC, 2 usable CPUs" in run.source
    back = load_run(write_run(run, tmp_path / "x.json"))
    h = predict_held_out(cal, back, held_out_name="x")
    assert [v.replicas for v in h.validations] == [1, 2, 3]
    line = cluster_bench._validation_line(
        validate(model, cal.slos, cal.boundaries, "pooled", in_sample={1})[1])
    assert line == ("2 replica(s): predicted 4.09, measured [4.18, 8.36] (100% wide), against "
                    "5.91 (the undecided rate, two runs pooled): error -31%")
