"""The `cluster` flow: how many replicas of the accepted configuration, behind which router,
serve this traffic within these SLOs.

One replica's SLO boundary is searched directly (Poisson arrivals, the accepted run's lengths);
for each larger replica count, every router and policy asked for runs the API contract and a
session workload and one without shared prefixes, with each replica's requests and prefix-cache
hits from the routers' and engines' own counters; the boundary is searched again behind the
first router's load-aware policy (round robin where it has none). The capacity plan is a
queueing model calibrated on the one-replica boundary, its predictions for the larger counts
beside their measured boundaries (the error against each bracket's reference rate, the
bracket's width beside it; the one-replica count is the fit, labelled in-sample). Replicas and
routers bind 127.0.0.1 only.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from blocks.credentials import troubleshooting
from infopt.cluster.capacity import calibrate, plan, validate
from infopt.cluster.fleet import replicas, router, router_endpoint
from infopt.cluster.helm import cluster_values
from infopt.cluster.interference import judge_interference
from infopt.cluster.routers import Policy, RouterKind, router_kind
from infopt.cluster.workloads import comparison_traffic, replica_config
from infopt.contract.verify import required_for
from infopt.engines import adapter_for, endpoint_for, process, registry
from infopt.engines.launch import launch_for
from infopt.report.cluster_plots import write_cluster_plots
from infopt.report.cluster_text import render_cluster
from infopt.runs.accepted import accepted, load_optimization
from infopt.runs.rundir import atomic_write, new_run_id, runs_root
from infopt.specs.base import InputError
from infopt.specs.cluster import (
    Boundary,
    ClusterReport,
    ClusterRequest,
    HelmValues,
    Interference,
    InterferenceSample,
    RouterRun,
    Routing,
)
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport, RunningEngine
from tasks.cluster import boundary_search, compare_router, measure_interference


def _stop_engines_hook(flow, flow_run, state) -> None:
    process.stop_all()


def _start_rate(stored: OptimizationReport, request: ClusterRequest) -> float:
    """Half the rate the winner served at the target load (where the search starts)."""
    if request.start_rate_per_s:
        return request.start_rate_per_s
    winner = next((t for t in stored.trials if t.trial_id == stored.winner_trial_id), None)
    if winner is not None and winner.benchmark is not None:
        level = winner.benchmark.scenario(stored.workload.target_scenario).level
        if level.requests_per_s > 0:
            return level.requests_per_s / 2
    return 1.0


def _slots(stored: OptimizationReport) -> int:
    """Requests one replica serves at once: its running-request cap as configured, else the
    target load it was tuned for."""
    knob = adapter_for(stored.winner_config.engine).concurrency_knob
    value = getattr(stored.winner_config, knob, None)
    return int(value) if value else stored.workload.target_concurrency


def _gpus_each(stored: OptimizationReport) -> int:
    """GPUs one replica of the winner takes (TP x PP x DP; 0 on a CPU host)."""
    if not stored.hardware.gpus:
        return 0
    knobs = adapter_for(stored.winner_config.engine).layout_knobs
    n = 1
    for name in (knobs.tp, knobs.pp, knobs.dp) if knobs else ():
        n *= int(getattr(stored.winner_config, name, None) or 1) if name else 1
    return n


def _primary(routers: list[RouterKind], policies: list[Policy]) -> tuple[RouterKind, Policy]:
    kind = routers[0]
    for p in (Policy.LOAD_AWARE, Policy.ROUND_ROBIN):
        if p in policies and p in kind.policies:
            return kind, p
    return kind, Policy.ROUND_ROBIN


class _Run:
    """What the flow measures, and where."""

    def __init__(self, request: ClusterRequest, stored: OptimizationReport,
                 stored_request: OptimizeRequest, run_dir: Path) -> None:
        self.request, self.stored, self.run_dir = request, stored, run_dir
        self.stored_request = stored_request
        self.slos = request.slos or stored.workload.traffic.slos
        if not self.slos:
            raise InputError("the cluster flow searches the highest rate within SLOs: give "
                             "`slos` (e.g. [{metric: ttft, percentile: 90, max_s: 1.0}]), or "
                             "accept a run whose workload states them")
        self.model = stored.winner_config.served_model_name
        self.base = stored.workload.traffic
        self.required = required_for([str(r) for r in stored_request.api.routes],
                                     stored_request.api.features)
        self.max_input = stored.model.native_context_tokens
        self.routers = [router_kind(r) for r in request.routers]
        self.policies = [Policy(p) for p in request.policies]
        cpus = stored.hardware.host.usable_cpus
        self.threads = request.threads_per_replica or (
            max(1, cpus // max(request.replica_counts)) if not stored.hardware.gpus else None)
        self.gpus_each = _gpus_each(stored)
        self.boundaries: dict[int, Boundary] = {}
        self.routes: dict[int, str] = {}
        self.runs: list[RouterRun] = []
        self.interference: InterferenceSample | None = None
        self.notes: list[str] = []

    def boundary(self, endpoint, replica: RunningEngine, label: str) -> Boundary:
        r = self.request
        return boundary_search(endpoint, replica, self.model, self.base, self.slos,
                               _start_rate(self.stored, r), r.probe_requests, r.max_probes,
                               self.max_input, label)

    def compare(self, running: list[RunningEngine], log_dir: Path) -> None:
        r, n = self.request, len(running)
        workloads = [comparison_traffic(self.base, sessions=s, prefix_tokens=r.session_prefix_tokens,
                                        requests=r.comparison_requests,
                                        concurrency=self.stored.workload.target_concurrency * n,
                                        seed=self.base.seed + 7) for s in (r.session_groups, None)]
        for kind in self.routers:
            for policy in self.policies:
                if policy not in kind.policies:
                    note = f"{kind.name} {kind.version} has no {policy.value} policy: not measured"
                    if note not in self.notes:
                        self.notes.append(note)
                    continue
                for traffic in workloads:
                    self.runs.append(compare_router(kind, policy, running, self.model, traffic,
                                                    self.max_input, str(log_dir),
                                                    self.required))

    def measure_count(self, n: int) -> None:
        cfg = replica_config(self.stored.winner_config, self.threads)
        log_dir = self.run_dir / f"replicas-{n}"
        with replicas(cfg, n, log_dir, self.stored.model.file_bytes,
                      gpus_per_replica=self.gpus_each,
                      troubleshoot=troubleshooting(self.stored_request),
                      log=get_run_logger()) as running:
            if n == 1:
                ep = endpoint_for(running[0].engine, running[0].base_url, self.model,
                                  running[0].pid)
                self.boundaries[1] = self.boundary(ep, running[0], "1 replica")
                self.routes[1] = "direct (no router)"
                if _slots(self.stored) < 2:
                    self.notes.append(
                        "prefill/decode interference not measured: the replica serves one "
                        "request at a time (one slot), so a long prompt never shares a step "
                        "with decoding; it delays the queue instead, which the SLO boundary "
                        "measures")
                else:
                    self.interference = measure_interference(
                        running[0], self.model, self.base,
                        self.stored.workload.target_concurrency,
                        self.request.comparison_requests, self.max_input)
                return
            self.compare(running, log_dir)
            kind, policy = _primary(self.routers, self.policies)
            with router(kind, policy, [e.base_url for e in running],
                        log_dir / f"{kind.name}-{policy.value}-boundary.log") as rt:
                self.boundaries[n] = self.boundary(router_endpoint(rt, running[0].engine,
                                                                   self.model), running[0],
                                                   f"{n} replicas")
            self.routes[n] = (f"{kind.name} {kind.version}, {policy.value} "
                              f"(--policy {kind.policy_name(policy)})")


@flow(name="cluster", on_failure=[_stop_engines_hook], on_crashed=[_stop_engines_hook],
      on_cancellation=[_stop_engines_hook])
def cluster(request: ClusterRequest | None = None, runs_dir: str | None = None,
            run_id: str | None = None) -> ClusterReport:
    """Replicas of the accepted configuration behind real routers: the SLO boundary, the
    router table and the capacity plan, in runs/<run-id>/cluster.md."""
    log = get_run_logger()
    request = request or ClusterRequest()
    registry.reap_stale()
    root = runs_root(runs_dir)
    base_id = request.baseline_run or accepted(root).run_id
    stored, stored_request = load_optimization(root / base_id)
    run_id = run_id or f"cluster-{new_run_id()}"
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(run_dir / "cluster-request.json", request.model_dump_json(indent=2))
    m = _Run(request, stored, stored_request, run_dir)
    for n in request.replica_counts:
        log.info("measuring %d replica(s) of %s", n, stored.winner_label)
        m.measure_count(n)
    report = _report(m, run_id, base_id)
    report = report.model_copy(update={"plots": write_cluster_plots(report, run_dir)})
    md = render_cluster(report)
    atomic_write(run_dir / "cluster.json", report.model_dump_json(indent=2))
    atomic_write(run_dir / "cluster.md", md)
    create_markdown_artifact(markdown=md, key="infopt-cluster",
                             description=f"cluster plan {run_id} from {base_id}")
    log.info("cluster %s: %s", run_id, run_dir / "cluster.md")
    return report


def _report(m: _Run, run_id: str, base_id: str) -> ClusterReport:
    r, s = m.request, m.stored
    capacity = None
    try:
        cpu = not s.hardware.gpus
        model = calibrate(m.boundaries[1], _slots(s), m.slos,
                          host_cores=s.hardware.host.usable_cpus if cpu else None,
                          threads_per_replica=m.threads if cpu else None)
    except ValueError as exc:
        m.notes.append(f"no capacity plan: {exc}")
    else:
        measured_top = max((b.meets_up_to_rate_per_s or 0.0) for b in m.boundaries.values())
        target = r.target_rate_per_s or measured_top or 1.0
        _, policy = _primary(m.routers, m.policies)
        routing: Routing = "pooled" if policy is not Policy.ROUND_ROBIN else "split"
        capacity = plan(model, m.slos, target, burst_factor=r.burst_factor, routing=routing,
                        gpus_per_replica=m.gpus_each or 0)
        capacity = capacity.model_copy(update={
            # The wait stretch was fitted to this run's one-replica bracket: in-sample there.
            "validations": validate(model, m.slos, m.boundaries, routing, in_sample={1})})
    interference = judge_interference(
        m.interference, capacity.peak_rate_per_s if capacity else None) \
        if m.interference else None
    if m.interference and interference is None:
        m.notes.append("prefill/decode interference not judged: no streamed ITL measured")
    helm = _helm(m, capacity, interference) if capacity is not None and capacity.replicas \
        else []
    return ClusterReport(
        run_id=run_id, created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), baseline_run=base_id,
        engine=s.engine, engine_version=s.engine_version, winner_command=s.winner_command,
        slos=m.slos, boundaries=m.boundaries, boundary_routes=m.routes, routers=m.runs,
        plan=capacity, helm=helm, interference=interference, notes=m.notes)


# A replica's container serves on this port (any free port works; the charts map it).
CONTAINER_PORT = 8000


def _best_policy(runs: list[RouterRun]) -> str:
    """The policy with the lowest TTFT p95 on the session workload (round robin if none)."""
    ok = [r for r in runs if r.workload == "sessions" and not r.failed
          and r.ttft_p95_s is not None]
    return min(ok, key=lambda r: r.ttft_p95_s or 0.0).policy if ok else "round_robin"


def _downloaded(stored: OptimizationReport) -> bool:
    """The accepted run downloaded its weights under an approved download gate."""
    return any(a.approved and a.kind == "download" for a in stored.approvals)


def _helm(m: _Run, capacity, interference: Interference | None) -> list[HelmValues]:
    s = m.stored
    adapter = adapter_for(s.winner_config.engine)
    if not adapter.container_image or not adapter.container_executable:
        m.notes.append(f"no Helm values: {adapter.display_name} has no Linux container image")
        return []
    launch = launch_for(adapter, s.winner_config, adapter.container_executable, CONTAINER_PORT)
    deploy = m.request.deploy or m.stored_request.deploy
    pools = interference is not None and interference.recommend_pools
    return cluster_values(
        launch, name=re.sub(r"[^a-z0-9-]+", "-", s.winner_config.served_model_name.lower())
        .strip("-")[:40] or "model", image=adapter.container_image,
        replicas=capacity.replicas, gpus=m.gpus_each, cpus=m.threads or 1,
        memory_gib=int(s.model.file_bytes / 2**30) + 4, policy=_best_policy(m.runs),
        prefill_replicas=interference.prefill_replicas if interference and pools else None,
        why_no_prefill=None if pools else (interference.why if interference else
                                           "prefill/decode interference was not measured"),
        model=deploy.source(m.stored_request.model.hub_id, m.stored_request.model.revision,
                            downloaded=_downloaded(s)),
        token=deploy.token())
