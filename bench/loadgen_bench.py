"""Benchmark of infopt's load generator itself: is it ever the bottleneck, and how much timing
error does it add? Run by `make bench` (python -m bench.loadgen_bench); about 30-60 s.

The load generator (infopt.loadgen.client) runs pinned to one core, against bench/fast_server.py
pinned to another, so the client has one core to itself and the server costs it nothing:
  (a) throughput: sustained content chunks/s the real `runner.drive` processes at closed-loop
      concurrency 1, 8, 32, 128 with a server that streams as fast as it can (inter-chunk
      interval 0), plus the client's and the server's CPU use (a server near 100% CPU would mean
      the number is the server's, not the client's: the table flags it) and the TCP connections
      the server accepted per request (1.0 = no keep-alive reuse);
  (b) timing error: with a known server cadence (TTFT 20 ms, ITL 10 ms), the real client
      per-chunk timestamps against the send time the server stamps into every chunk
      (CLOCK_MONOTONIC, which is what time.perf_counter() reads on Linux): client ITL - server
      ITL, receive - send latency, client TTFT - server-side TTFT (first send - request arrival),
      and the part of TTFT spent before the server has the request (client start -> arrival);
  (c) event-loop lag: a ticker task in the client's event loop that sleeps 5 ms and records the
      overshoot, idle and during every run of (a) and (b). asyncio rounds timer waits up to the
      next millisecond (epoll), so the idle baseline is not zero: compare against it.
Each level: one warm-up run, then 3 measured repetitions; the table gives the median over the
repetitions and their range [min-max]. All times in seconds inside, shown in ms/us.

Results go to $INFOPT_BENCH_OUT/loadgen_results.json ($INFOPT_BENCH_OUT defaults to
/tmp/infopt-bench), never into the checkout. Numbers depend on the machine and on whatever else
runs on it (the load average at start and end is recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.fast_server import FastServer, pin_to_cpu, start_server
from infopt.loadgen.client import RequestJob
from infopt.loadgen.runner import drive

MODEL = "fast-server"
REPEATS = 3
THROUGHPUT_LEVELS = (1, 8, 32, 128)
THROUGHPUT_TOKENS = 64  # chunks per request: per-request costs (connect, headers) amortized
THROUGHPUT_TARGET_S = 1.0  # wall time of one measured repetition, sized from the warm-up's rate
TIMING_LEVELS = (1, 32, 128)
TIMING_TTFT_S = 0.020
TIMING_ITL_S = 0.010
TIMING_TOKENS = 30  # 20 ms + 29 x 10 ms = 0.31 s per request
TICK_S = 0.005
TIME_BUDGET_S = 110.0  # stop starting new levels past this (the brief: < 2 minutes in all)
SERVER_BOUND_CPU = 0.9  # server CPU share above which (a) measured the server, not the client


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else math.nan


def _spread(values: list[float]) -> dict[str, Any]:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return {"median": None, "min": None, "max": None, "reps": values}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "reps": values}


class LoopLag:
    """Overshoot of `asyncio.sleep(TICK_S)` in the running loop: how late a ready callback runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    async def run(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.samples.append(time.perf_counter() - t - TICK_S)


async def _with_lag(work: Callable[[], Awaitable[Any]]) -> tuple[Any, LoopLag]:
    lag = LoopLag()
    ticker = asyncio.create_task(lag.run())
    try:
        return await work(), lag
    finally:
        ticker.cancel()


def _server_stats(server: FastServer) -> dict[str, Any]:
    return httpx.get(f"{server.base_url}/stats").json()  # itself one connection, one request


def _jobs(n: int, tokens: int, concurrency: int, tag: str, extra: dict[str, Any]
          ) -> list[RequestJob]:
    return [RequestJob(f"{tag}-{i}", f"Request {tag}-{i}. Continue this list: time people year",
                       tokens, concurrency, forced=extra) for i in range(n)]


# --- (a) throughput --------------------------------------------------------------------------

def _throughput_run(server: FastServer, concurrency: int, n: int, tag: str) -> dict[str, Any]:
    extra = {"max_tokens": THROUGHPUT_TOKENS, "ignore_eos": True, "x_ttft_s": 0.0, "x_itl_s": 0.0}
    jobs = _jobs(n, THROUGHPUT_TOKENS, concurrency, tag, extra)
    srv0, cpu0 = _server_stats(server), time.process_time()
    (records, wall_s, _), lag = asyncio.run(_with_lag(
        lambda: drive(server.base_url, MODEL, jobs, concurrency, timeout_s=60.0)))
    cpu_s, srv1 = time.process_time() - cpu0, _server_stats(server)
    srv_s = srv1["cpu_s"] - srv0["cpu_s"]
    connections = srv1["connections"] - srv0["connections"] - 1  # less the /stats call
    ok = [r for r in records if r.ok and r.content_chunks == THROUGHPUT_TOKENS]
    chunks = sum(r.content_chunks for r in records)
    return {
        "requests": n, "bad_requests": n - len(ok), "wall_s": wall_s,
        "chunks_per_s": chunks / wall_s, "requests_per_s": len(ok) / wall_s,
        "client_cpu_share": cpu_s / wall_s, "client_cpu_s_per_chunk": cpu_s / max(1, chunks),
        "server_cpu_share": srv_s / wall_s, "tcp_connections_per_request": connections / n,
        "loop_lag_p50_s": _pct(lag.samples, 50), "loop_lag_p99_s": _pct(lag.samples, 99),
        "loop_lag_max_s": max(lag.samples, default=math.nan),
    }


def bench_throughput(server: FastServer, levels: tuple[int, ...], deadline: float) -> list[dict]:
    out = []
    for c in levels:
        if time.monotonic() > deadline:
            print(f"  (a) concurrency {c}: skipped, time budget spent", flush=True)
            continue
        warm = _throughput_run(server, c, 2 * c, f"warm{c}")
        # Size the measured runs from the warm-up's rate, in whole rounds of `c` requests.
        rounds = max(2, round(warm["chunks_per_s"] * THROUGHPUT_TARGET_S
                              / (THROUGHPUT_TOKENS * c)))
        reps = [_throughput_run(server, c, rounds * c, f"a{c}r{i}") for i in range(REPEATS)]
        level = {"concurrency": c, "requests_per_rep": rounds * c,
                 "tokens_per_request": THROUGHPUT_TOKENS, "reps": reps}
        for key in ("chunks_per_s", "requests_per_s", "client_cpu_share",
                    "client_cpu_s_per_chunk", "server_cpu_share",
                    "tcp_connections_per_request", "loop_lag_p50_s",
                    "loop_lag_p99_s"):
            level[key] = _spread([r[key] for r in reps])
        level["bad_requests"] = sum(r["bad_requests"] for r in reps)
        level["server_bound"] = level["server_cpu_share"]["median"] > SERVER_BOUND_CPU
        out.append(level)
        print(f"  (a) concurrency {c:>3}: {level['chunks_per_s']['median']:>9.0f} chunks/s",
              flush=True)
    return out


# --- (b) timing error ------------------------------------------------------------------------

def _timing_run(server: FastServer, concurrency: int, n: int, tag: str) -> dict[str, Any]:
    extra = {"max_tokens": TIMING_TOKENS, "ignore_eos": True, "x_ttft_s": TIMING_TTFT_S,
             "x_itl_s": TIMING_ITL_S, "x_record_sends": True}
    jobs = _jobs(n, TIMING_TOKENS, concurrency, tag, extra)
    prompt = {j.request_id: j.prompt for j in jobs}
    httpx.get(f"{server.base_url}/sends")  # forget anything recorded before
    # `drive` returns the phase origin, so each record's chunk times become absolute.
    (records, wall_s, origin), lag = asyncio.run(_with_lag(
        lambda: drive(server.base_url, MODEL, jobs, concurrency, timeout_s=60.0)))
    sends = httpx.get(f"{server.base_url}/sends").json()
    itl_err, itl_err_nominal, latency, ttft_err, ttft_err_nominal, server_jitter, upload = (
        [], [], [], [], [], [], [])
    bad = 0
    for rec in records:
        sent = sends.get(prompt[rec.request_id])
        if not rec.ok or rec.ttft_s is None or sent is None or rec.content_chunks != TIMING_TOKENS:
            bad += 1
            continue
        send_s = [ns / 1e9 for ns in sent["send_ns"]]
        t0 = origin + rec.start_offset_s
        upload.append(sent["arrival_ns"] / 1e9 - t0)  # client start -> server has the body
        recv_s = [t0 + rec.ttft_s]
        for gap in rec.itl_s:
            recv_s.append(recv_s[-1] + gap)
        latency += [r - s for r, s in zip(recv_s, send_s, strict=True)]
        server_gaps = [b - a for a, b in pairwise(send_s)]
        itl_err += [c - s for c, s in zip(rec.itl_s, server_gaps, strict=True)]
        itl_err_nominal += [c - TIMING_ITL_S for c in rec.itl_s]
        server_jitter += [s - TIMING_ITL_S for s in server_gaps]
        ttft_err.append(rec.ttft_s - (send_s[0] - sent["arrival_ns"] / 1e9))
        ttft_err_nominal.append(rec.ttft_s - TIMING_TTFT_S)
    row: dict[str, Any] = {"requests": n, "bad_requests": bad, "wall_s": wall_s,
                           "chunks_per_s": sum(r.content_chunks for r in records) / wall_s}
    for name, xs in (("itl_err", itl_err), ("itl_err_vs_nominal", itl_err_nominal),
                     ("recv_minus_send", latency), ("ttft_err", ttft_err),
                     ("ttft_err_vs_nominal", ttft_err_nominal), ("request_upload", upload),
                     ("server_itl_jitter", server_jitter), ("loop_lag", lag.samples)):
        row[f"{name}_p50_s"], row[f"{name}_p99_s"] = _pct(xs, 50), _pct(xs, 99)
        row[f"{name}_max_s"] = max(xs, default=math.nan)
    return row


def bench_timing(server: FastServer, levels: tuple[int, ...], deadline: float) -> list[dict]:
    out = []
    for c in levels:
        if time.monotonic() > deadline:
            print(f"  (b) concurrency {c}: skipped, time budget spent", flush=True)
            continue
        n = 4 if c == 1 else 2 * c
        _timing_run(server, c, c, f"warmt{c}")
        reps = [_timing_run(server, c, n, f"b{c}r{i}") for i in range(REPEATS)]
        level: dict[str, Any] = {"concurrency": c, "requests_per_rep": n, "ttft_s": TIMING_TTFT_S,
                                 "itl_s": TIMING_ITL_S, "tokens_per_request": TIMING_TOKENS,
                                 "offered_chunks_per_s": c / TIMING_ITL_S, "reps": reps}
        for key in reps[0]:
            if key.endswith(("_p50_s", "_p99_s")) or key == "chunks_per_s":
                level[key] = _spread([r[key] for r in reps])
        level["bad_requests"] = sum(r["bad_requests"] for r in reps)
        out.append(level)
        print(f"  (b) concurrency {c:>3}: ITL error p99 "
              f"{level['itl_err_p99_s']['median'] * 1e6:.0f} us", flush=True)
    return out


# --- (c) idle loop lag, report ---------------------------------------------------------------

def idle_loop_lag(duration_s: float = 1.0) -> dict[str, float]:
    async def idle() -> None:
        await asyncio.sleep(duration_s)
    _, lag = asyncio.run(_with_lag(idle))
    return {"p50_s": _pct(lag.samples, 50), "p99_s": _pct(lag.samples, 99),
            "max_s": max(lag.samples, default=math.nan), "samples": len(lag.samples)}


def _fmt(s: dict[str, Any], scale: float, digits: int = 0) -> str:
    if s["median"] is None:
        return "n/a"
    f = f"{{:.{digits}f}}"
    return (f"{f.format(s['median'] * scale)} "
            f"[{f.format(s['min'] * scale)}-{f.format(s['max'] * scale)}]")


def _no_nan(obj: Any) -> Any:
    """JSON has no NaN: an empty sample set becomes null."""
    if isinstance(obj, float):
        return None if math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: _no_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_no_nan(v) for v in obj]
    return obj


