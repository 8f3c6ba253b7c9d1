"""The reoptimize flow on the real llama-server: the session's optimize run (tests/flows/
conftest.py) is accepted with the real `infopt accept`, then re-measured on three "installed
builds": the same build (no upgrade: nothing started), a new build that behaves the same (a
wrapper with a new version string: must not be flagged), and a new build with a planted
regression (the same wrapper forcing one thread, standing in for a slower release: must be
flagged and confirmed over two rounds). The package index is a local fixture server."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infopt.engines import adapter_for, process
from infopt.specs.reoptimize import ReoptimizeReport, ReoptimizeRequest
from tests.indexserver import FakeIndex
from tests.procs import end_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _deploy(env: dict, pool: str, name: str) -> None:
    """The process pool, then prefect.yaml's deployment `name` on it (a real `prefect deploy`)."""
    for args in (["work-pool", "create", pool, "--type", "process", "--overwrite"],
                 ["--no-prompt", "deploy", "--name", name]):
        out = subprocess.run([PREFECT, *args], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=180)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


@pytest.fixture(scope="module")
def accepted(optimized_run):
    report, run_dir = optimized_run
    out = subprocess.run([sys.executable, "-m", "infopt.cli", "accept", report.run_id,
                          "--runs-dir", str(run_dir.parent)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"accepted run {report.run_id}" in out.stdout
    return report, run_dir.parent


@pytest.fixture(scope="module")
def index():
    with FakeIndex({"llama-cpp-python": ["0.3.35", "0.3.36", "0.3.37"]}) as idx:
        yield idx


def _request_s(stored) -> float:
    """Seconds a streamed request took this machine's real engine at the target concurrency in
    the accepted run (the slower of winner and runner-up): what the paced builds scale."""
    from infopt.tuning.remeasure import picks

    tokens = stored.workload.traffic.output_lengths.tokens
    slowest = min(statistics.median(p.stored) for p in picks(stored))
    return stored.workload.target_concurrency * tokens / slowest


@pytest.fixture(scope="module")
def paced(prefect_api, accepted, index, tmp_path_factory):
    """Throughput verdicts no CPU can turn: builds whose streamed tokens leave on a fixed pace
    (tests/paced_build.py: the real llama-server behind a pacing proxy), and a baseline
    measured on one of them. The pace makes a request last ~3x what this machine's engine took
    for it in the accepted run, so the engine is never what sets the speed, on a fast CPU or
    a slow one. The baseline is the accepted run whose measured trials are fresh ones of its
    winner and runner-up on the paced build (one re-optimization round), so the picks and the
    spread the verdict pools are all paced; the rest (request, quality reference) is the real
    run's.
    Returns (baseline run id, build(name, factor) -> executable paced `factor` x slower)."""
    from infopt.tuning.remeasure import config_id
    from tests.paced_build import write_build

    stored, root = accepted
    unit = _request_s(stored)
    tokens = stored.workload.traffic.output_lengths.tokens
    real = adapter_for("llamacpp").locate()
    folder = tmp_path_factory.mktemp("builds")

    def build(name: str, factor: float) -> str:
        return write_build(folder, name, real, ttft_s=factor * unit,
                           itl_s=factor * 2 * unit / tokens)

    # The verdicts read the target load only: a copy of the accepted run whose workload is its
    # closed loop at the target concurrency (the sweep's other level would only add paced
    # seconds to every fresh start).
    lean = _copy_run(root, stored, f"{stored.run_id}-lean", workload=_target_level_only(stored))
    # The paced build against it: one round is enough (its verdict, a slowdown against the
    # unpaced engine, is not what is kept: its fresh trials are).
    _, rep = _run(root, index_url=index.url, executable=build("paced", 1), confirm_rounds=1,
                  baseline_run=lean.run_id)
    fresh = [t for t in rep.trials if t.objective_value is not None]
    assert len(fresh) == len(rep.trials) == 4, [t.failed for t in rep.trials]
    assert len({config_id(t.config) for t in fresh}) == 2  # the winner and its runner-up
    assert all([s.name for s in t.benchmark.scenarios] == ["chat"] for t in fresh)
    baseline = _copy_run(root, lean, f"{stored.run_id}-paced",
                         engine_version=rep.installed_version,
                         winner_trial_id=fresh[0].trial_id, trials=fresh)
    return baseline.run_id, build


def _target_level_only(stored):
    from infopt.specs.workload import ClosedLoop

    traffic = stored.workload.traffic
    return stored.workload.model_copy(update={"traffic": traffic.model_copy(update={
        "arrival": ClosedLoop(concurrency=traffic.peak_active_generations)})})


def _copy_run(root: Path, stored, run_id: str, **update):
    """A copy of run `stored` under `run_id` (its quality reference and floor with it) with
    `update` applied to its report."""
    shutil.copytree(root / stored.run_id, root / run_id,
                    ignore=shutil.ignore_patterns("trials", "plots"))
    copy = stored.model_copy(update={"run_id": run_id, **update})
    (root / run_id / "report.json").write_text(copy.model_dump_json())
    return copy


def _run(root: Path, **kw) -> tuple[object, ReoptimizeReport]:
    from flows.reoptimize import reoptimize

    state = reoptimize(request=ReoptimizeRequest(**kw), runs_dir=str(root), return_state=True)
    returned = state.result(raise_on_failure=False)
    assert isinstance(returned, ReoptimizeReport), returned
    # What was written is what the flow returned.
    written = root / returned.run_id / "reoptimize.json"
    assert ReoptimizeReport.model_validate_json(written.read_text()) == returned
    return state, returned


def test_the_same_build_is_no_upgrade_and_starts_nothing(prefect_api, accepted, index):
    stored, root = accepted
    state, rep = _run(root, index_url=index.url)
    assert state.is_completed() and rep.outcome == "no upgrade"
    assert rep.installed_version == rep.stored_version == stored.engine_version
    assert not rep.upgraded and rep.trials == [] and rep.rounds == []
    # The index's newest release against the build's own (the `make engines` marker).
    assert rep.release.installed == "0.3.36" and rep.release.newest == "0.3.37"
    assert rep.release.newer_available is True and "0.3.37 is out" in rep.summary
    assert "/pypi/llama-cpp-python/json" in index.requests
    assert rep.configs[0] == stored.winner_label and len(rep.configs) == 2
    assert process.live_pids() == []


@pytest.mark.e2e  # with the next: ~8 min of paced rounds on 2 cores
def test_a_new_build_that_behaves_the_same_is_not_flagged(prefect_api, accepted, index, paced,
                                                         monkeypatch):
    from flows import remeasure
    from tasks.trial import run_trial

    stored, root = accepted
    # With fan_out the round hands all its trials to flows/fanout.fan_out at once; here they
    # run in this process, one after another (a valid no-change verdict needs an idle
    # machine); the real transport over two workers is the next test's.
    handed = []

    def in_process(items, ctx, deployment, results_store=None, job_variables=None):
        handed.append((deployment, [spec.trial_id for spec, _, _ in items]))
        return [run_trial(spec, key, fit, ctx) for spec, key, fit in items]

    monkeypatch.setattr(remeasure, "fan_out", in_process)
    base_id, build = paced
    same = build("same", 1)  # another build, the same pace as the baseline's
    state, rep = _run(root, index_url=index.url, executable=same, fan_out="trial/trial",
                      baseline_run=base_id)
    assert handed == [("trial/trial", ["round1-winner-r1", "round1-runner-up-r1",
                                       "round1-winner-r2", "round1-runner-up-r2"])]
    assert rep.baseline_run == base_id and rep.upgraded
    assert rep.installed_version != stored.engine_version
    assert rep.outcome in ("no change", "improvement"), rep.summary
    assert state.is_completed(), state.message
    # A clean round ends the run: one round, two fresh starts of each configuration.
    assert len(rep.rounds) == 1 and len(rep.trials) == 4
    assert [c.label for c in rep.rounds[0].checks] == rep.configs
    for c in rep.rounds[0].checks:
        assert len(c.fresh) == 2 and c.verdict != "regression" and c.dof > 0
        assert c.ratio_low <= c.ratio <= c.ratio_high and 0.67 < c.ratio < 1.5, c.rule
    for t in rep.trials:  # every fresh start kept the API contract and the quality gate
        assert t.failed is None and t.quality is not None and t.quality.passed
        assert t.engine.command.startswith(same)
    assert process.live_pids() == []


@pytest.mark.e2e
def test_a_planted_regression_is_flagged_and_confirmed(prefect_api, accepted, index, paced):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    stored, root = accepted
    base_id, build = paced
    slow = build("slow", 3)  # every streamed token 3x later than the baseline's build
    state, rep = _run(root, index_url=index.url, executable=slow, baseline_run=base_id)
    # The Prefect state says it (a schedule's alert), then the report and the artifact.
    assert state.is_failed() and "REGRESSION" in state.message, state.message
    assert rep.outcome == "regression" and len(rep.rounds) == 2  # confirmed by a second round
    for rnd in rep.rounds:
        win = rnd.checks[0]
        assert win.label == stored.winner_label and win.verdict == "regression", win.rule
        assert win.ratio_high < 0.95 and win.ratio < 0.5, win.rule  # ~1/3 planted
    assert all(t.engine.command.startswith(slow) for t in rep.trials)
    md = (root / rep.run_id / "reoptimize.md").read_text()
    assert "**REGRESSION**" in md and "## Round 2" in md
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["infopt-reoptimize"])))
    assert any(rep.run_id in (a.description or "") and "regression" in a.description
               for a in arts)
    # The accepted run is untouched: a re-tune is proposed, not applied.
    acc = json.loads((root / "accepted.json").read_text())
    assert acc["run_id"] == stored.run_id and "infopt optimize --target" in rep.summary
    assert process.live_pids() == []


