"""Durable trials through the real console script, real llama-server and a real Prefect
(ephemeral) server: an optimizer killed with SIGKILL mid-run is resumed without re-running a
completed trial and without leaving its engine behind; engines killed mid-trial, ten trials in
a row, give failed attempts with their diagnoses, each started afresh, and the run completes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infopt.engines import registry

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

INFOPT = str(Path(sys.executable).with_name("infopt"))
TARGET = """
name: durability
workload: {{name: durability, input_lengths: {{kind: fixed, tokens: 32}},
           output_lengths: {{kind: fixed, tokens: {out}}}, measured_requests: {requests}}}
objective: throughput
scenarios: []
quality_task_items: 0
# The gate's smallest prompt budget: the reference and its scores stay the size the full-disk
# test's 320 KiB tmpfs was sized for (32 prompts write ~4x as much before the first trial).
quality_max_prompts: 8
budgets: {{repeats: {repeats}{budgets}}}
dimensions: [scheduling]  # one active user: one slot already serves it, nothing to climb
engines: [llamacpp]  # the bundled model's HF copy would bring vLLM as comparator
github_search: false
"""


def _env(prefect_server: dict[str, str]) -> dict[str, str]:
    """The session's real Prefect server (tests/integration/conftest.py): each optimizer
    process would otherwise start an ephemeral one of its own (~20 s each)."""
    return {**prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"}


def _target(tmp_path: Path, out: int = 8, requests: int = 2, repeats: int = 2,
            budgets: str = "") -> Path:
    p = tmp_path / "target.yaml"
    p.write_text(TARGET.format(out=out, requests=requests, repeats=repeats, budgets=budgets))
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


KILLS = 10


def _first_attempts_at_work(run_dir: Path) -> list[Path]:
    """Trial folders of first attempts (no `-retryN`) whose engine is serving requests."""
    return [log.parent for log in sorted(run_dir.glob("trials/t*/engine.log"))
            if "-retry" not in log.parent.name and not log.parent.name.startswith("t-")
            and any(w in log.read_text(errors="replace")
                    for w in ("launch_slot", "slot update_slots"))]


def _logging_to(pgid: int, trial: Path) -> bool:
    """Whether the engine `pgid` writes its output into the trial folder `trial`."""
    try:
        return os.readlink(f"/proc/{pgid}/fd/1").startswith(str(trial) + os.sep)
    except OSError:
        return False


def _kill_first_attempts(owner: subprocess.Popen, runs: Path, kills: int) -> list[str]:
    """SIGKILL the engine of each trial's first attempt once it serves, `kills` trials in a
    row, as an operator or the OOM killer would; returns the trial folders hit. Only that
    trial's own engine is killed: on a fast machine a trial of 4 short requests can end
    between the look at its log and the kill, and the next trial's start is not the fault
    planted here."""
    run_dir = _wait(lambda: _run_dir(runs), 120, "the run folder")
    hit: list[str] = []
    deadline = time.monotonic() + 600
    while len(hit) < kills and owner.poll() is None and time.monotonic() < deadline:
        for trial in (d for d in _first_attempts_at_work(run_dir) if d.name not in hit):
            ours = [g for g in _engines_of(owner.pid) if _logging_to(g, trial)]
            for pgid in ours:
                os.killpg(pgid, signal.SIGKILL)
            if ours:
                hit.append(trial.name)
                break
        time.sleep(0.1)
    return hit


def test_engine_killed_ten_times_in_one_run_each_failure_diagnosed_none_lost(llama_server,
                                                                            prefect_server,
                                                                            tmp_path):
    """Ten trials in a row lose their engine to SIGKILL while measuring: each killed attempt
    is kept with its diagnosis, started afresh (budgets.retries), and the run completes."""
    runs, env = tmp_path / "runs", _env(prefect_server)
    # Five rounds of the control and the baseline: ten trials (then the decision's rounds).
    # Each first attempt is hit at its first request (the killer watches for it), so short
    # outputs keep the retries cheap. No engine kept up between trials (budgets.engines_up 0):
    # each trial's engine writes its own log, which the killer reads.
    # Its output goes to a file: a pipe nobody reads while the test kills would fill and
    # stall the optimizer.
    with (tmp_path / "stderr.txt").open("w") as errf:
        proc = subprocess.Popen([INFOPT, "optimize", "--target",
                                 str(_target(tmp_path, out=16, requests=4, repeats=KILLS // 2,
                                             budgets=", engines_up: 0")),
                                 "--runs-dir", str(runs)], env=env, stdout=subprocess.DEVNULL,
                                stderr=errf, text=True)
        try:
            hit = _kill_first_attempts(proc, runs, KILLS)
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = (tmp_path / "stderr.txt").read_text()
    assert len(hit) == KILLS, (f"only {len(hit)} engines were hit before the run ended "
                               f"(exit {proc.returncode}):\n{err[-3000:]}")
    assert proc.returncode == 0, err[-2000:]
    run_dir = _run_dir(runs)
    report = json.loads((run_dir / "report.json").read_text())
    trials = report["trials"]
    killed = [t for t in trials if t["killed_by_signal"] is not None]
    # A kill may land just as a trial finishes and hit the next one's engine instead, so
    # count kills, not which trial took them.
    assert len(killed) == KILLS
    for t in killed:
        assert t["killed_by_signal"] == 9 and t["objective_value"] is None
        assert "killed by signal 9 during the trial" in t["failed"]
        assert "last log lines" in t["failed"] and t["diagnosis"] is not None
        assert (run_dir / "trials" / t["key"] / "trial.json").is_file()
    # Every logical trial ended measured: the start's five rounds of the control and the
    # baseline (the decision's rounds after them are not counted here).
    final = [t for t in trials if t["killed_by_signal"] is None]
    start = [t for t in final if t["dimension"] != "decision" and t["role"] != "tuning"][:10]
    assert sorted(t["role"] for t in start) == ["baseline"] * 5 + ["control"] * 5
    assert all(t["objective_value"] is not None for t in final)
    assert all((run_dir / "trials" / t["key"] / "trial.json").is_file() for t in trials)
    assert (run_dir / "report.md").is_file()
    assert not any(_alive(pid) for pid in _engines_of(proc.pid))


@pytest.fixture(autouse=True)
def _no_stray_engines():
    yield
    registry.reap_stale()  # whatever a failed assertion above left behind



def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip()}): needs root and "
                    "CAP_SYS_ADMIN")


def _complete_files(run_dir: Path) -> None:
    """Every trial and report file there parses; no temporary file is left behind."""
    assert not list(run_dir.rglob("*.tmp")), list(run_dir.rglob("*.tmp"))
    for p in run_dir.rglob("*.json"):
        json.loads(p.read_text())
    for p in run_dir.rglob("*.jsonl"):
        for line in p.read_text().splitlines():
            json.loads(line)


def test_a_full_disk_is_one_paragraph_no_file_is_corrupt_and_the_run_resumes(llama_server,
                                                                            prefect_server,
                                                                            tmp_path):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "320k")
    try:
        runs, env = disk / "runs", _env(prefect_server)
        full = subprocess.run([INFOPT, "optimize", "--target", str(_target(tmp_path, repeats=2)),
                               "--runs-dir", str(runs)], env=env, capture_output=True,
                              text=True, timeout=600)
        assert full.returncode == 2, full.stderr[-3000:]
        assert "Traceback" not in full.stderr
        said = [line for line in full.stderr.splitlines() if line.startswith("infopt: ")]
        assert len(said) == 1 and "cannot write" in said[0] and "No space left" in said[0]
        run_dir = _run_dir(runs)
        _complete_files(run_dir)
        assert not (run_dir / "report.json").exists()
        done = {p.parent.name: p.read_text() for p in run_dir.glob("trials/*/trial.json")}
        launches_before = _launches(run_dir)
        # Room again: the run resumes where the disk stopped it.
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        resumed = subprocess.run([INFOPT, "optimize", "--resume", run_dir.name, "--runs-dir",
                                  str(runs)], env=env, capture_output=True, text=True,
                                 timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        _complete_files(run_dir)
        trials = json.loads((run_dir / "report.json").read_text())["trials"]
        for key, text in done.items():
            assert (run_dir / "trials" / key / "trial.json").read_text() == text
        assert _launches(run_dir) - launches_before == len(trials) - len(done)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_the_prefect_api_restarting_mid_run_loses_nothing(llama_server, tmp_path):
    """A real `prefect server` of the test's own, stopped while a trial measures and started
    again on the same port and database: the run survives or resumes; nothing is lost."""
    from infopt.engines.process import free_port
    from tests import prefectserver

    home, port = tmp_path / "prefect-home", free_port()
    home.mkdir()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_LOGGING_LEVEL": "WARNING"}
    server = prefectserver.start(home, port, env)
    runs = tmp_path / "runs"
    try:
        with (tmp_path / "stderr.txt").open("w") as errf:
            proc = subprocess.Popen([INFOPT, "optimize", "--target",
                                     str(_target(tmp_path, out=32, requests=4, repeats=1)),
                                     "--runs-dir", str(runs)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=errf)
            try:
                run_dir = _wait(lambda: _run_dir(runs), 120, "the run folder")
                _wait(lambda: list(run_dir.glob("trials/*/trial.json")), 300, "a first trial")
                prefectserver.stop(server)
                time.sleep(5)  # the API is down while the next trial starts and measures
                server = prefectserver.start(home, port, env)
                proc.wait(timeout=600)
            finally:
                if proc.poll() is None:
                    proc.kill()
        survived = proc.returncode == 0
        if not survived:  # it may end; then it must resume with nothing lost
            done = {p.parent.name: p.read_text() for p in run_dir.glob("trials/*/trial.json")}
            before = _launches(run_dir)
            resumed = subprocess.run([INFOPT, "optimize", "--resume", run_dir.name,
                                      "--runs-dir", str(runs)], env=env, capture_output=True,
                                     text=True, timeout=600)
            assert resumed.returncode == 0, resumed.stderr[-2000:]
            for key, text in done.items():
                assert (run_dir / "trials" / key / "trial.json").read_text() == text
            trials = json.loads((run_dir / "report.json").read_text())["trials"]
            assert _launches(run_dir) - before == len(trials) - len(done)
        trials = json.loads((run_dir / "report.json").read_text())["trials"]
        assert sorted(t["role"] for t in trials) == ["baseline", "control"]
        assert all(t["objective_value"] is not None for t in trials)
        print(f"prefect API restart: the run {'survived' if survived else 'resumed'}; "
              f"stderr: {(tmp_path / 'stderr.txt').read_text()[-600:]}")
    finally:
        prefectserver.stop(server)


def test_a_hung_engine_fails_its_trial_with_the_reason_and_is_ended(llama_server,
                                                                    prefect_server, tmp_path):
    """SIGSTOP the control's engine while it measures: the request in flight gets nothing for
    budgets.stall_timeout_s, the rest of the phase is not sent, the trial fails saying so, the
    engine is ended, and the run goes on to the baseline."""
    runs, env = tmp_path / "runs", {**_env(prefect_server), "PREFECT_LOGGING_LEVEL": "INFO"}
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as errf:
        proc = subprocess.Popen([INFOPT, "optimize", "--target",
                                 str(_target(tmp_path, out=64, requests=8, repeats=1,
                                             budgets=", stall_timeout_s: 5")),
                                 "--runs-dir", str(runs)], env=env,
                                stdout=subprocess.DEVNULL, stderr=errf)
        try:
            # A quarter of the control's measured requests done: it is mid-measurement.
            _wait(lambda: re.search(r"t00-control-r1-\w+: durability: 2/8 requests done",
                                    err_path.read_text(errors="replace")), 300,
                  "the control's measurement")
            pgid = _wait(lambda: next(iter(_engines_of(proc.pid)), None), 30, "its engine")
            os.killpg(pgid, signal.SIGSTOP)
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err_path.read_text()[-2000:]
    assert not _alive(pgid)  # ended, not left stopped
    run_dir = _run_dir(runs)
    trials = json.loads((run_dir / "report.json").read_text())["trials"]
    control, baseline = trials
    assert control["objective_value"] is None and control["killed_by_signal"] is None
    assert "the engine stopped answering" in control["failed"]
    assert "stopped (SIGSTOP or a debugger)" in control["failed"]
    assert "got nothing for 5 s (budgets.stall_timeout_s)" in control["failed"]
    records = [json.loads(line) for line in
               (run_dir / "trials" / control["key"] / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 8  # every planned request has its record: none lost
    errors = [r["error"] or "" for r in records if not r["ok"]]
    assert any("Timeout" in e for e in errors) and any(e.startswith("NotSent") for e in errors)
    assert baseline["objective_value"] is not None  # the run went on
