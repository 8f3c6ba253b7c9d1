"""The engine pool (infopt.engines.session.EnginePool): paired windows alternate between engines kept up.
The engine sessions are stand-ins that record starts and stops; the pool's policy is what is
tested: reuse while alive, at most `capacity` up, the least recently used stopped for room, a
dead or discarded engine started afresh, everything stopped on close."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

import infopt.engines.session as engine_mod
from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.session import EnginePool, Started
from infopt.specs.results import RunningEngine
from infopt.specs.serving import with_knob

T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
A = llamacpp.baseline_config(T)
B = with_knob(A, "parallel_slots", 4)
C = with_knob(A, "parallel_slots", 2)


@pytest.fixture
def events(monkeypatch):
    log, dead = [], set()

    @contextmanager
    def session(config, log_path, weights_bytes, *, troubleshoot=None, exposure=None, **_):
        pid = 1000 + len(log)
        log.append(("start", config.parallel_slots, pid))
        running = RunningEngine(engine="llamacpp", pid=pid, base_url="http://127.0.0.1:1",
                                port=1, argv=[], env_overrides={}, command="", version="x",
                                log_path=str(log_path), startup_s=0.1)
        try:
            yield Started(running, config)
        finally:
            log.append(("stop", config.parallel_slots, pid))

    monkeypatch.setattr(engine_mod, "engine_session", session)
    monkeypatch.setattr(engine_mod.process, "exit_status",
                        lambda pid: -9 if pid in dead else None)
    return log, dead


def _use(pool: EnginePool, config, fits: bool = True) -> int:
    with pool.session(config, "/tmp/x.log", 1, fits_beside=fits) as started:
        return started.running.pid


def test_alternating_windows_reuse_the_two_engines_up(events):
    log, _ = events
    pool = EnginePool(2)
    pids = [_use(pool, c) for c in (B, A, A, B, B, A)]
    assert len(set(pids)) == 2 and [e[0] for e in log] == ["start", "start"]
    pool.close()
    assert sorted(e[1] for e in log if e[0] == "stop") == [1, 4]


def test_a_third_configuration_stops_the_least_recently_used(events):
    log, _ = events
    pool = EnginePool(2)
    _use(pool, A), _use(pool, B), _use(pool, A), _use(pool, C)
    assert ("stop", 4, 1001) in log and not any(e[0] == "stop" and e[1] == 1 for e in log)


def test_one_at_a_time_on_a_gpu_host_or_when_memory_is_short(events):
    log, _ = events
    gpu = EnginePool(1)
    _use(gpu, A), _use(gpu, B), _use(gpu, A)
    assert [e[0] for e in log] == ["start", "stop", "start", "stop", "start"]
    log.clear()
    cpu = EnginePool(2)
    _use(cpu, A), _use(cpu, B, fits=False)
    assert [e[0] for e in log] == ["start", "stop", "start"]


def test_a_dead_or_discarded_engine_is_started_afresh(events):
    log, dead = events
    pool = EnginePool(2)
    first = _use(pool, A)
    dead.add(first)
    assert _use(pool, A) != first and ("stop", 1, first) in log
    again = _use(pool, A)
    pool.discard(A)
    assert _use(pool, A) != again
