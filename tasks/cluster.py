"""The cluster flow's measuring steps as tasks: a boundary search against one endpoint (a
replica or a router), and one router-and-policy comparison over running replicas."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.cluster.boundary import probe_from, search_boundary, with_light_probe
from infopt.cluster.evidence import router_failed, router_head, router_row
from infopt.cluster.fleet import greedy_identity, measure_through, router, router_endpoint
from infopt.cluster.interference import interference_sample
from infopt.cluster.routers import Policy, RouterKind
from infopt.cluster.workloads import (
    comparison_traffic,
    long_prompt_tokens,
    long_prompt_traffic,
    probe_traffic,
)
from infopt.contract.openai_chat import BASE_REQUIRED
from infopt.contract.verify import verify_endpoint
from infopt.engines import endpoint_for
from infopt.loadgen.measure import measure
from infopt.loadgen.tokens import prompt_counter
from infopt.quality.prompts import FIDELITY_PROMPTS
from infopt.specs.cluster import Boundary, InterferenceSample, Probe, RouterRun
from infopt.specs.endpoint import Endpoint
from infopt.specs.results import RunningEngine
from infopt.specs.traffic import Slo, TrafficSpec


@task(name="slo-boundary", cache_policy=NO_CACHE)
def boundary_search(endpoint: Endpoint, replica: RunningEngine, model: str, base: TrafficSpec,
                    slos: list[Slo], start_rate_per_s: float, probe_requests: int,
                    max_probes: int, max_input_tokens: int, label: str) -> Boundary:
    """The highest Poisson rate `endpoint` serves within the SLOs (prompts counted by the
    replica's own tokenizer route)."""
    log = get_run_logger()
    seeds = iter(range(base.seed + 1000, base.seed + 1000 + 4 * max_probes))
    with httpx.Client(timeout=30.0) as client:
        counter = prompt_counter(client, endpoint_for(replica.engine, replica.base_url, model),
                                 None)

        def measure_at(rate: float) -> Probe:
            traffic = probe_traffic(base, rate, probe_requests, slos, next(seeds))
            scenario, records = measure(endpoint, traffic, out_dir=None,
                                        max_input_tokens=max_input_tokens, counter=counter)
            p = probe_from(rate, scenario, records)
            log.info("%s: %.3g requests/s offered, %.3g served, goodput %.3g: %s (%s)", label,
                     rate, p.achieved_requests_per_s, p.goodput_requests_per_s,
                     p.verdict.value, p.why)
            return p
        b = search_boundary(measure_at, start_rate_per_s, max_probes=max_probes)
        b = with_light_probe(b, measure_at)
    log.info("%s: meets the SLOs up to %s requests/s, misses from %s (%d probes, %s)", label,
             b.meets_up_to_rate_per_s, b.misses_from_rate_per_s, b.measurements, b.shape)
    return b


@task(name="router-comparison", cache_policy=NO_CACHE)
def compare_router(kind: RouterKind, policy: Policy, running: list[RunningEngine], model: str,
                   traffic: TrafficSpec, max_input_tokens: int, log_dir: str,
                   required: tuple[str, ...] = ()) -> RouterRun:
    """One router and policy in front of the replicas: the API contract through it, then the
    scenario, with each replica's evidence from the router's and the engines' counters."""
    head = router_head(kind, policy, len(running), traffic.name)
    log = Path(log_dir) / f"{kind.name}-{policy.value}-{traffic.name}.log"
    try:
        with router(kind, policy, [r.base_url for r in running], log) as r:
            checks = verify_endpoint(router_endpoint(r, running[0].engine, model),
                                     required=required,
                                     features=tuple(dict.fromkeys((*BASE_REQUIRED, *required))))
            same, detail = greedy_identity(r.base_url, running[0].base_url, model,
                                           FIDELITY_PROMPTS)
            result, _, evidence = measure_through(r, running, model, traffic,
                                                  max_input_tokens=max_input_tokens,
                                                  out_dir=None)
    except Exception as exc:  # noqa: BLE001 - a router that fails is a row, not a crash
        return router_failed(head, exc)
    return router_row(head, result, evidence, checks, same, detail)


@task(name="pd-interference", cache_policy=NO_CACHE)
def measure_interference(replica: RunningEngine, model: str, base: TrafficSpec,
                         concurrency: int, requests: int, max_input_tokens: int
                         ) -> InterferenceSample:
    """The target load's decode ITL alone, then again with long prompts sent beside it (a
    second client on its own thread over the same replica): judge_interference's inputs."""
    endpoint = endpoint_for(replica.engine, replica.base_url, model, replica.pid)
    decode = comparison_traffic(base, sessions=None, prefix_tokens=0, requests=requests,
                                concurrency=concurrency, seed=base.seed + 11)
    long = long_prompt_traffic(decode, max_input_tokens)
    with httpx.Client(timeout=30.0) as client, ThreadPoolExecutor(max_workers=1) as pool:
        counter = prompt_counter(client, endpoint, None)  # uses `client`: measure inside
        alone, _ = measure(endpoint, decode, out_dir=None, max_input_tokens=max_input_tokens,
                           counter=counter)
        beside = pool.submit(measure, endpoint, long, out_dir=None,
                             max_input_tokens=max_input_tokens, counter=counter)
        mixed, _ = measure(endpoint, decode, out_dir=None, max_input_tokens=max_input_tokens,
                           counter=counter)
        long_result, _ = beside.result()
    long_tokens = long_prompt_tokens(max_input_tokens)
    get_run_logger().info("decode ITL p95 %s s alone, %s s with %d-token prompts beside it",
                          alone.level.itl_s.p95, mixed.level.itl_s.p95, long_tokens)
    return interference_sample(alone, mixed, long_result, long_tokens)
