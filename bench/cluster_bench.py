"""`make bench-cluster`: the cluster flow at full scale on this machine's real llama-server and
SmolLM2. An optimize run like tests/flows/conftest.py's (the fake hub, a reduced request count)
is accepted, then served as 1, 2 and 3 replicas (one thread each on 2 cores by default: the
third shares a core) behind vllm-router and sglang-router with every policy each has, on the
session workload and the one without shared prefixes; the SLO boundary is searched for each
count (until its bracket is within 15% or the search says why not) and the capacity plan
calibrated on one replica is set beside the other two.

Out of sample (issue 47): `--record NAME` keeps this run's probes as
tests/fixtures/cluster/NAME.json; `--calibrate-from FIXTURE.json` predicts this run's
boundaries from the model calibrated on a recorded run, without refitting
(infopt.cluster.recorded); `--threads-per-replica N` and `--prompt-tokens N` give the replicas
another shape. The error is predicted / the bracket's reference rate - 1 (its geometric middle,
or the rate left undecided inside it), the bracket's width beside it.

Printed: each count's boundary interval, the router table's headline per router and policy,
the plan's predictions and its errors. Results go to $INFOPT_BENCH_OUT/cluster_bench[-NAME].json
and the run folder's cluster.md is copied beside it (default /tmp/infopt-bench); only --record
writes into the checkout. About 25-35 min on 2 cores at the defaults (1,534 and ~2,000 s
measured before the bracket narrowing; narrowing adds a few probes a count)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLO = {"metric": "ttft", "percentile": 90, "max_s": 1.0}
PROMPT_TOKENS = 48  # the optimize run's workload (bench.verdicts_bench._optimize)
OUTPUT_TOKENS = 16
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cluster"


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.cluster_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--record", metavar="NAME",
                   help="write this run's boundary probes to tests/fixtures/cluster/NAME.json")
    p.add_argument("--calibrate-from", metavar="FIXTURE", type=Path,
                   help="a recorded run (tests/fixtures/cluster/*.json): predict this run's "
                        "boundaries from the model calibrated on it, without refitting")
    p.add_argument("--threads-per-replica", type=int, default=1, metavar="N")
    p.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS, metavar="N",
                   help="the optimize run's prompt length, which the boundary probes keep")
    p.add_argument("--probe-requests", type=int, default=40, metavar="N",
                   help="measured requests a boundary probe (more: narrower undecided bands)")
    p.add_argument("--max-probes", type=int, default=15, metavar="N",
                   help="the boundary search's budget a replica count")
    args = p.parse_args(argv)
    if args.record is not None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.record):
            p.error(f"--record {args.record!r}: a file name (letters, digits, . _ -)")
        if (FIXTURES / f"{args.record}.json").exists():
            p.error(f"--record {args.record}: tests/fixtures/cluster/{args.record}.json "
                    "exists; choose another name (a fixture is never overwritten)")
    if args.calibrate_from is not None and not args.calibrate_from.is_file():
        p.error(f"--calibrate-from {args.calibrate_from}: no such file")
    return args


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=FIXTURES).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _recorded(args: argparse.Namespace, argv: list[str], stored, result):
    """This run's boundary probes and shape, as a fixture records them."""
    from flows.cluster import _slots
    from infopt.cluster.recorded import RecordedRun

    host, plan = stored.hardware.host, result.plan
    first = result.boundaries[1].probes[0].rate_per_s if result.boundaries[1].probes else None
    slo = ", ".join(f"{s.metric.value.upper()} p{s.percentile} <= {s.max_s:g} s"
                    for s in result.slos)
    source = (f"python -m bench.cluster_bench {' '.join(argv)}".rstrip()
              + f", {host.cpu_model}, {host.usable_cpus} usable CPUs, "
              f"{time.strftime('%Y-%m-%d %H:%M')}, commit {_commit()}: {result.engine} "
              f"{result.engine_version} `{result.winner_command}` "
              f"({args.threads_per_replica} thread(s) a replica), {args.prompt_tokens} prompt + "
              f"{OUTPUT_TOKENS} output tokens, SLO {slo}, {args.probe_requests} requests a "
              f"probe; larger counts behind {result.boundary_routes.get(2, '—')}")
    return RecordedRun(
        source=source, slots=plan.model.slots if plan else _slots(stored), slos=result.slos,
        start_rate_per_s=first, host_cores=host.usable_cpus,
        threads_per_replica=args.threads_per_replica, prompt_tokens=args.prompt_tokens,
        output_tokens=OUTPUT_TOKENS, probe_requests=args.probe_requests,
        routing=plan.routing if plan else "pooled", boundaries=result.boundaries)


