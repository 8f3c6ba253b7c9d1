"""Durable trials through the real console script, real llama-server and a real Prefect
(ephemeral) server: an optimizer killed with SIGKILL mid-run is resumed without re-running a
completed trial and without leaving its engine behind; an engine killed mid-trial gives a
failed trial with its diagnosis, and the run still writes its report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infopt.engines import registry

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

INFOPT = str(Path(sys.executable).with_name("infopt"))
TARGET = """
name: durability
workload: {{name: durability, input_lengths: {{kind: fixed, tokens: 32}},
           output_lengths: {{kind: fixed, tokens: {out}}}, measured_requests: {requests}}}
objective: throughput
scenarios: []
quality_task_items: 0
budgets: {{repeats: {repeats}}}
dimensions: [scheduling]  # one active user: one slot already serves it, nothing to climb
engines: [llamacpp]  # the bundled model's HF copy would bring vLLM as comparator
github_search: false
"""


def _env(prefect_server: dict[str, str]) -> dict[str, str]:
    """The session's real Prefect server (tests/integration/conftest.py): each optimizer
    process would otherwise start an ephemeral one of its own (~20 s each)."""
    return {**prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"}


def _target(tmp_path: Path, out: int = 8, requests: int = 2, repeats: int = 2) -> Path:
    p = tmp_path / "target.yaml"
    p.write_text(TARGET.format(out=out, requests=requests, repeats=repeats))
    return p


def _wait(cond, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _run_dir(runs: Path) -> Path | None:
    dirs = [d for d in runs.iterdir() if d.is_dir()] if runs.exists() else []
    return dirs[0] if len(dirs) == 1 else None


def _launches(run_dir: Path) -> int:
    """Trial engine starts so far: every start writes its command line first ("$ ..."). The
    folders named t-* are the winner's own starts (scenarios, the kernel-path log), not trials."""
    return sum(line.startswith("$ ") for log in run_dir.glob("trials/*/engine*.log")
               if not log.parent.name.startswith("t-")
               for line in log.read_text(errors="replace").splitlines())


def _engines_of(owner_pid: int) -> list[int]:
    """Process groups of the engines the optimizer `owner_pid` recorded as started."""
    return [e["pgid"] for e in (json.loads(p.read_text())
                                for p in registry.registry_dir().glob("*.json"))
            if e["owner_pid"] == owner_pid]


def _alive(pid: int) -> bool:
    return registry.process_start_ticks(pid) is not None


def test_sigkilled_optimizer_resumes_without_rerunning_completed_trials(llama_server,
                                                                        prefect_server,
                                                                        tmp_path):
    runs, env = tmp_path / "runs", _env(prefect_server)
    proc = subprocess.Popen([INFOPT, "optimize", "--target",
                             str(_target(tmp_path, repeats=1)),
                             "--runs-dir", str(runs)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        run_dir = _wait(lambda: _run_dir(runs), 120, "the run folder")
        # One trial complete (its engine stopped and forgotten before trial.json is written)
        # and the next one's engine recorded as started: kill the optimizer mid-run.
        _wait(lambda: len(list(run_dir.glob("trials/*/trial.json"))) >= 1
              and _engines_of(proc.pid), 400, "a completed trial and a second engine start")
        # The optimizer's whole process group, as a killed terminal session would go, but
        # not the engine, which runs in a group of its own.
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done = {p.parent.name: p.read_text() for p in run_dir.glob("trials/*/trial.json")}
    launches_before = _launches(run_dir)
    orphans = [pid for pid in _engines_of(proc.pid) if _alive(pid)]
    assert orphans, "the SIGKILLed optimizer's engine should still be running here"

    resumed = subprocess.run([INFOPT, "optimize", "--resume", run_dir.name, "--runs-dir",
                              str(runs)], env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "left running by a killed optimizer" in resumed.stderr
    assert not any(_alive(pid) for pid in orphans)
    report = json.loads((run_dir / "report.json").read_text())
    trials = report["trials"]
    assert [t["role"] for t in trials] == ["control", "baseline"]
    for key, text in done.items():  # completed before the kill: reused untouched
        assert (run_dir / "trials" / key / "trial.json").read_text() == text
    # Launched after resuming: exactly the trials that had no trial.json when it was killed.
    assert _launches(run_dir) - launches_before == len(trials) - len(done)
    assert all((run_dir / "trials" / t["key"] / "trial.json").is_file() for t in trials)


def test_engine_killed_mid_trial_is_a_failed_trial_and_the_report_is_written(llama_server,
                                                                              prefect_server,
                                                                              tmp_path):
    runs, env = tmp_path / "runs", _env(prefect_server)
    # Long enough requests that the first trial is still measuring when its engine is killed.
    proc = subprocess.Popen([INFOPT, "optimize", "--target",
                             str(_target(tmp_path, out=128, requests=4, repeats=1)),
                             "--runs-dir",
                             str(runs)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        run_dir = _wait(lambda: _run_dir(runs), 120, "the run folder")
        log = _wait(lambda: next(iter(run_dir.glob("trials/t00-*/engine.log")), None), 300,
                    "the first trial's engine log")
        # Requests are flowing once the server logs a slot at work.
        _wait(lambda: "launch_slot" in log.read_text(errors="replace")
              or "slot update_slots" in log.read_text(errors="replace"), 120,
              "the first trial's requests")
        pgid = _wait(lambda: next(iter(_engines_of(proc.pid)), None), 30, "its engine pid")
        os.killpg(pgid, signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    report = json.loads((run_dir / "report.json").read_text())
    first = report["trials"][0]
    assert first["trial_id"].startswith("t00-control")
    assert first["objective_value"] is None
    assert "killed by signal 9 during the trial" in first["failed"]
    assert "last log lines" in first["failed"] and first["diagnosis"] is not None
    assert all(t["failed"] is None for t in report["trials"][1:])  # the run went on
    assert (run_dir / "trials" / first["key"] / "trial.json").is_file()
    assert (run_dir / "report.md").is_file()


@pytest.fixture(autouse=True)
def _no_stray_engines():
    yield
    registry.reap_stale()  # whatever a failed assertion above left behind

