"""`make bench-cluster`: the cluster flow at full scale on this machine's real llama-server and
SmolLM2. An optimize run like tests/flows/conftest.py's (the fake hub, a reduced request count)
is accepted, then served as 1, 2 and 3 replicas (one thread each on 2 cores: the third shares
a core, and the plan's validation shows what that costs) behind vllm-router and sglang-router
with every policy each has, on the session workload and the one without shared prefixes; the
SLO boundary is searched for each count and the capacity plan calibrated on one replica is
validated against the other two.

Printed: each count's boundary interval, the router table's headline per router and policy,
the plan's predictions and its validation errors. Results go to
$INFOPT_BENCH_OUT/cluster_bench.json and the run folder's cluster.md is copied beside it
(default /tmp/infopt-bench), never into the checkout. About 15-25 min on 2 cores."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

SLO = {"metric": "ttft", "percentile": 90, "max_s": 1.0}


def main() -> int:
    from prefect.testing.utilities import prefect_test_harness

    from bench.verdicts_bench import _optimize
    from flows.cluster import cluster
    from infopt.runs.accepted import accept
    from infopt.specs.cluster import ClusterRequest

    out = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="infopt-cluster-") as tmp, \
            prefect_test_harness(server_startup_timeout=180):
        runs = Path(tmp) / "runs"
        t0 = time.perf_counter()
        report = _optimize(runs)
        accept(runs, report.run_id, by="bench-cluster")
        print(f"[bench-cluster] optimize run {report.run_id}: {time.perf_counter() - t0:.0f} s",
              flush=True)
        t0 = time.perf_counter()
        result = cluster(request=ClusterRequest(slos=[SLO], replica_counts=[1, 2, 3],
                                                threads_per_replica=1),
                         runs_dir=str(runs))
        wall = time.perf_counter() - t0
        shutil.copy(runs / result.run_id / "cluster.md", out / "cluster_bench.md")
    for n, b in sorted(result.boundaries.items()):
        print(f"[bench-cluster] {n} replica(s) ({result.boundary_routes[n]}): meets up to "
              f"{b.meets_up_to_rate_per_s} requests/s, misses from {b.misses_from_rate_per_s} "
              f"({b.measurements} probes, {b.shape})")
    for r in result.routers:
        print(f"[bench-cluster] {r.router} {r.policy:12s} {r.workload:8s} "
              + (f"failed: {r.failed}" if r.failed else
                 f"{r.output_tokens_per_s:7.1f} tok/s  TTFT p95 {r.ttft_p95_s:.3f} s  "
                 f"prefix hits {r.prefix_hit_ratio or 0:.0%}  per replica "
                 f"{[e.requests_routed for e in r.evidence]}"))
    plan = result.plan
    if plan is not None:
        print(f"[bench-cluster] plan (estimate): {plan.replicas} replica(s) for "
              f"{plan.peak_rate_per_s:.3g} requests/s")
        for v in plan.validations:
            print(f"[bench-cluster] validation {v.replicas} replica(s): predicted "
                  f"{v.predicted_rate_per_s:.3g}, measured {v.measured_meets_up_to_rate_per_s}"
                  f" / {v.measured_misses_from_rate_per_s}, error "
                  f"{'—' if v.error is None else f'{v.error:+.0%}'}")
    (out / "cluster_bench.json").write_text(json.dumps(
        {"wall_s": wall, "report": result.model_dump(mode="json")}, indent=2))
    print(f"[bench-cluster] {wall:.0f} s; results: {out / 'cluster_bench.json'}, "
          f"{out / 'cluster_bench.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
