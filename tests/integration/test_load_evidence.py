"""What a trial's engine logged of its load and kernels (infopt.runs.load_evidence): read from
its own startup log where the engine prints them at its defaults (vLLM, recorded), and, for
llama.cpp (its load lines are TRACE, printed from -lv 4), from one load-only start per
configuration on the real llama-server, kept and reused by every later trial of it."""

from __future__ import annotations

import pytest

from infopt.engines.session import CATALOG_ONLY
from infopt.runs import load_evidence
from infopt.runs.load_evidence import LoadLog, kernel_check, load_start, needs_load_start, own_log
from infopt.specs.serving import LlamaCppConfig, VllmConfig
from tests.fixture_data import FIXTURES

LOCAL_LOGS = FIXTURES / "local_logs"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_which_engines_need_a_load_start_and_where():
    llama = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=2048)
    assert needs_load_start(llama, gpu_host=True)
    assert not needs_load_start(llama, gpu_host=False)  # the winner's own start reads a CPU's
    assert not needs_load_start(VllmConfig(model_path="/m", max_model_len=2048), gpu_host=True)  # logs at INFO


def test_vllm_kernels_come_from_the_trials_own_log(tmp_path):
    log = tmp_path / "trials" / "k1" / "engine.log"
    log.parent.mkdir(parents=True)
    log.write_text((LOCAL_LOGS / "vllm032_cpu_eager_startup.log").read_text())
    k = kernel_check(VllmConfig(model_path="/m", max_model_len=2048), own_log(str(log), tmp_path))
    assert k is not None and k.log == "trials/k1/engine.log"
    assert k.how == "the trial engine's own startup log"
    assert {ln.aspect for ln in k.lines} >= {"compilation", "KV cache"}


def test_a_llamacpp_trials_own_log_is_not_taken_for_its_kernels(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("main: server is listening on http://127.0.0.1:8080\n")
    k = kernel_check(LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=2048), own_log(str(log), tmp_path))
    assert k is not None and k.log is None and "log_verbosity=4" in k.how


def test_one_load_start_per_configuration_read_and_reused(gguf_model, tmp_path, monkeypatch):
    cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=512, threads=1)
    got = load_start(cfg, tmp_path, gguf_model.stat().st_size, None, True, CATALOG_ONLY)
    assert isinstance(got, LoadLog) and got.with_knobs and got.log.startswith("trials/load-")
    text = (tmp_path / got.log).read_text()
    assert " -lv 4" in text.splitlines()[0]  # the load start, not a measured trial
    k = kernel_check(cfg, got)
    aspects = {ln.aspect for ln in k.lines}
    assert {"CPU backend", "weights buffer", "KV cache"} <= aspects, aspects
    assert k.how.startswith("one load-only start of this configuration with log_verbosity=4")

    def no_start(*a, **kw):
        raise AssertionError("started again")

    monkeypatch.setattr(load_evidence, "engine_session", no_start)
    again = load_start(cfg, tmp_path, gguf_model.stat().st_size, None, True, CATALOG_ONLY)
    assert isinstance(again, LoadLog) and again.log == got.log  # kept: not started again
    with pytest.raises(AssertionError, match="started again"):  # another configuration
        load_start(cfg.model_copy(update={"ctx_per_slot_tokens": 1024}), tmp_path,
                   gguf_model.stat().st_size, None, True, CATALOG_ONLY)