def print_report(result: dict[str, Any]) -> None:
    m = result["meta"]
    print(f"\nload generator benchmark  (client CPU {m['client_cpu']}, server CPU "
          f"{m['server_cpu']}, load avg at start {m['loadavg_start'][0]:.2f}; "
          f"median [min-max] of {REPEATS} reps)")
    idle = result["idle_loop_lag"]
    print(f"idle event-loop lag ({TICK_S * 1e3:.0f} ms ticker): p50 {idle['p50_s'] * 1e3:.2f} ms,"
          f" p99 {idle['p99_s'] * 1e3:.2f} ms")
    print(f"\n(a) throughput, interval 0, {THROUGHPUT_TOKENS} chunks/request")
    print(f"{'conc':>5} {'chunks/s':>22} {'req/s':>16} {'client CPU':>16} {'us CPU/chunk':>16}"
          f" {'server CPU':>16} {'TCP conn/req':>16} {'loop lag p99 ms':>20}")
    for lv in result["throughput"]:
        flag = "  SERVER-BOUND" if lv["server_bound"] else ""
        print(f"{lv['concurrency']:>5} {_fmt(lv['chunks_per_s'], 1):>22} "
              f"{_fmt(lv['requests_per_s'], 1):>16} {_fmt(lv['client_cpu_share'], 100):>15}% "
              f"{_fmt(lv['client_cpu_s_per_chunk'], 1e6, 1):>16} "
              f"{_fmt(lv['server_cpu_share'], 100):>15}% "
              f"{_fmt(lv['tcp_connections_per_request'], 1, 2):>16} "
              f"{_fmt(lv['loop_lag_p99_s'], 1e3, 2):>20}{flag}")
    print(f"\n(b) timing error, server TTFT {TIMING_TTFT_S * 1e3:.0f} ms, ITL "
          f"{TIMING_ITL_S * 1e3:.0f} ms, {TIMING_TOKENS} chunks/request; microseconds")
    rows = (("itl_err", "ITL error: client gap - server send gap"),
            ("recv_minus_send", "receive - send latency, per chunk"),
            ("ttft_err", "TTFT error: client - server-side TTFT"),
            ("request_upload", "request upload: client start - arrival"),
            ("server_itl_jitter", "server's own ITL - nominal (not client)"),
            ("loop_lag", "client event-loop lag"))
    for lv in result["timing"]:
        print(f"  concurrency {lv['concurrency']}, offered {lv['offered_chunks_per_s']:.0f} "
              f"chunks/s\n    {'':<44}{'p50':>26}{'p99':>26}")
        for key, title in rows:
            print(f"    {title:<44}{_fmt(lv[key + '_p50_s'], 1e6):>26}"
                  f"{_fmt(lv[key + '_p99_s'], 1e6):>26}")
    bad = sum(lv["bad_requests"] for lv in result["throughput"] + result["timing"])
    if bad:
        print(f"\nWARNING: {bad} requests failed or came back short; see the JSON")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(
        os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench")) / "loadgen_results.json")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + TIME_BUDGET_S
    if time.get_clock_info("perf_counter").implementation != \
            time.get_clock_info("monotonic").implementation:
        print("note: perf_counter is not the monotonic clock here; receive - send is meaningless",
              file=sys.stderr)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    client_cpu, server_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    pinned = pin_to_cpu(client_cpu)
    meta = {"python": sys.version.split()[0], "platform": platform.platform(),
            "cpus_available": cpus, "client_cpu": client_cpu if pinned else "unpinned",
            "server_cpu": server_cpu if server_cpu is not None else "unpinned",
            "clock": time.get_clock_info("perf_counter").implementation,
            "loadavg_start": os.getloadavg(), "httpx": httpx.__version__}
    print(f"load generator benchmark: client on CPU {meta['client_cpu']}, fast server on CPU "
          f"{meta['server_cpu']}", flush=True)
    with start_server(cpu=server_cpu) as server:
        idle = idle_loop_lag()
        throughput = bench_throughput(server, THROUGHPUT_LEVELS, deadline)
        timing = bench_timing(server, TIMING_LEVELS, deadline)
    meta["loadavg_end"] = os.getloadavg()
    meta["duration_s"] = time.monotonic() - t_start
    result = {"meta": meta, "idle_loop_lag": idle, "throughput": throughput, "timing": timing}
    print_report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(_no_nan(result), indent=2))
    print(f"\nwrote {args.out} ({meta['duration_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
