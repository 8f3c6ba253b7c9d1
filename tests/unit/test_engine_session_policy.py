"""The engine session in the domain (infopt.engines.session): every engine infopt starts (trials,
the quality reference, the winner, cluster replicas, the benches) goes through it, so each gets
the same transient retries, issue-first diagnosis and contract-preserving remedy. The process
control is a stand-in here that records the configurations it was asked to start; the session's
policy is what is tested, on a real engine log from the known-failure catalog."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import infopt.engines.session as session_mod
from infopt.cluster.fleet import replicas
from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.session import StartFailed, Troubleshooting, engine_session
from infopt.specs.base import EngineStartError, PortTaken, ReadinessTimeout
from infopt.specs.results import RunningEngine
from infopt.specs.serving import with_knob
from tests.fixture_data import FIXTURES

T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
# A quantized V cache without flash attention: llama.cpp refuses to start, and the catalog's
# contract-preserving remedy turns flash attention on.
REFUSED = with_knob(with_knob(llamacpp.baseline_config(T), "cache_type_v", "q8_0"),
                    "flash_attn", "off")
LOG = (FIXTURES / "engine_logs" / "llamacpp_v_cache_quant_requires_flash_attn.log").read_text()


@pytest.fixture
def engine(monkeypatch):
    """A process control that refuses what llama.cpp refuses (writing llama.cpp's own log
    lines) and otherwise starts; `failures` queues transient errors for the next starts."""
    calls: list = []
    stopped: list[int] = []
    failures: list[type[EngineStartError]] = []

    def start(adapter, config, executable, log_path, weights_bytes, exposure=None):
        calls.append(config)
        if failures:
            raise failures.pop(0)("transient", str(log_path))
        if config.cache_type_v == "q8_0" and config.flash_attn == "off":
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(log_path).write_text(LOG)
            raise EngineStartError("llama-server exited with status 1", str(log_path))
        return RunningEngine(engine="llamacpp", pid=5000 + len(calls), base_url="http://x",
                             port=1, argv=[], env_overrides={}, command="", version="v",
                             log_path=str(log_path), startup_s=0.1)

    monkeypatch.setattr(session_mod.process, "start", start)
    monkeypatch.setattr(session_mod.process, "stop", lambda pid: stopped.append(pid))
    monkeypatch.setattr(session_mod, "RETRY_DELAY_S", 0.0)
    return calls, stopped, failures


def test_a_refused_start_is_diagnosed_remedied_and_started_once_more(engine, tmp_path):
    calls, stopped, _ = engine
    with engine_session(REFUSED, tmp_path / "e.log", 10**8, executable="llama-server") as s:
        assert s.remedy is not None and s.remedy.knob_changes == {"flash_attn": "on"}
        assert s.config.flash_attn == "on" and s.diagnosis.category.value == "bad_argument"
        assert s.running.log_path.endswith("e.remedied.log")
    assert [c.flash_attn for c in calls] == ["off", "on"]
    assert stopped == [s.running.pid]


def test_transient_failures_are_tried_again_then_diagnosed(engine, tmp_path, caplog):
    calls, stopped, failures = engine
    ok = with_knob(REFUSED, "flash_attn", "on")
    failures[:] = [PortTaken, ReadinessTimeout]
    with caplog.at_level(logging.WARNING), \
            engine_session(ok, tmp_path / "e.log", 10**8, executable="x") as s:
        assert s.remedy is None and len(calls) == 3  # two transient failures, then up
    assert caplog.text.count("start failed transiently") == 2
    failures[:] = [ReadinessTimeout] * 3  # one too many: diagnosed, no remedy in the log
    (tmp_path / "f.log").write_text("nothing known here\n")
    with pytest.raises(StartFailed) as info:
        with engine_session(ok, tmp_path / "f.log", 10**8, executable="x"):
            pass
    assert info.value.remedy is None and len(calls) == 6


def test_every_cluster_replica_is_a_session_with_diagnosis_and_remedy(engine, tmp_path):
    """fleet.replicas once started replicas itself (no diagnosis, no remedy): now each replica
    that llama.cpp refuses is remedied, and all are stopped after, a failure included."""
    calls, stopped, _ = engine
    with replicas(REFUSED, 2, tmp_path, 10**8, "llama-server",
                  troubleshoot=Troubleshooting()) as running:
        assert len(running) == 2 and all(r.log_path.endswith(".remedied.log") for r in running)
    assert [c.flash_attn for c in calls] == ["off", "on", "off", "on"]
    assert sorted(stopped) == sorted(r.pid for r in running)
    assert all(c.port is None for c in calls)  # each on its own free port


def test_a_search_reads_its_token_only_when_it_runs(monkeypatch):
    """The settings travel as data (a fan-out worker gets them as JSON): the token is read by
    the named function at search time, never held."""
    seen: list = []
    monkeypatch.setattr(session_mod, "env_github_token", lambda: "from-env")
    assert Troubleshooting(search=False, token_source="os:getenv").token() is None
    assert Troubleshooting(search=True).token() == "from-env"
    monkeypatch.setattr("os.getenv", lambda name: seen.append(name) or "from-block")
    ts = Troubleshooting(search=True, credentials_block="creds", token_source="os:getenv")
    assert ts.token() == "from-block" and seen == ["creds"]
    assert "from-block" not in repr(ts)