def test_a_retune_runs_on_the_build_that_regressed(prefect_api, accepted, index, tmp_path,
                                                   monkeypatch):
    """request.retune after a confirmed regression: the optimizer runs again on the build the
    request named (its executable), as the re-measurement did, not on the one `make engines`
    installed. The rounds and the optimizer are stand-ins here (the verdict and the optimizer
    are the other tests'): this asserts which build the re-tune was given."""
    import os

    from flows import optimize as optimize_flow
    from flows import reoptimize as reopt
    from infopt.specs.reoptimize import RegressionCheck, ReoptimizeRound
    from tests.paced_build import write_build

    stored, root = accepted
    adapter = adapter_for("llamacpp")
    upgraded = write_build(tmp_path, "upgraded", adapter.locate(), ttft_s=0.0, itl_s=0.0)
    seen = []

    def optimizer(request, runs_dir):
        seen.append(os.environ.get(adapter.executable_env))
        return stored

    flagged = RegressionCheck(label=stored.winner_label, stored=[1.0], fresh=[0.3], ratio=0.3,
                              ratio_low=0.2, ratio_high=0.4, relative_sd=0.01, dof=3,
                              verdict="regression", rule="planted")
    monkeypatch.setattr(optimize_flow, "optimize", optimizer)
    monkeypatch.setattr(reopt, "rounds",
                        lambda m, req: [ReoptimizeRound(round=1, checks=[flagged])])
    before = os.environ.get(adapter.executable_env)
    state, rep = _run(root, index_url=index.url, executable=upgraded, retune=True,
                      confirm_rounds=1, approval_timeout_s=1)
    assert state.is_failed() and rep.outcome == "regression"
    assert seen == [upgraded]  # the re-tune's engine was the upgraded build
    assert os.environ.get(adapter.executable_env) == before  # and the override is undone
    assert rep.retune_run == stored.run_id and rep.promoted is False  # unanswered gate
    assert json.loads((root / "accepted.json").read_text())["run_id"] == stored.run_id


