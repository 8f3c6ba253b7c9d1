"""No route binds an engine beyond 127.0.0.1 without an approved expose gate, and an exposed
engine requires its API key. Real llama-server; every route a user has is tried: the request's
tune knob and base overrides, the target file, the CLI, and a configuration handed straight to
the process layer (the last gate, whatever set the host)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.approval import AnswerSource, ExposureGrant, GateAnswer, GateKind
from infopt.specs.base import ExposureError
from infopt.specs.request import OptimizeRequest
from infopt.specs.request_file import parse_request
from infopt.specs.serving import LlamaCppConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

KEY = "expose-test-key-5bd1f0"


def _answer(approved=True) -> GateAnswer:
    return GateAnswer(kind=GateKind.EXPOSE, key="expose-winner", title="t", approved=approved,
                      source=AnswerSource.PERSON, answered_at="2026-12-01T00:00:00+0000")


def _grant(address="0.0.0.0", approved=True) -> ExposureGrant:
    return ExposureGrant(address=address, answer=_answer(approved), api_key=SecretStr(KEY),
                         key_source="test")


def _cfg(gguf_model, host="0.0.0.0") -> LlamaCppConfig:
    return LlamaCppConfig(model_path=str(gguf_model), served_model_name="smollm2",
                          ctx_per_slot_tokens=512, threads=2, host=host)


@pytest.mark.parametrize("grant", [None, "denied", "other-address"])
def test_the_process_layer_refuses_a_wide_bind_without_an_approved_grant(
        llama_server, gguf_model, tmp_path, grant):
    g = {None: None, "denied": _grant(approved=False),
         "other-address": _grant(address="10.9.9.9")}[grant]
    log = tmp_path / "engine.log"
    with pytest.raises(ExposureError, match="refusing to bind llama.cpp llama-server to 0.0.0.0"):
        process.start(llamacpp.ADAPTER, _cfg(gguf_model), str(llama_server), log, 10**8,
                      exposure=g)
    assert not log.exists()  # refused before anything was launched


def test_request_routes_to_a_wide_host_are_refused():
    for tune in ({"knob": "host", "values": ["0.0.0.0"]},
                 {"knob": "parallel_slots", "values": [1], "base_overrides": {"host": "::"}}):
        with pytest.raises(ValidationError, match="`host` is not a tuning knob"):
            OptimizeRequest(tune=tune)
    with pytest.raises(Exception, match="host"):  # a target file: unknown fields are errors
        parse_request({"host": "0.0.0.0"}, "target.yaml")
    with pytest.raises(ValidationError, match="is not an IP address"):
        OptimizeRequest(expose={"address": "everywhere"})


def test_the_cli_has_no_host_flag(tmp_path):
    out = subprocess.run([sys.executable, "-m", "infopt.cli", "optimize", "--host", "0.0.0.0",
                          "--runs-dir", str(tmp_path)], capture_output=True, text=True,
                         timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 2 and "No such option: --host" in out.stderr


def test_an_approved_grant_binds_the_address_and_requires_the_key(llama_server, gguf_model,
                                                                  tmp_path):
    log = tmp_path / "engine.log"
    running = process.start(llamacpp.ADAPTER, _cfg(gguf_model), str(llama_server), log,
                            10**8, exposure=_grant())
    try:
        assert running.bind_addresses == [f"0.0.0.0:{running.port}"]
        assert running.api_key_source == "test"
        url = f"{running.base_url}/v1/models"
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    finally:
        process.stop(running.pid)
    # The key went to the engine's environment only.
    assert KEY not in running.command and KEY not in json.dumps(running.model_dump())
    assert KEY not in log.read_text(errors="replace")


def test_a_loopback_engine_reports_its_real_socket(llama_server, gguf_model, tmp_path):
    running = process.start(llamacpp.ADAPTER, _cfg(gguf_model, "127.0.0.1"), str(llama_server),
                            tmp_path / "engine.log", 10**8)
    try:
        assert running.bind_addresses == [f"127.0.0.1:{running.port}"]
        assert running.api_key_source is None
    finally:
        process.stop(running.pid)
