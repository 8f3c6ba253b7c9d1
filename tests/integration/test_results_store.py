"""Results stores for real: an S3-compatible server on loopback (moto in server mode, spoken to
over HTTP by s3fs) and a local path. Trials and a report are written through the store, the
run folder is deleted (the pod's disk went away), and a fresh runs root pulled from the store
gives back the same trials and report. The ResultsStore block is registered with, saved to and
loaded by name from the session's real Prefect server."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from infopt.runs.rundir import (
    atomic_write,
    attach_store,
    detach_store,
    load_trial,
    write_report,
    write_trial,
)
from infopt.runs.store import RunStore, StoreError
from infopt.specs.results import Trial

ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "20260102-030405-beef"
BUCKET = "infopt-runs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_endpoint(monkeypatch):
    """A moto S3 server on 127.0.0.1 with one bucket; fake credentials for this test only."""
    from moto.server import ThreadedMotoServer

    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    import fsspec

    fsspec.filesystem("s3", endpoint_url=endpoint, skip_instance_cache=True).mkdir(BUCKET)
    yield endpoint
    httpx.post(f"{endpoint}/moto-api/reset")  # moto's state is per process, not per server
    server.stop()


@pytest.fixture
def store(request, tmp_path) -> RunStore:
    """The store under test: S3 through the block (credentials from the environment), or a
    local folder."""
    if request.param == "local":
        return RunStore(str(tmp_path / "store"))
    from blocks import ResultsStore

    endpoint = request.getfixturevalue("s3_endpoint")
    return ResultsStore(url=f"s3://{BUCKET}/team/infopt",
                        storage_options={"endpoint_url": endpoint}).run_store()


def _trials() -> dict[str, Trial]:
    from infopt.specs.serving import LlamaCppConfig

    cfg = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192)
    out = {}
    for i, (slots, value) in enumerate(((1, 41.25), (2, 77.5), (4, None))):
        trial = Trial(trial_id=f"t{i}", role="tuning", dimension="scheduling", value=str(slots),
                      repeat=1, config=cfg.model_copy(update={"parallel_slots": slots}),
                      engine=None, benchmark=None, objective_value=value,
                      failed=None if value else "engine exited: out of memory")
        out[f"t{i}-{slots:04x}c0ffee"] = trial
    return out


def _report():
    from infopt.model.classify import classify_config
    from infopt.specs.hardware import HardwareInventory, HostInfo
    from infopt.specs.model import ModelFormat, ModelProfile
    from infopt.specs.results import NoFitReport
    from infopt.specs.workload import fixed_levels
    from tests.fixture_data import MODEL_CONFIGS

    cfg = json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text())
    hw = HardwareInventory(host=HostInfo(
        cpu_model="c", architecture="x86_64", logical_cpus=2, physical_cores=2, usable_cpus=2,
        cgroup_cpu_limit=None, isa_features=[], ram_total_bytes=2**30,
        ram_available_bytes=2**30, os="Linux", kernel="6"), gpus=[], gpu_probe="none")
    model = ModelProfile(path="/m", format=ModelFormat.HF, file_bytes=16 * 2**30,
                         inspection=classify_config(cfg, model="q"), source="test")
    return NoFitReport(run_id=RUN_ID, created_at="2026-01-02T03:04:05+0000", hardware=hw,
                       model=model, workload=fixed_levels(input_tokens=128, output_tokens=64,
                                                          levels=[1], target=1, requests=4),
                       engines=[], binding="weights 16 GiB > memory 1 GiB")


def _write_run(run_dir: Path, store: RunStore) -> tuple[dict[str, Trial], object]:
    """A run as the flow writes it, with the store attached."""
    attach_store(run_dir, store)
    try:
        atomic_write(run_dir / "request.json", '{"model": {"path": "/m"}}')
        trials = _trials()
        for key, trial in trials.items():
            write_trial(run_dir, key, trial)
        (run_dir / "quality").mkdir()
        atomic_write(run_dir / "quality" / "verdict.json", '{"passed": true}')
        report = _report()
        write_report(run_dir, report, "# no fit\n")
    finally:
        detach_store(run_dir)
    return trials, report


@pytest.mark.parametrize("store", ["s3", "local"], indirect=True)
def test_a_run_written_through_the_store_is_restored_on_a_fresh_disk(store, tmp_path):
    pod_a = tmp_path / "pod-a" / "runs"
    trials, report = _write_run(pod_a / RUN_ID, store)
    shutil.rmtree(tmp_path / "pod-a")  # the pod's disk goes away

    assert store.runs() == [RUN_ID]
    pod_b = tmp_path / "pod-b" / "runs"
    restored = store.pull(RUN_ID, pod_b)
    run_dir = pod_b / RUN_ID
    assert sorted(p.relative_to(run_dir).as_posix() for p in restored) == sorted(
        ["request.json", "quality/verdict.json", "report.json", "report.md",
         *[f"trials/{k}/trial.json" for k in trials]])
    for key, trial in trials.items():
        assert load_trial(run_dir, key) == trial  # a resume loads it instead of re-running it
    assert json.loads((run_dir / "report.json").read_text()) == report.model_dump(mode="json")
    assert (run_dir / "report.md").read_text() == "# no fit\n"
    assert not [p for p in run_dir.rglob("*") if "tmp" in p.name]  # only whole files

    # Pulling again keeps what is here (as new as the store's); overwrite restores it.
    (run_dir / "report.md").write_text("# edited here\n")
    assert store.pull(RUN_ID, pod_b) == []
    assert store.pull(RUN_ID, pod_b, overwrite=True) and \
        (run_dir / "report.md").read_text() == "# no fit\n"
    assert store.pull("20990101-000000-none", pod_b) == []  # a run the store never had


def test_a_local_store_leaves_no_partial_file_when_a_write_fails(tmp_path, monkeypatch):
    store, run_dir = RunStore(str(tmp_path / "store")), tmp_path / "runs" / RUN_ID
    key, trial = next(iter(_trials().items()))
    attach_store(run_dir, store)
    try:
        write_trial(run_dir, key, trial)
        stored = tmp_path / "store" / RUN_ID / "trials" / key / "trial.json"
        assert Trial.model_validate_json(stored.read_text()) == trial
        # The rename never happens: the old object stays whole, no temporary is left behind.
        def full(*_):
            raise OSError("disk full")

        monkeypatch.setattr("infopt.runs.store.os", SimpleNamespace(replace=full))
        with pytest.raises(StoreError, match=f"results store {tmp_path / 'store'}: could not "
                                             f"write {RUN_ID}/trials/{key}/trial.json.*disk full"):
            write_trial(run_dir, key, trial.model_copy(update={"objective_value": 1.0}))
    finally:
        detach_store(run_dir)
    assert Trial.model_validate_json(stored.read_text()) == trial
    assert [p.name for p in stored.parent.iterdir()] == ["trial.json"]


def test_put_mirrors_a_run_made_before_a_store_was_attached(tmp_path):
    run_dir = tmp_path / "runs" / RUN_ID
    trials = _trials()
    for key, trial in trials.items():
        write_trial(run_dir, key, trial)  # no store attached: local only
    (run_dir / "report.md.tmp").write_text("half")  # an interrupted atomic write
    store = RunStore(f"file://{tmp_path / 'store'}")
    assert not store.runs()
    assert len(store.put(run_dir)) == len(trials)
    store.pull(RUN_ID, tmp_path / "other")
    assert {k: load_trial(tmp_path / "other" / RUN_ID, k) for k in trials} == trials
    assert not (tmp_path / "other" / RUN_ID / "report.md.tmp").exists()


def test_a_missing_bucket_fails_the_write_and_names_the_store(s3_endpoint, tmp_path):
    store = RunStore("s3://no-such-bucket/runs", {"endpoint_url": s3_endpoint})
    run_dir = tmp_path / "runs" / RUN_ID
    key, trial = next(iter(_trials().items()))
    attach_store(run_dir, store)
    try:
        with pytest.raises(StoreError, match=r"results store s3://no-such-bucket/runs: could "
                                             r"not write .*trial\.json.*bucket must exist"):
            write_trial(run_dir, key, trial)
    finally:
        detach_store(run_dir)
    assert load_trial(run_dir, key) == trial  # the local copy is whole; only the mirror failed
    with pytest.raises(StoreError, match=f"s3://no-such-bucket/runs: could not list run {RUN_ID}"):
        store.pull(RUN_ID, tmp_path / "elsewhere")


def test_a_server_that_is_down_is_a_clear_error_naming_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    endpoint = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    # One attempt: botocore and s3fs would otherwise retry for ~10 s before giving up.
    store = RunStore(f"s3://{BUCKET}/runs", {"endpoint_url": endpoint, "config_kwargs": {
        "retries": {"max_attempts": 1}}}, {"key": "testing", "secret": "do-not-print-me"})
    with pytest.raises(StoreError, match=f"results store s3://{BUCKET}/runs: could not list "
                                         f"run {RUN_ID}: EndpointConnectionError") as err:
        store.pull(RUN_ID, tmp_path)
    assert "do-not-print-me" not in str(err.value)


def test_the_block_is_registered_saved_and_loaded_by_name_on_the_server(
        prefect_server, s3_endpoint, tmp_path):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from blocks import ResultsStore
    from blocks.named import open_results_store
    from infopt.specs.base import InputError

    # The documented registration command, against the real server.
    out = subprocess.run([str(Path(sys.executable).with_name("prefect")), "block", "register",
                          "-m", "blocks"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**prefect_server, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for name in ("infopt credentials", "infopt engine runtime", "infopt cluster target",
                 "infopt results store"):
        assert name in out.stdout, out.stdout

    # A pod writes part of a run through a store, then its disk goes away.
    url = f"s3://{BUCKET}/by-name"
    store = RunStore(url, {"endpoint_url": s3_endpoint})
    trials, _ = _write_run(tmp_path / "pod-a" / RUN_ID, store)
    shutil.rmtree(tmp_path / "pod-a")

    with temporary_settings({PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        # Credentials travel in the block (encrypted on the server), not the environment.
        ResultsStore(url=url, storage_options={"endpoint_url": s3_endpoint}, key="testing",
                     secret="testing").save("test-runs", overwrite=True)
        assert ResultsStore.load("test-runs").secret.get_secret_value() == "testing"
        with pytest.raises(InputError, match="no ResultsStore block named 'nope'.*prefect "
                                             "block register -m blocks"):
            open_results_store("nope", tmp_path / "pod-b" / RUN_ID)
        run_dir = tmp_path / "pod-b" / RUN_ID
        opened = open_results_store("test-runs", run_dir)  # what the optimize flow calls
    try:
        assert opened is not None and opened.url == url
        for key, trial in trials.items():  # restored: the resumed run will not re-run them
            assert load_trial(run_dir, key) == trial
        assert json.loads((run_dir / "store.json").read_text()) == {
            "url": url, "storage_options": {"endpoint_url": s3_endpoint}}
        # Attached: the resumed run's next trial reaches the store too.
        key, trial = "t9-0008c0ffee", next(iter(trials.values()))
        write_trial(run_dir, key, trial)
    finally:
        detach_store(run_dir)
    assert opened.pull(RUN_ID, tmp_path / "pod-c")
    assert load_trial(tmp_path / "pod-c" / RUN_ID, key) == trial