def _validation_line(v) -> str:
    lo, hi = v.measured_meets_up_to_rate_per_s, v.measured_misses_from_rate_per_s
    width = "—" if v.bracket_width is None else f"{v.bracket_width:.0%} wide"
    ref = "—" if v.measured_reference_rate_per_s is None else \
        f"{v.measured_reference_rate_per_s:.3g} ({v.reference})"
    err = "—" if v.error is None else f"{v.error:+.0%}"
    return (f"{v.replicas} replica(s): predicted {v.predicted_rate_per_s:.3g}, measured "
            f"[{lo if lo is None else f'{lo:.3g}'}, {hi if hi is None else f'{hi:.3g}'}] "
            f"({width}), against {ref}: error {err}"
            + (" (in-sample: the one-replica bracket the wait stretch was fitted to)"
               if v.in_sample else ""))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _args(argv)
    from prefect.testing.utilities import prefect_test_harness

    from bench.verdicts_bench import _optimize
    from flows.cluster import cluster
    from infopt.cluster.recorded import load_run, predict_held_out, write_run
    from infopt.runs.accepted import accept
    from infopt.specs.cluster import ClusterRequest

    calibration = load_run(args.calibrate_from) if args.calibrate_from else None
    out = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench"))
    out.mkdir(parents=True, exist_ok=True)
    stem = f"cluster_bench-{args.record}" if args.record else "cluster_bench"
    with tempfile.TemporaryDirectory(prefix="infopt-cluster-") as tmp, \
            prefect_test_harness(server_startup_timeout=180):
        runs = Path(tmp) / "runs"
        t0 = time.perf_counter()
        stored = _optimize(runs, input_tokens=args.prompt_tokens)
        accept(runs, stored.run_id, by="bench-cluster")
        print(f"[bench-cluster] optimize run {stored.run_id}: {time.perf_counter() - t0:.0f} s",
              flush=True)
        t0 = time.perf_counter()
        result = cluster(request=ClusterRequest(
            slos=[SLO], replica_counts=[1, 2, 3], threads_per_replica=args.threads_per_replica,
            probe_requests=args.probe_requests, max_probes=args.max_probes), runs_dir=str(runs))
        wall = time.perf_counter() - t0
        shutil.copy(runs / result.run_id / "cluster.md", out / f"{stem}.md")
    for n, b in sorted(result.boundaries.items()):
        print(f"[bench-cluster] {n} replica(s) ({result.boundary_routes[n]}): meets up to "
              f"{b.meets_up_to_rate_per_s} requests/s, misses from {b.misses_from_rate_per_s} "
              f"({b.measurements} probes, {b.shape})" + "".join(f"\n    {x}" for x in b.notes))
    for r in result.routers:
        print(f"[bench-cluster] {r.router} {r.policy:12s} {r.workload:8s} "
              + (f"failed: {r.failed}" if r.failed else
                 f"{r.output_tokens_per_s:7.1f} tok/s  TTFT p95 {r.ttft_p95_s:.3f} s  "
                 f"prefix hits {r.prefix_hit_ratio or 0:.0%}  per replica "
                 f"{[e.requests_routed for e in r.evidence]}"))
    plan = result.plan
    if plan is not None:
        print(f"[bench-cluster] plan (estimate): {plan.replicas} replica(s) for "
              f"{plan.peak_rate_per_s:.3g} requests/s; {plan.model.calibrated_from}")
        for v in plan.validations:
            print(f"[bench-cluster] this run's own calibration, {_validation_line(v)}")
    record = _recorded(args, argv, stored, result)
    held: list = []
    if calibration is not None:
        name = args.calibrate_from.stem
        modes = ["remeasured"] + (["transferred"] if calibration.shape() == record.shape()
                                  else [])
        for mode in modes:
            try:
                h = predict_held_out(calibration, record, mode=mode, calibration_name=name,
                                     held_out_name=args.record or "this run")
            except ValueError as exc:
                print(f"[bench-cluster] out of sample ({mode}): not predicted: {exc}")
                continue
            held.append(h)
            print(f"[bench-cluster] out of sample, calibrated on {name} ({mode}): "
                  f"{h.model.calibrated_from}")
            for v in h.validations:
                print(f"[bench-cluster]   {_validation_line(v)}")
    if args.record:
        path = write_run(record, FIXTURES / f"{args.record}.json")
        print(f"[bench-cluster] recorded: {path}")
    (out / f"{stem}.json").write_text(json.dumps(
        {"wall_s": wall, "argv": argv, "report": result.model_dump(mode="json"),
         "out_of_sample": [h.model_dump(mode="json") for h in held]}, indent=2))
    print(f"[bench-cluster] {wall:.0f} s; results: {out / f'{stem}.json'}, {out / f'{stem}.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
