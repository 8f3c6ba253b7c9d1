"""A killed engine is told from a live one even when its client sees the connection drop before
the process can be reaped (infopt.engines.process.exit_status's wait, used by
infopt.runs.trial_run): the CI race where a trial whose engine was SIGKILLed raised its
connection error as if the engine were alive, and ended the run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infopt.engines import process
from infopt.runs import trial_run
from infopt.specs.results import RunningEngine


@pytest.fixture
def dying():
    """A process of ours that is killed by SIGKILL 0.5 s from now, as the OOM killer would."""
    proc = subprocess.Popen([sys.executable, "-c",
                             "import os, signal, time; time.sleep(0.5); "
                             "os.kill(os.getpid(), signal.SIGKILL)"])
    with process._LOCK:
        process._LIVE[proc.pid] = proc
    yield proc
    with process._LOCK:
        process._LIVE.pop(proc.pid, None)
    proc.kill()
    proc.wait()


def _running(pid: int) -> RunningEngine:
    return RunningEngine(engine="llamacpp", pid=pid, base_url="http://127.0.0.1:1", port=1,
                         argv=[], env_overrides={}, command="", version="x",
                         log_path="/dev/null", startup_s=0.1)


def test_a_dropped_connection_waits_for_the_engine_to_be_reaped(dying):
    assert process.exit_status(dying.pid) is None  # not yet gone: poll alone says alive
    why, signum = trial_run._died(_running(dying.pid), dropped=True)
    assert signum == 9 and "killed by signal 9" in why


def test_without_a_failed_request_the_engine_is_not_waited_for(dying):
    assert trial_run._died(_running(dying.pid), dropped=False) is None


def test_a_live_engine_is_alive_after_the_grace(monkeypatch):
    monkeypatch.setattr(trial_run, "DEATH_GRACE_S", 0.2)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    with process._LOCK:
        process._LIVE[proc.pid] = proc
    try:
        assert trial_run._died(_running(proc.pid), dropped=True) is None
    finally:
        with process._LOCK:
            process._LIVE.pop(proc.pid, None)
        proc.kill()
        proc.wait()


class _Scenario:
    def __init__(self, errors: dict[str, int]):
        self.errors_by_kind = errors


class _Bench:
    def __init__(self, *errors: dict[str, int]):
        self.scenarios = [_Scenario(e) for e in errors]


@pytest.mark.parametrize(("errors", "dropped"), [
    ({}, False), ({"http_4xx": 3}, False), ({"timeout": 1}, False),
    ({"connection": 1}, True), ({"bad_sse": 2}, True), ({"http_5xx": 1}, True),
])
def test_which_failures_a_dying_engine_gives(errors, dropped):
    assert trial_run._dropped(_Bench({}, errors)) is dropped
    assert trial_run._dropped(None) is False
