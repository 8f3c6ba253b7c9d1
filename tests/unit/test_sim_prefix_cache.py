"""The stand-ins' prefix cache: a prompt's prefill is charged only past its longest match with
the engine's recent prompts, read as each engine reads it (vLLM: not for a request with
prompt_logprobs; SGLang: up to logprob_start_len). The long-context check's windows share
their record, so this decides what the check costs on a simulated GPU. Served in-process on
the shared simulated host, time scaled down."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.sim import sglang_gpu, vllm_gpu
from tests.sim.gpu_host import Engine, Memory, PrefixCache, Server, Shape, handler
from tests.unit.test_sim_kv_pressure import GPU, MODEL


def test_the_cache_holds_the_longest_common_prefix_within_what_may_be_read():
    cache = PrefixCache()
    first = list(range(1000))
    assert cache.hit(first, 1000) == 0  # nothing served before
    assert cache.hit(first + [7, 8], 10_000) == 1000
    assert cache.hit(first[:600] + [5] * 10, 10_000) == 600
    assert cache.hit(first + [7, 8], 300) == 300  # the request may read only 300
    assert cache.hit(list(first), 10_000) == 999  # one token is always computed


def test_the_oldest_prompts_leave_the_cache():
    cache = PrefixCache()
    cache.hit([1] * 50, 0)
    for i in range(PrefixCache.KEPT):
        cache.hit([2 + i] * 50, 0)
    assert cache.hit([1] * 50, 50) == 0


@pytest.fixture
def serve():
    servers = []

    def start(front) -> tuple[Engine, str]:
        shape = Shape(tp=1, pp=1, dp=1, max_seqs=4, max_len=4096, kv_fp8=False, graphs=True)
        e = Engine(shape, MODEL, GPU, Memory(10**6, 1024, 4096 * 1024, 4096), 1e-6)
        e.prefix_cache = PrefixCache()
        server = Server(("127.0.0.1", 0), handler(e, "m", front))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return e, f"http://127.0.0.1:{server.server_address[1]}"
    yield start
    for s in servers:
        s.shutdown()


def test_vllm_reads_the_cache_for_a_generation_but_not_for_prompt_logprobs(serve):
    e, base = serve(vllm_gpu.FRONT)
    record = [i % 61 for i in range(2000)]  # ids of the toy vocabulary

    def ask(prompt: list[int], **extra) -> int:
        before = e.prefill_tokens
        body = {"model": "m", "prompt": prompt, "max_tokens": 1, **extra}
        assert httpx.post(f"{base}/v1/completions", json=body, timeout=30).status_code == 200
        return e.prefill_tokens - before

    assert ask(record) == 2000
    assert ask(record + [1, 2, 3]) == 3  # the record was cached
    assert ask(record + [4, 5], prompt_logprobs=1) == 2002  # scoring skips the cache


def test_sglang_reads_the_cache_up_to_logprob_start_len(serve):
    e, base = serve(sglang_gpu.FRONT)
    record = [i % 61 for i in range(2000)]  # ids of the toy vocabulary

    def ask(prompt: list[int], **extra) -> int:
        before = e.prefill_tokens
        body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 1}, **extra}
        assert httpx.post(f"{base}/generate", json=body, timeout=30).status_code == 200
        return e.prefill_tokens - before

    assert ask(record) == 2000
    scored = ask(record + [1, 2, 3], return_logprob=True, logprob_start_len=1500)
    assert scored == 503  # cached up to the first scored position
    assert ask(record + [1, 2, 3, 9]) == 1  # a generation reads all it matches
