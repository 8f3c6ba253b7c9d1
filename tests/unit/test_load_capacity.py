"""What lets the load generator hold many streams: open-file limits, sharded connection pools,
one record per request whatever happens, the client's CPU share and peak RSS, and the
fast server's count of simultaneously open streams."""

from __future__ import annotations

import asyncio
import sys

import httpx
import pytest

from bench.fast_server import start_server
from infopt.loadgen import capacity
from infopt.loadgen.capacity import StreamLimitError, ensure_open_files, pool_shards
from infopt.loadgen.client import RequestJob, send_request
from infopt.loadgen.monitor import ClientHealth, LoopLagProbe, client_saturated
from infopt.loadgen.runner import drive


def test_streams_are_spread_over_small_pools() -> None:
    assert capacity.POOL_STREAMS == 4
    assert [pool_shards(n) for n in (0, 1, 4, 5, 8, 1000)] == [1, 1, 1, 2, 2, 250]


class _Limits:
    def __init__(self, soft: int, hard: int) -> None:
        self.value, self.calls = (soft, hard), []

    def getrlimit(self, _which: int) -> tuple[int, int]:
        return self.value

    def setrlimit(self, _which: int, value: tuple[int, int]) -> None:
        self.calls.append(value)
        self.value = value


def _patch(monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> _Limits:
    limits = _Limits(soft, hard)
    monkeypatch.setattr(capacity.resource, "getrlimit", limits.getrlimit)
    monkeypatch.setattr(capacity.resource, "setrlimit", limits.setrlimit)
    return limits


def test_the_soft_open_files_limit_is_raised_to_the_hard_one(monkeypatch) -> None:
    limits = _patch(monkeypatch, 1024, 65536)
    assert ensure_open_files(1000) == 65536
    assert limits.calls == [(65536, 65536)]


def test_enough_open_files_is_left_alone(monkeypatch) -> None:
    limits = _patch(monkeypatch, 20000, 20000)
    assert ensure_open_files(1000) == 20000 and limits.calls == []


def test_too_low_a_hard_limit_says_what_to_change(monkeypatch) -> None:
    limits = _patch(monkeypatch, 1024, 1024)
    with pytest.raises(StreamLimitError, match=r"1000 concurrent streams need about 1064 open "
                       r"files.*ulimit -Hn 1064.*concurrency to 960 or less"):
        ensure_open_files(1000)
    assert limits.calls == []


def test_the_flag_is_up_for_a_late_loop_or_a_busy_core() -> None:
    def health(lag_s: float, cpu: float | None) -> ClientHealth:
        return ClientHealth(loop_lag_p50_s=0.0, loop_lag_p99_s=lag_s, loop_lag_max_s=lag_s,
                            ticks=100, cpu_share=cpu)

    assert not client_saturated(health(0.001, 0.5), 0.02)
    assert client_saturated(health(0.020, 0.5), 0.02)  # 20 ms late against a 20 ms ITL
    assert not client_saturated(health(0.008, 0.5), 0.2)  # 8 ms is under 10% of 200 ms
    assert client_saturated(health(0.001, 0.95), 0.02)  # no idle time left in the loop
    assert not client_saturated(health(0.001, None), 0.02)


def test_an_unexpected_failure_is_a_record_not_a_lost_request() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise ValueError("a bug deep in a transport")

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            job = RequestJob("r1", "hello", 4, 1, forced={"max_tokens": 4})
            return await send_request(client, "http://x", "m", job, 0.0)

    rec = asyncio.run(go())
    assert rec.request_id == "r1" and not rec.ok
    assert rec.error == "ValueError: a bug deep in a transport"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_the_probe_reports_the_phase_peak_rss_and_cpu_share() -> None:
    async def allocate() -> None:
        async with probe:
            block = bytearray(64 * 1024 * 1024)  # touched: resident
            block[::4096] = b"x" * len(block[::4096])
            del block
            await asyncio.sleep(0.05)

    probe = LoopLagProbe()
    asyncio.run(allocate())
    h = probe.result()
    assert h.rss_peak_in_phase and h.rss_start_bytes is not None
    assert h.rss_peak_bytes - h.rss_start_bytes >= 48 * 1024 * 1024
    assert h.cpu_share is not None and 0.0 <= h.cpu_share < 2.0


def test_streams_held_at_once_and_keep_alive_per_shard() -> None:
    """10 workers over 3 pools hold 10 streams at once (the server holds each first chunk until
    10 are open), and reuse their 10 connections for 30 requests."""
    jobs = [RequestJob(f"h{i}", f"Request h{i}. hello", 3, 10,
                       forced={"max_tokens": 3, "x_hold_until_streams": 10})
            for i in range(30)]
    with start_server(ttft_s=0.0, itl_s=0.001) as server:
        records, _, _ = asyncio.run(drive(server.base_url, "fast", jobs, 10, timeout_s=30.0))
        stats = httpx.get(f"{server.base_url}/stats?reset=1").json()
        after = httpx.get(f"{server.base_url}/stats").json()
    assert sorted(r.request_id for r in records) == sorted(j.request_id for j in jobs)
    assert all(r.ok and r.content_chunks == 3 for r in records), [r.error for r in records]
    assert stats["streams_peak"] == 10 and stats["streams_open"] == 0
    assert stats["requests"] == 30 and stats["connections"] - 1 == 10  # less /stats' own
    assert after["streams_peak"] == 0  # reset to what was open
