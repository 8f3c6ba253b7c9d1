"""bench/fast_server.py speaks the wire format the real `openai` SDK and infopt's client accept.

No timing assertions (speed is checked by `make bench`): only counts, fields and shapes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from bench.fast_server import TIMESTAMP_FIELD, FastServer, start_server
from infopt.engines.base import CONTINUOUS_USAGE
from infopt.loadgen.client import RequestJob
from infopt.loadgen.runner import drive


@pytest.fixture(scope="module")
def server() -> Iterator[FastServer]:
    with start_server(ttft_s=0.0, itl_s=0.0) as srv:
        yield srv


def _client(server: FastServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused", max_retries=0,
                         timeout=10.0)


def test_openai_sdk_streams_exactly_max_tokens_chunks_then_usage(server: FastServer) -> None:
    stream = _client(server).chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "count to seven"}],
        max_tokens=7, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == 7
    assert content[0].choices[0].delta.role == "assistant"
    assert content[-1].choices[0].finish_reason == "length"
    assert all(c.object == "chat.completion.chunk" and c.model == "fast" for c in chunks)
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1].usage is not None  # the usage chunk comes last
    assert usage[0].completion_tokens == 7
    assert usage[0].total_tokens == usage[0].prompt_tokens + 7


def test_every_chunk_carries_a_monotonic_send_timestamp(server: FastServer) -> None:
    before = time.monotonic_ns()
    chunks = list(_client(server).chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "hi"}],
        max_completion_tokens=4, stream=True, stream_options={"include_usage": True}))
    after = time.monotonic_ns()
    stamps = [(c.model_extra or {}).get(TIMESTAMP_FIELD) for c in chunks]
    assert len(stamps) == 5 and all(isinstance(s, int) for s in stamps)
    # One machine-wide clock: the server's stamps fall inside this process's window.
    assert before <= stamps[0] and stamps == sorted(stamps) and stamps[-1] <= after


def test_no_usage_chunk_unless_asked_and_non_streaming_completion(server: FastServer) -> None:
    client = _client(server)
    chunks = list(client.chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "hi"}], max_tokens=3, stream=True))
    assert len(chunks) == 3 and all(c.usage is None for c in chunks)
    done = client.chat.completions.create(
        model="fast", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert done.usage is not None and done.usage.completion_tokens == 5
    assert done.choices[0].message.content and done.choices[0].finish_reason == "length"


def test_bad_request_is_an_openai_error(server: FastServer) -> None:
    with pytest.raises(openai.BadRequestError):
        _client(server).chat.completions.create(model="fast", messages=[], max_tokens=3)


def _jobs(n: int, tokens: int, conc: int, tag: str, **fields) -> list[RequestJob]:
    return [RequestJob(f"{tag}{i}", f"Request {tag}{i}. hello", tokens, conc,
                       forced={"max_tokens": tokens, "ignore_eos": True, **fields})
            for i in range(n)]


def test_infopt_client_records_and_server_send_log(server: FastServer) -> None:
    jobs = _jobs(4, 5, 2, "r", x_itl_s=0.001, x_record_sends=True)
    records, wall_s, _ = asyncio.run(drive(server.base_url, "fast", jobs, 2))
    assert wall_s > 0 and all(r.ok for r in records), [r.error for r in records]
    assert all(r.content_chunks == 5 and r.output_tokens == 5 and len(r.itl_s) == 4
               for r in records)
    # No running count from this server unless asked: each chunk is assumed to be one token.
    assert all(r.chunk_tokens_counted is False and r.streamed_tokens == 5 for r in records)
    sends = httpx.get(f"{server.base_url}/sends").json()
    assert sorted(sends) == sorted(j.prompt for j in jobs)
    assert all(len(v["send_ns"]) == 5 and v["arrival_ns"] <= v["send_ns"][0]
               for v in sends.values())
    assert httpx.get(f"{server.base_url}/sends").json() == {}  # read once, then forgotten
    stats = httpx.get(f"{server.base_url}/stats").json()
    assert stats["chunks_sent"] >= 20 and stats["cpu_s"] > 0


def test_a_chunk_of_k_tokens_counts_k_itl_samples(server: FastServer) -> None:
    """7 tokens in chunks of 3, 3, 1 with the running count on each chunk: the record holds
    one ITL sample per token after the first chunk (3 + 1), each the gap split evenly."""
    jobs = [RequestJob(j.request_id, j.prompt, 7, 1, forced=j.forced, counting=CONTINUOUS_USAGE)
            for j in _jobs(2, 7, 1, "k", x_itl_s=0.002, x_tokens_per_chunk=3)]
    records, _, _ = asyncio.run(drive(server.base_url, "fast", jobs, 1))
    for r in records:
        assert r.ok and r.content_chunks == 3 and r.output_tokens == 7
        assert r.chunk_tokens_counted is True and r.streamed_tokens == 7
        assert len(r.itl_s) == 4  # chunk 2 carried 3 tokens, chunk 3 one
        assert r.itl_s[0] == r.itl_s[1] == r.itl_s[2] and r.itl_s[0] > 0
    # Without the running count the same stream gives per-chunk gaps, flagged as assumed.
    plain = _jobs(1, 7, 1, "p", x_tokens_per_chunk=3)
    (rec,), _, _ = asyncio.run(drive(server.base_url, "fast", plain, 1))
    assert rec.chunk_tokens_counted is False and len(rec.itl_s) == 2 and rec.streamed_tokens == 3


def test_connections_are_reused_across_requests(server: FastServer) -> None:
    """The client drains each stream to its end, so a closed loop of 2 workers sending 8
    requests opens 2 TCP connections, not 8."""
    before = httpx.get(f"{server.base_url}/stats").json()["connections"]
    records, _, _ = asyncio.run(drive(server.base_url, "fast", _jobs(8, 4, 2, "c"), 2))
    after = httpx.get(f"{server.base_url}/stats").json()["connections"]
    assert all(r.ok for r in records)
    assert after - before - 1 == 2  # less the first /stats call's own connection
