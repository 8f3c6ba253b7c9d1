"""Can infopt's load generator hold 1,000 concurrent streams? Run by `make bench-load` (and by
`make bench`): python -m bench.load_bench; about 30 s on 2 cores.

Against bench/fast_server.py on 127.0.0.1, the real measurement path (`runner.run_schedule`, the
summary and monitors `measure()` uses, less its parquet and validation) runs a closed loop of
STREAMS workers. Every request asks the server (x_hold_until_streams) to hold its first chunk
until STREAMS streams are open at once, so the server's count of simultaneously open streams
proves they were held together, whatever the client's start-up speed. Per run it reports:
  streams held    the most streamed responses the server had open at once (/stats);
  records lost    requests planned - records returned (request ids matched one to one), and the
                  server's request count against the records;
  peak RSS        the client process's VmHWM over the measured phase (reset at its start), in
                  MiB; each run is a fresh client process, so nothing of an earlier run is in it;
  client-bound    the flag the measurement path sets and its reason
                  (infopt.loadgen.monitor.client_bound_reason: the client's loop thread at
                  >= 80% of a core, or its loop lag p99 at >= the ITL p50 it measured),
                  with its evidence: the client's event-loop lag p99, CPU share and time spent
                  waiting for a core other processes held (a crowded machine), the server's
                  CPU share (a server near a full core would be the bottleneck instead), and
                  the ITL the client saw against the server's fixed cadence;
  throughput      requests/s and streamed tokens/s over the measured phase.
Two run lengths (SHORT and LONG requests per stream) show whether memory grows with the run:
the difference in peak RSS per extra request should be about what one request holds (its plan,
prompt and job, made before the clock starts, and its record), nothing per stream. A first,
control run of CONTROL_STREAMS streams, which one core keeps up with, shows the ITL at the
server's cadence, a client CPU share near 10% and a loop lag p99 of a few ms (up to ~15 ms on a
crowded machine: streams the server released together end together, and each next request
costs the loop ~0.5-1 ms), well under the 50 ms ITL, so its flag stays down; at 1,000 streams
the lag is hundreds of ms to seconds against an ITL p50 the bursts shrink to near zero.

The client runs pinned to one core and the server to another where two are available.
Results go to $INFOPT_BENCH_OUT/load_results.json (default /tmp/infopt-bench), never into the
checkout. Units: seconds and bytes inside, ms and MiB in the printed table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.fast_server import FastServer, pin_to_cpu, start_server

STREAMS = 1000
SERVER_ITL_S = 0.05  # the server's cadence once a stream is released
OUTPUT_TOKENS = 16
SHORT, LONG = 2, 8  # requests per stream in the two runs
# A control that one core keeps up with (320 chunks/s): the ITL stays at the server's cadence.
CONTROL_STREAMS, CONTROL_PER_STREAM = 16, 4
INPUT_TOKENS = 16
MIB = 1024 * 1024
CHILD_TIMEOUT_S = 300.0


def measure_streams(base_url: str, server_pid: int | None, streams: int, per_stream: int,
                    output_tokens: int) -> dict[str, Any]:
    """One closed-loop run of `streams` workers, `per_stream` requests each, in this process."""
    from infopt.loadgen.runner import run_schedule
    from infopt.loadgen.schedule import Phase, build_schedule
    from infopt.loadgen.summary import summarize_level, with_monitors
    from infopt.specs.endpoint import Endpoint
    from infopt.specs.traffic import TrafficSpec

    spec = TrafficSpec(name="streams", arrival={"kind": "closed_loop", "concurrency": streams},
                       input_lengths={"kind": "fixed", "tokens": INPUT_TOKENS},
                       output_lengths={"kind": "fixed", "tokens": output_tokens},
                       warmup_requests=0, measured_requests=streams * per_stream)
    planned = build_schedule(spec, seed=spec.seed, max_input_tokens=4 * INPUT_TOKENS)
    endpoint = Endpoint(base_url=base_url, model="fast-server", pid=server_pid,
                        forced_fields=lambda n: {"max_tokens": n, "ignore_eos": True,
                                                 "x_hold_until_streams": streams})
    stats = f"{base_url}/stats"
    before = httpx.get(f"{stats}?reset=1").json()
    phase = run_schedule(endpoint, planned, streams, seed=spec.seed)
    after = httpx.get(stats).json()
    level = with_monitors(summarize_level(phase.records, streams, phase.wall_s), phase)
    ids = [r.request_id for r in phase.records]
    wanted = {r.request_id for r in planned if r.phase is Phase.MEASURED}
    client = phase.client
    return {
        "streams": streams, "requests_per_stream": per_stream, "output_tokens": output_tokens,
        "requests_planned": len(wanted), "records": len(ids),
        "records_duplicated": len(ids) - len(set(ids)),
        "records_lost": len(wanted - set(ids)),
        "errors": level.errors, "reconnects": sum(r.reconnects for r in phase.records),
        "server_requests": after["requests"] - before["requests"],
        "streams_held": after["streams_peak"],
        "wall_s": phase.wall_s,
        "requests_per_s": level.requests_per_s,
        "output_tokens_per_s": level.output_tokens_per_s,
        "itl_p50_s": level.itl_s.p50, "ttft_p50_s": level.ttft_s.p50,
        "client_saturated": level.client_saturated,
        "client_bound_reason": level.client_bound_reason,
        "loop_lag_p99_s": client.loop_lag_p99_s,
        "client_cpu_share": client.cpu_share,
        "client_cpu_wait_share": client.cpu_wait_share,
        "server_cpu_share": (after["cpu_s"] - before["cpu_s"]) / phase.wall_s
        if phase.wall_s > 0 else None,
        "rss_start_bytes": client.rss_start_bytes, "rss_peak_bytes": client.rss_peak_bytes,
        "rss_peak_in_phase": client.rss_peak_in_phase,
    }


def run_client(server: FastServer, streams: int, per_stream: int, output_tokens: int,
               cpu: int | None = None, timeout_s: float = CHILD_TIMEOUT_S) -> dict[str, Any]:
    """`measure_streams` in a fresh Python process (its peak RSS is the client's alone)."""
    argv = [sys.executable, "-m", "bench.load_bench", "--client", server.base_url,
            "--server-pid", str(server.process.pid), "--streams", str(streams),
            "--per-stream", str(per_stream), "--output-tokens", str(output_tokens)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=root)
    if out.returncode != 0:
        raise RuntimeError(f"load client failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MIB:.0f}"


def print_report(runs: list[dict[str, Any]], growth_bytes: float | None) -> None:
    print(f"\n{'streams':>8} {'held':>6} {'requests':>9} {'lost':>5} {'errors':>6} "
          f"{'peak RSS MiB':>13} {'client-bound':>13} {'lag p99 ms':>11} {'client CPU':>11} "
          f"{'CPU wait':>9} "
          f"{'server CPU':>11} {'ITL p50 ms':>11} {'req/s':>8} {'tok/s':>8} {'wall s':>7}")
    for r in runs:
        print(f"{r['streams']:>8} {r['streams_held']:>6} {r['records']:>9} "
              f"{r['records_lost']:>5} {r['errors']:>6} {_mib(r['rss_peak_bytes']):>13} "
              f"{'YES' if r['client_saturated'] else 'no':>13} "
              f"{r['loop_lag_p99_s'] * 1e3:>11.0f} {100 * (r['client_cpu_share'] or 0):>10.0f}%"
              f" {100 * (r['client_cpu_wait_share'] or 0):>8.0f}%"
              f" {100 * (r['server_cpu_share'] or 0):>10.0f}% "
              f"{(r['itl_p50_s'] or 0) * 1e3:>11.2f} {r['requests_per_s']:>8.0f} "
              f"{r['output_tokens_per_s']:>8.0f} {r['wall_s']:>7.1f}")
    for r in runs:
        if r.get("client_bound_reason"):
            print(f"client-bound at {r['streams']} streams x {r['requests_per_stream']} "
                  f"requests: {r['client_bound_reason']}")
    if growth_bytes is not None:
        print(f"peak RSS growth with run length: {growth_bytes / 1024:.1f} KiB per extra request "
              "(its planned request, prompt and job, built before the clock starts, and the "
              "record it returns);\nthe streams' own state does not grow with the run")
    print(f"server cadence {SERVER_ITL_S * 1e3:.0f} ms per token: an ITL p50 far from it, with "
          "the server's CPU well under a core, means the client set the pace (client-bound):\n"
          "chunks waited in the socket and were read in bursts, or the client read them late.\n"
          "CPU wait: the share of the run the client's thread waited for a core held by other "
          "processes; a flag with low client CPU and high wait comes from a crowded machine "
          "(its timestamps are late all the same)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(
        os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench")) / "load_results.json")
    ap.add_argument("--client", metavar="BASE_URL", help=argparse.SUPPRESS)  # one client run
    ap.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--streams", type=int, default=STREAMS)
    ap.add_argument("--per-stream", type=int, default=SHORT, help=argparse.SUPPRESS)
    ap.add_argument("--output-tokens", type=int, default=OUTPUT_TOKENS)
    ap.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.client:
        pin_to_cpu(args.cpu)
        result = measure_streams(args.client, args.server_pid, args.streams, args.per_stream,
                                 args.output_tokens)
        print(json.dumps(result))
        return 0

    t0 = time.monotonic()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    client_cpu, server_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    print(f"load benchmark: {args.streams} concurrent streams against the fast server "
          f"(client on CPU {client_cpu}, server on CPU {server_cpu}; load avg "
          f"{os.getloadavg()[0]:.2f})", flush=True)
    runs = []
    plan = ((CONTROL_STREAMS, CONTROL_PER_STREAM), (args.streams, SHORT), (args.streams, LONG))
    with start_server(ttft_s=0.0, itl_s=SERVER_ITL_S, cpu=server_cpu) as server:
        for streams, per_stream in plan:
            r = run_client(server, streams, per_stream, args.output_tokens, client_cpu)
            r["server_itl_s"] = SERVER_ITL_S
            runs.append(r)
            print(f"  {streams} streams x {per_stream} requests: {r['records']} records, "
                  f"{r['records_lost']} lost, peak RSS {_mib(r['rss_peak_bytes'])} MiB",
                  flush=True)
    _, short, long_ = runs
    growth = None
    if short["rss_peak_bytes"] and long_["rss_peak_bytes"]:
        growth = ((long_["rss_peak_bytes"] - short["rss_peak_bytes"])
                  / (long_["records"] - short["records"]))
    print_report(runs, growth)
    bad = [r for r in runs if r["records_lost"] or r["records_duplicated"]
           or r["streams_held"] < r["streams"]]
    result = {"runs": runs, "rss_growth_bytes_per_request": growth,
              "loadavg_end": os.getloadavg(), "duration_s": time.monotonic() - t0}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out} ({result['duration_s']:.0f} s)")
    if bad:
        print("FAILED: records lost or streams not held together; see the JSON", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