@pytest.mark.e2e  # real process workers (with the fan-out below: ~85 s)
def test_the_reoptimize_deployment_runs_on_a_process_worker(prefect_server, accepted, index):
    """`prefect deploy` of prefect.yaml's reoptimize, a run of it (what its schedule creates)
    picked up by a real process worker: the same build, so no engine starts."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    stored, root = accepted
    env = {**prefect_server, "INFOPT_CHECKOUT": str(ROOT), "PREFECT_LOGGING_LEVEL": "WARNING"}
    _deploy(env, "infopt-process", "reoptimize")
    with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}), \
            get_client(sync_client=True) as client:
        dep = client.read_deployment_by_name("reoptimize/reoptimize")
        run = client.create_flow_run_from_deployment(dep.id, parameters={
            "request": {"index_url": index.url}, "runs_dir": str(root)})
        worker = subprocess.run([PREFECT, "worker", "start", "--pool", "infopt-process",
                                 "--run-once"], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=300)
        deadline = time.monotonic() + 60
        while not (state := client.read_flow_run(run.id).state).is_final() and \
                time.monotonic() < deadline:
            time.sleep(1)
    assert state.is_completed(), (state, worker.stdout[-3000:], worker.stderr[-3000:])
    assert "no upgrade" in state.message
    written = [json.loads(p.read_text()) for p in root.glob("reopt-*/reoptimize.json")]
    assert any(r["outcome"] == "no upgrade" and r["baseline_run"] == stored.run_id
               for r in written)


@pytest.mark.e2e
def test_trials_fan_out_over_a_pool_with_two_workers(prefect_server, prefect_api, accepted,
                                                    tmp_path):
    """flows/fanout.fan_out: each trial is its own run of prefect.yaml's `trial` deployment,
    picked up by one of two real process workers (one trial at a time each, so two trials
    land on both), and read back by key. The trials are lean (no contract probe or quality
    gate: those are the trial task's, tested elsewhere) and share this machine, so only the
    mechanics are asserted, not the numbers."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    from blocks.cluster import ClusterTarget
    from blocks.named import load_cluster_target
    from flows.fanout import fan_out
    from infopt.runs.engine_run import EngineRun
    from infopt.specs.serving import with_knob
    from infopt.specs.trial import TrialRole, TrialSpec, changes_from, trial_key

    stored, root = accepted
    env = {**prefect_server, "INFOPT_CHECKOUT": str(ROOT), "PREFECT_LOGGING_LEVEL": "INFO",
           "PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_WORKER_PREFETCH_SECONDS": "1"}
    _deploy(env, "infopt-trials", "trial")
    winner = next(t for t in stored.trials if t.trial_id == stored.winner_trial_id)
    ctx = EngineRun(run_dir=str(tmp_path / "fan-run"), model=stored.model,
                       hw=stored.hardware, workload=stored.workload, tokenizer_path=None)
    # One thread each: two llama-servers of 2 threads on these 2 cores spin against each other
    # (measured: 128 s for a 10 s benchmark).
    config = with_knob(winner.config, "threads", 1)
    specs = [TrialSpec(trial_id=f"fan-r{i}", role=TrialRole.TUNING, config=config,
                       changes=changes_from(stored.control_config, config),
                       value=stored.winner_label, repeat=i) for i in (1, 2)]
    items = [(s, trial_key(s, stored.workload, stored.engine_version, "test"), None)
             for s in specs]

    # A ClusterTarget's job variables ride along (the GPU pool's; a process pool ignores them).
    ClusterTarget(gpu_node_selector={"nvidia.com/gpu.present": "true"}).save(
        "fan-out-test", overwrite=True)

    @flow(name="fan-out-test")
    def parent():
        return fan_out(items, ctx, "trial/trial",
                       job_variables=load_cluster_target("fan-out-test").job_variables())

    logs = [tmp_path / f"worker-{i}.log" for i in (1, 2)]
    workers = [subprocess.Popen([PREFECT, "worker", "start", "--pool", "infopt-trials",
                                 "--limit", "1", "--name", f"trial-worker-{i}"], cwd=ROOT,
                                env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                start_new_session=True) for i, log in enumerate(logs, 1)]
    try:
        state = parent(return_state=True)
    finally:
        for w in workers:
            end_process(w)
    trials = state.result()
    assert [t.trial_id for t in trials] == ["fan-r1", "fan-r2"]
    for t, (_, key, _) in zip(trials, items, strict=False):  # each written by its child run, read by key
        assert t.failed is None and t.objective_value > 0 and t.key == key, t.failed
        assert (tmp_path / "fan-run" / "trials" / key / "trial.json").is_file()
    with get_client(sync_client=True) as client:
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(
                any_=[state.state_details.flow_run_id])))
    runs = [c for c in children if c.deployment_id is not None]
    assert sorted(c.name for c in runs) == ["fan-r1", "fan-r2"]
    assert all(c.state.is_completed() for c in runs)
    assert all(c.job_variables["node_selector"] == {"nvidia.com/gpu.present": "true"}
               for c in runs)
    # One each: a worker with --limit 1 cannot take the second while it runs the first.
    took = [sum(f"Flow run '{c.name}' submitted to infrastructure" in log.read_text()
                for c in runs) for log in logs]
    assert took == [1, 1], took
    # Submitted again (a resumed parent), nothing new runs: both are read back from disk.
    assert parent() == trials


