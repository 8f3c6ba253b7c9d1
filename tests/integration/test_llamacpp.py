"""Real llama-server with the real SmolLM2 GGUF: process control, contract probes, load
generator, and the user-facing errors for a busy port, a missing binary and a bad model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import numpy as np
import pytest

from infopt.contract.openai_chat import CHAT_FEATURES
from infopt.contract.verify import verify_endpoint
from infopt.engines import endpoint_for, process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.loadgen.measure import measure_workload
from infopt.loadgen.tokens import engine_counter
from infopt.specs.base import EngineStartError, EngineUnavailableError, InputError
from infopt.specs.serving import LlamaCppConfig
from infopt.specs.workload import fixed_levels
from tests.hostfacts import nvidia_gpus
from tests.procs import end_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(llama_server, gguf_model, tmp_path_factory):
    cfg = LlamaCppConfig(model_path=str(gguf_model), served_model_name="smollm2",
                         parallel_slots=2, ctx_per_slot_tokens=2048, threads=2)
    log = tmp_path_factory.mktemp("llama") / "engine.log"
    running = process.start(llamacpp.ADAPTER, cfg, str(llama_server), log, weights_bytes=10**8)
    yield running
    process.stop(running.pid)


def test_started_on_localhost_with_version_and_log(server):
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.version != "unknown" and "commit" in server.version
    log = open(server.log_path).read()
    # llama.cpp logs its per-slot context: 2 slots x 2048 tokens.
    assert "n_ctx_seq" in log or "n_ctx_slot" in log
    assert httpx.get(f"{server.base_url}/metrics").status_code == 200


# Recorded for llama.cpp 0.3.36 (llama-server, SmolLM2-135M, 2 slots), with evidence files:
# every Chat Completions feature passes, n and seed included (a server that ignores those
# fields fails them: tests/unit/test_contract_probes.py). Tools: this model's chat template has
# none, so no tool_calls come back, even when required or named (the text merely describes
# the weather); the tool-result turn is answered. Responses: text.format json_schema is not
# applied (a ```json fence comes back) and tool_choice required gives no function_call; the
# stream fails as openai's client.responses.stream() reads it: no event carries
# sequence_number, and output_index/content_index are missing (llama.cpp issue #20607, open:
# https://github.com/ggml-org/llama.cpp/issues/20607; PR #24957 would add them), so the helper
# raises TypeError on the first output_text delta, though raw iteration survives.
# Anthropic Messages: all but tool use; count_tokens equals the billed prompt tokens once the
# prompt-cache reads are added (llama-server reports cache hits as cache_read_input_tokens).
LLAMACPP_0_3_36 = {
    **{f: "pass" for f in CHAT_FEATURES},
    "reasoning": "not applicable",
    "tools_auto": "fail", "tools_required": "fail", "tools_named": "fail",
    "tools_parallel": "fail", "tools_second_turn": "pass",
    "auth": "unsupported", "error_bad_request": "pass", "error_beyond_context": "pass",
    "responses_create": "pass", "responses_stream": "fail", "responses_tools": "fail",
    "responses_json_schema": "fail",
    "messages_create": "pass", "messages_stream": "pass", "messages_system": "pass",
    "messages_multi_turn": "pass", "messages_tools": "fail", "messages_count_tokens": "pass",
}


def test_contract_of_this_llama_server_version(server, tmp_path):
    checks = verify_endpoint(endpoint_for("llamacpp", server.base_url, "smollm2", server.pid),
                             evidence_dir=tmp_path)
    got = {c.feature: c.status.value for c in checks}
    # Not constrained by this server, so it is the model's free text: a fenced answer (here)
    # fails, bare JSON (possible with another CPU's rounding) would pass; never unsupported.
    assert got.pop("responses_json_schema") in ("pass", "fail")
    want = {f: v for f, v in LLAMACPP_0_3_36.items() if f != "responses_json_schema"}
    assert got == want, [(c.feature, c.status.value, c.detail) for c in checks
                         if c.status.value != LLAMACPP_0_3_36.get(c.feature)]
    assert all((tmp_path / f"{c.feature}.json").is_file() for c in checks)
    by = {c.feature: c for c in checks}
    assert "exceeds the available context size" in by["error_beyond_context"].detail
    assert "not checked: no API key" in by["auth"].detail
    assert "the chat template has no thinking marker" in by["reasoning"].detail
    assert by["responses_stream"].detail.startswith(
        "client.responses.stream() raises TypeError"), by["responses_stream"].detail
    assert "response.output_item.added event #2 lacks output_index" in \
        by["responses_stream"].detail
    assert "client.chat.completions.stream() reads it to the end" in by["stream"].detail
    assert "client.messages.stream() reads it to the end" in by["messages_stream"].detail


@contextmanager
def _own_server(llama_server, gguf_model, *flags: str) -> Iterator[str]:
    """A llama-server of its own with extra flags, on loopback; yields its base URL."""
    import time

    port = process.free_port()
    proc = subprocess.Popen([str(llama_server), "-m", str(gguf_model), "--host", "127.0.0.1",
                             "--port", str(port), "-c", "1024", "-t", "2", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base
    finally:
        end_process(proc, 10)


def test_auth_401_without_the_key_and_200_with_it(llama_server, gguf_model, tmp_path):
    """llama-server --api-key-file: the key never appears on the command line."""
    key_file = tmp_path / "key"
    key_file.write_text("probe-secret-123\n")
    with _own_server(llama_server, gguf_model, "--api-key-file", str(key_file)) as base:
        [auth] = verify_endpoint(endpoint_for("llamacpp", base, "smollm2"),
                                 features=("auth",), api_key="probe-secret-123")
        assert auth.status.value == "pass", auth.detail
        assert auth.detail == "HTTP 401 without the key, 401 with a wrong one, 200 with it"
        [open_auth] = verify_endpoint(endpoint_for("llamacpp", base, "smollm2"),
                                      features=("auth",), api_key="wrong-key")
        assert open_auth.status.value == "fail"


# A template that opens a think block, as reasoning models' templates do. llama.cpp 0.3.36
# does not recognise it as a reasoning format (content-only), so even with --reasoning-format
# deepseek the thinking stays in content: the probe must call that a failure, read from the
# template the server publishes at /props, never "not applicable". Real newlines inside the
# template's string literals: llama.cpp's template engine takes them as they are.
THINK_TEMPLATE = """{% for message in messages %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
<think>
' }}{% endif %}
"""


def test_a_thinking_template_without_separated_reasoning_fails(llama_server, gguf_model,
                                                               tmp_path):
    template = tmp_path / "think.jinja"
    template.write_text(THINK_TEMPLATE)
    with _own_server(llama_server, gguf_model, "--jinja", "--chat-template-file",
                     str(template), "--reasoning-format", "deepseek") as base:
        [check] = verify_endpoint(endpoint_for("llamacpp", base, "smollm2"),
                                  features=("reasoning",))
    assert check.status.value == "fail", check.detail
    assert "<think>" in check.detail


def test_benchmark_forces_lengths_and_runs_concurrently(server):
    wl = fixed_levels(input_tokens=48, output_tokens=12, levels=[1, 2], target=2, requests=4,
                      cooldown_s=0.5, seed=1)
    ep = endpoint_for("llamacpp", server.base_url, "smollm2", server.pid)
    with httpx.Client(timeout=30) as client:
        counter = engine_counter(client, ep)
        result, records = measure_workload(ep, wl, out_dir=None, max_input_tokens=8192,
                                           counter=counter)
    assert len(records) == 8 and all(r.ok for r in records)
    assert all(r.output_tokens == 12 for r in records)  # usage says the forced length was reached
    # Exact prompts: usage.prompt_tokens is the requested whole-prompt length, template included.
    assert all(r.prompt_tokens == r.prompt_tokens_requested == 48 for r in records)
    # llama.cpp's running count (timings.predicted_n) rode on every chunk: exact per-chunk
    # counts, and one ITL sample per token after the first chunk.
    assert all(r.chunk_tokens_counted and r.streamed_tokens == 12 for r in records)
    assert all(len(r.itl_s) == 12 - 1 for r in records if r.content_chunks == 12)
    assert len({r.request_id for r in records}) == 8  # unique prompt prefixes
    c2 = [r for r in records if r.concurrency == 2]
    # Really concurrent: at concurrency 2, some request starts before another has ended.
    spans = sorted((r.start_offset_s, r.start_offset_s + r.e2e_s) for r in c2)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))
    for lvl in result.levels:
        mine = [r for r in records if r.concurrency == lvl.concurrency]
        assert lvl.ttft_s.n == 4 and lvl.itl_s.n == sum(len(r.itl_s) for r in mine)
        assert lvl.itl_s.p50 == pytest.approx(float(np.median([g for r in mine for g in r.itl_s])))
        assert lvl.tpot_s.n == 4 and lvl.prompt_lengths_off == 0 and lvl.chunk_counts_assumed == 0
        assert lvl.output_tokens_per_s > 0 and lvl.total_tokens_per_s > lvl.output_tokens_per_s
        # The client watched its own event loop, and the engine's CPU/RSS were sampled.
        assert lvl.client_loop_lag_p99_s is not None and lvl.client_saturated is not None
        assert lvl.engine_rss_peak_bytes and lvl.engine_rss_peak_bytes > 50 * 2**20
        # Sampled (how busy it was is the machine's speed: `make bench-verdicts` checks a floor).
        assert lvl.engine_cpu_percent_mean is not None and lvl.engine_cpu_percent_mean >= 0
        # GPU utilization only where NVML sees a GPU (infopt's own inventory): nothing invented.
        assert (lvl.gpu_util_percent_mean is None) == (nvidia_gpus() == 0)


def test_occupied_port_is_a_clear_input_error(llama_server, gguf_model, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=512, port=port)
        with pytest.raises(InputError, match=f"port {port} on 127.0.0.1 is already in use"):
            process.start(llamacpp.ADAPTER, cfg, str(llama_server), tmp_path / "e.log", 10**8)


def test_not_a_model_fails_start_with_log_tail(llama_server, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"this is not a gguf file" * 100)
    cfg = LlamaCppConfig(model_path=str(bogus), ctx_per_slot_tokens=512)
    before = set(process.live_pids())
    with pytest.raises(EngineStartError) as exc:
        process.start(llamacpp.ADAPTER, cfg, str(llama_server), tmp_path / "e.log", 10**3)
    assert "exited with code" in str(exc.value) and str(tmp_path / "e.log") in str(exc.value)
    assert set(process.live_pids()) == before  # the failed engine was reaped


def test_missing_binary_says_run_make_engines(monkeypatch, tmp_path):
    monkeypatch.setenv(llamacpp.ENV_OVERRIDE, str(tmp_path / "nope" / "llama-server"))
    with pytest.raises(EngineUnavailableError, match="make engines"):
        llamacpp.locate()


def test_stop_kills_the_whole_process_group(llama_server, gguf_model, tmp_path):
    cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=512)
    running = process.start(llamacpp.ADAPTER, cfg, str(llama_server), tmp_path / "e.log", 10**8)
    assert os.getpgid(running.pid) == running.pid  # its own process group
    process.stop(running.pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(running.pid, 0)


def test_no_orphan_when_the_optimizer_process_dies(llama_server, gguf_model, tmp_path):
    """A Python process that starts an engine and then exits abnormally (SystemExit from an
    unhandled error) must not leave the engine running: the atexit hook stops it."""
    code = f"""
import sys
from pathlib import Path
from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.serving import LlamaCppConfig
cfg = LlamaCppConfig(model_path={str(gguf_model)!r}, ctx_per_slot_tokens=512)
r = process.start(llamacpp.ADAPTER, cfg, {str(llama_server)!r}, Path({str(tmp_path)!r}) / "e.log", 10**8)
print(r.pid, flush=True)
raise RuntimeError("simulated crash")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "simulated crash" in out.stderr
    pid = int(out.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_no_orphan_when_the_optimizer_is_terminated(llama_server, gguf_model, tmp_path):
    """SIGTERM to the optimizer (a cancelled deployment run) stops its engines too."""
    import signal
    import time

    code = f"""
import time
from pathlib import Path
from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.serving import LlamaCppConfig
cfg = LlamaCppConfig(model_path={str(gguf_model)!r}, ctx_per_slot_tokens=512)
r = process.start(llamacpp.ADAPTER, cfg, {str(llama_server)!r}, Path({str(tmp_path)!r}) / "e.log", 10**8)
print(r.pid, flush=True)
time.sleep(120)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid = int(proc.stdout.readline())
    os.killpg(pid, 0)  # the engine is up
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM  # the default action still happens
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    pytest.fail("engine survived the optimizer's SIGTERM")


def test_hf_tokenizer_json_counts_like_llama_servers_tokenizer(server, hf_model):
    """The model's tokenizer.json (the fallback for engines without a tokenize route) counts
    exactly what llama-server's own GGUF tokenizer counts, on the prompts we build."""
    from infopt.loadgen.tokens import exact_prompt, hf_counter

    hf = hf_counter(hf_model)
    with httpx.Client(timeout=30) as client:
        engine = engine_counter(client, endpoint_for("llamacpp", server.base_url, "smollm2"))
        texts = [exact_prompt(f"r{n}", n, hf, seed=0)[0] for n in (5, 40, 300)]
        texts += ["Hello, world!", "naïve café — 東京 🚀", "  two  spaces\nand a newline"]
        assert [hf(t) for t in texts] == [engine(t) for t in texts]
    assert hf_counter(hf_model / "missing") is None


def test_the_cpu_build_takes_the_offload_flags_and_reports_no_offload(llama_server, gguf_model,
                                                                      tmp_path):
    """Issue 49: -ngl, -ncmoe, -sm and -ts reach the real llama-server, which accepts them; this
    CPU build warns they have no effect and prints no offload line, so none is read."""
    cfg = LlamaCppConfig(model_path=str(gguf_model), ctx_per_slot_tokens=512, n_gpu_layers=0,
                         n_cpu_moe=0, split_mode="layer", tensor_split=[1.0])
    log = tmp_path / "offload.log"
    running = process.start(llamacpp.ADAPTER, cfg, str(llama_server), log, weights_bytes=10**8)
    try:
        assert httpx.get(f"{running.base_url}/health", timeout=10).status_code == 200
    finally:
        process.stop(running.pid)
    text = log.read_text(errors="replace")
    assert "-ngl 0 -ncmoe 0 -sm layer -ts 1" in text  # the command line, first in its log
    assert "compiled without support for GPU offload" in text
    assert llamacpp.offload_from_log(text) is None
