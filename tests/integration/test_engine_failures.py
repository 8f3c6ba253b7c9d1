"""Real startup failures on real engines, diagnosed: the root error, its category, and (where
the catalog has one) a remedy that keeps the contract."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.base import EngineStartError
from infopt.specs.diagnosis import FailureCategory
from infopt.specs.serving import LlamaCppConfig
from infopt.troubleshoot.diagnose import contract_preserving_remedy, diagnose_file

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _llama_direct(server, args, log: Path, timeout=30) -> Path:
    """Run llama-server with raw args (bypassing infopt's own checks) until it exits."""
    with log.open("w") as fh:
        subprocess.run([str(server), *args], stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
    return log


def test_llamacpp_quantized_v_cache_without_flash_attn(llama_server, gguf_model, tmp_path):
    cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=2048, flash_attn="off",
                         cache_type_k="q8_0", cache_type_v="q8_0")
    with pytest.raises(EngineStartError) as exc:
        process.start(llamacpp.ADAPTER, cfg, str(llama_server), tmp_path / "e.log", 10**8)
    d = diagnose_file(exc.value.log_path, "llamacpp")
    assert "quantized V cache requires flash_attn" in d.root_error
    assert "exiting due to model loading error" not in d.root_error  # not the last line
    remedy = contract_preserving_remedy(d)
    assert remedy is not None and remedy.knob_changes.get("flash_attn") == "on"


def test_llamacpp_occupied_port(llama_server, gguf_model, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        log = _llama_direct(llama_server, ["-m", str(gguf_model), "--host", "127.0.0.1",
                                           "--port", str(port), "-c", "512"], tmp_path / "p.log")
    d = diagnose_file(str(log), "llamacpp")
    assert d.category is FailureCategory.PORT_IN_USE, d.root_error


def test_llamacpp_missing_model(llama_server, tmp_path):
    log = _llama_direct(llama_server, ["-m", str(tmp_path / "nope.gguf"), "--port", "1"],
                        tmp_path / "m.log")
    d = diagnose_file(str(log), "llamacpp")
    assert d.category in (FailureCategory.MODEL_NOT_FOUND, FailureCategory.NOT_A_MODEL), d
    assert "nope.gguf" in d.root_error or "failed" in d.root_error.lower()


def test_llamacpp_not_a_model(llama_server, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"definitely not gguf" * 64)
    log = _llama_direct(llama_server, ["-m", str(bogus), "--port", "1"], tmp_path / "n.log")
    d = diagnose_file(str(log), "llamacpp")
    assert d.category in (FailureCategory.NOT_A_MODEL, FailureCategory.MODEL_NOT_FOUND), d


def test_llamacpp_bad_flag(llama_server, tmp_path):
    log = _llama_direct(llama_server, ["--no-such-flag"], tmp_path / "f.log")
    d = diagnose_file(str(log), "llamacpp")
    assert d.category is FailureCategory.BAD_ARGUMENT and "no-such-flag" in d.root_error


@pytest.mark.e2e  # its fixture starts vLLM twice (~90 s on 2 cores)
def test_vllm_context_beyond_kv_space(vllm_failed_starts):
    # 100,000 tokens need 2.15 GiB of KV at 23,040 B/token; 1 GiB is given.
    d = diagnose_file(vllm_failed_starts["context_beyond_kv"], "vllm")
    assert d.category is FailureCategory.KV_INSUFFICIENT
    assert "max seq len (100000)" in d.root_error and "2.15 GiB" in d.root_error
    # Shrinking max_model_len would give up the context: never offered as contract-preserving.
    for r in d.remedies:
        if "max_model_len" in r.knob_changes:
            assert not r.preserves_contract


@pytest.mark.e2e
def test_vllm_max_model_len_above_native(vllm_failed_starts):
    d = diagnose_file(vllm_failed_starts["above_native"], "vllm")
    assert d.category is FailureCategory.CONTEXT_TOO_LONG
    assert "greater than the derived max_model_len" in d.root_error
