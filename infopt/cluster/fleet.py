"""Replicas of one configuration on loopback, a real router in front of them, and one scenario
measured through the router with the per-replica evidence beside it. The same code drives real
engines here and the simulated GPU engines in tests (each replica is an ordinary engine start).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from infopt.cluster.evidence import replica_evidence
from infopt.cluster.routers import Policy, RouterKind, router_argv
from infopt.engines import adapter_for, endpoint_for, process
from infopt.engines.session import CATALOG_ONLY, LOG, Logger, Troubleshooting, engine_session
from infopt.loadgen.measure import measure
from infopt.loadgen.tokens import prompt_counter
from infopt.specs.cluster import ReplicaEvidence
from infopt.specs.endpoint import Endpoint
from infopt.specs.results import RequestRecord, RunningEngine, ScenarioResult
from infopt.specs.serving import AnyServingConfig
from infopt.specs.traffic import TrafficSpec

ROUTER_READY_S = 60.0  # both routers wait for their workers' health before answering


@dataclass(frozen=True)
class RunningRouter:
    kind: RouterKind
    policy: Policy
    base_url: str
    metrics_url: str
    pid: int
    argv: list[str]
    log_path: str


@contextmanager
def replicas(config: AnyServingConfig, count: int, log_dir: Path, weights_bytes: int,
             executable: str | None = None, gpus_per_replica: int = 0, *,
             troubleshoot: Troubleshooting = CATALOG_ONLY,
             log: Logger = LOG) -> Iterator[list[RunningEngine]]:
    """`count` copies of `config`, each on its own free loopback port and, on a GPU host, its
    own `gpus_per_replica` GPUs (CUDA_VISIBLE_DEVICES, consecutive); all stopped after. Each
    is an engine session (infopt.engines.session): a replica that fails to start is diagnosed
    and given its contract-preserving remedy like any trial's engine."""
    if count < 1:
        raise ValueError("replicas: count must be >= 1")
    executable = executable or adapter_for(config.engine).locate()
    with ExitStack() as stack:
        started = []
        for i in range(count):
            env = dict(config.env)
            if gpus_per_replica:
                first = i * gpus_per_replica
                env["CUDA_VISIBLE_DEVICES"] = ",".join(
                    str(g) for g in range(first, first + gpus_per_replica))
            one = config.model_copy(update={"port": None, "env": env})
            started.append(stack.enter_context(engine_session(
                one, log_dir / f"replica-{i}.log", weights_bytes, troubleshoot=troubleshoot,
                executable=executable, log=log)).running)
        yield started


@contextmanager
def router(kind: RouterKind, policy: Policy, workers: list[str], log_path: Path,
           bin_dir: Path | None = None) -> Iterator[RunningRouter]:
    """The router on free loopback ports, ready (its /health answers); stopped after."""
    port, metrics_port = process.free_port(), process.free_port()
    argv = router_argv(kind, workers, policy, port, metrics_port, bin_dir)
    url = f"http://127.0.0.1:{port}"
    pid = process.start_process(argv, log_path, f"{url}/health", kind.name, ROUTER_READY_S)
    try:
        yield RunningRouter(kind, policy, url, f"http://127.0.0.1:{metrics_port}/metrics", pid,
                            argv, str(log_path))
    finally:
        process.stop(pid)


def _text(url: str) -> str:
    try:
        r = httpx.get(url, timeout=5.0)
    except httpx.HTTPError:
        return ""
    return r.text if r.status_code == 200 else ""


def router_endpoint(r: RunningRouter, engine: str, model: str) -> Endpoint:
    """The router as the load generator sees it: the engine's wire facts (forced lengths,
    stream counts), none of its server-side routes (the router passes on the API only)."""
    return dataclasses.replace(endpoint_for(engine, r.base_url, model), tokenize=None,
                               scoring=None, chat_template=None, spec_counters=None,
                               spec_accept_length_route=None, pid=None)


def measure_through(r: RunningRouter, behind: list[RunningEngine], model: str,
                    traffic: TrafficSpec, *, max_input_tokens: int, out_dir: Path | None,
                    tokenizer_path: str | None = None
                    ) -> tuple[ScenarioResult, list[RequestRecord], list[ReplicaEvidence]]:
    """One scenario through the router; prompts counted by the first replica's tokenizer
    route; the router's and every replica's counters read before and after."""
    engine = behind[0].engine
    counters = adapter_for(engine).prefix_cache_counters
    metrics = {e.base_url: f"{e.base_url}{counters.path if counters else '/metrics'}"
               for e in behind}
    router_before = _text(r.metrics_url)
    replicas_before = {u: _text(m) for u, m in metrics.items()}
    with httpx.Client(timeout=30.0) as client:
        counter = prompt_counter(client, endpoint_for(engine, behind[0].base_url, model),
                                 tokenizer_path)
        result, records = measure(router_endpoint(r, engine, model), traffic, out_dir=out_dir,
                                  max_input_tokens=max_input_tokens, counter=counter)
    evidence = replica_evidence(r.kind, router_before, _text(r.metrics_url), replicas_before,
                                {u: _text(m) for u, m in metrics.items()}, counters)
    return result, records, evidence


GREEDY_TOKENS = 16


def _greedy(client: httpx.Client, base_url: str, model: str, prompt: str) -> str:
    r = client.post(f"{base_url}/v1/completions", json={
        "model": model, "prompt": prompt, "max_tokens": GREEDY_TOKENS, "temperature": 0,
        "seed": 0})
    r.raise_for_status()
    return str(r.json()["choices"][0]["text"])


def greedy_identity(router_url: str, replica_url: str, model: str,
                    prompts: dict[str, str]) -> tuple[bool, str]:
    """The quality check a router can fail: the same greedy answers through it as from a
    replica directly (it must pass on requests and answers unchanged). Sequential, one
    request at a time, so no batching differs between the two paths."""
    differ = []
    with httpx.Client(timeout=120.0) as client:
        for name, prompt in prompts.items():
            direct = _greedy(client, replica_url, model, prompt)
            routed = _greedy(client, router_url, model, prompt)
            if routed != direct:
                differ.append(f"{name}: {direct[:40]!r} direct, {routed[:40]!r} routed")
    if differ:
        return False, f"{len(differ)} of {len(prompts)} greedy answers differ: " + "; ".join(
            differ)
    return True, (f"{len(prompts)} greedy answers ({GREEDY_TOKENS} tokens, /v1/completions) "
                  "through the router equal the replica's own")