def test_a_retune_is_promoted_only_through_its_gate(prefect_api, accepted, tmp_path):
    """The promote gate after a re-tune (flows/reoptimize.promote): unanswered -> the accepted
    run stays; pre-authorized -> the re-tune's run becomes the accepted one. The "re-tune" is
    a copy of the accepted run under another id (the optimizer itself is tested elsewhere)."""
    import shutil

    from prefect import flow

    from flows.reoptimize import promote
    from infopt.runs.accepted import accept

    stored, root = accepted
    retuned = stored.model_copy(update={"run_id": "retune-test"})
    shutil.copytree(root / stored.run_id, root / retuned.run_id,
                    ignore=shutil.ignore_patterns("trials", "quality", "plots"))
    (root / retuned.run_id / "report.json").write_text(retuned.model_dump_json())
    found = ReoptimizeReport.model_validate_json(next(root.glob("reopt-*/reoptimize.json"))
                                                 .read_text())

    @flow(name="promote-test")
    def gate(req: ReoptimizeRequest) -> ReoptimizeReport:
        return promote(found, retuned, root, req)

    try:
        denied = gate(ReoptimizeRequest(approval_timeout_s=1))
        assert denied.promoted is False and denied.promotion.source == "timeout"
        assert json.loads((root / "accepted.json").read_text())["run_id"] == stored.run_id
        assert "not promoted" in denied.notes[-1]
        ok = gate(ReoptimizeRequest(authorize=["promote"]))
        assert ok.promoted and ok.promotion.source == "pre-authorized"
        acc = json.loads((root / "accepted.json").read_text())
        assert acc["run_id"] == "retune-test" and acc["accepted_by"].startswith("promoted")
    finally:
        accept(root, stored.run_id, by="test")  # later tests re-measure the real run
