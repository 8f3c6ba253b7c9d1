"""Engines left by a SIGKILLed optimizer are ended by the next run; others are left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from infopt.engines import registry


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INFOPT_CACHE_DIR", str(tmp_path))


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)


def _wait_gone(pid: int) -> bool:
    for _ in range(50):
        if registry.process_start_ticks(pid) is None:
            return True
        time.sleep(0.1)
    return False


def test_an_engine_whose_optimizer_died_is_reaped():
    engine = _sleeper()
    # Its "optimizer": a process that records the engine and dies without stopping it.
    code = (f"import os; os.environ['INFOPT_CACHE_DIR'] = {os.environ['INFOPT_CACHE_DIR']!r}; "
            f"from infopt.engines import registry; registry.record({engine.pid}, 'sleep 60'); "
            "os.kill(os.getpid(), 9)")
    owner = subprocess.run([sys.executable, "-c", code])
    assert owner.returncode == -signal.SIGKILL
    reaped = registry.reap_stale()
    assert [e.pgid for e in reaped] == [engine.pid]
    assert engine.wait(timeout=10) == -signal.SIGKILL
    assert list(registry.registry_dir().glob("*.json")) == []


def test_a_live_optimizers_engine_is_left_alone():
    engine = _sleeper()
    try:
        registry.record(engine.pid, "sleep 60")  # owned by this (live) test process
        assert registry.reap_stale() == []
        assert engine.poll() is None
    finally:
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()
        registry.forget(engine.pid)


def test_a_recycled_engine_pid_is_not_killed():
    engine = _sleeper()
    try:
        path = registry.record(engine.pid, "sleep 60")
        # The owner's start time no longer matches (its pid was reused: the owner is gone), and
        # neither does the engine's: that pid now belongs to another process, which must live.
        data = json.loads(path.read_text())
        data.update(owner_start_ticks=-1, engine_start_ticks=-1)
        path.write_text(json.dumps(data))
        assert registry.reap_stale() == []
        assert engine.poll() is None and not path.exists()
    finally:
        os.killpg(engine.pid, signal.SIGKILL)
        engine.wait()
