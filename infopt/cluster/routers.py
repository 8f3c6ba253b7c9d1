"""The routers replicas are measured behind, as data: how each starts, what its policies are
called, and which of its Prometheus counters says how many requests each replica got.

Both are Rust binaries in PyPI wheels, pinned in pyproject.toml; flags and policy names from
their own `--help` (vllm-router 0.1.17, `sglang-router launch` 0.3.2), metric names from their
/metrics after routed requests (recorded in tests/fixtures/cluster/). Both rename their
process (setproctitle: "vllm::router", "sglang::router"), so they are stopped by process group,
never by name.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from infopt.specs.cluster import Policy


@dataclass(frozen=True)
class RouterKind:
    name: str
    package: str
    version: str
    command: tuple[str, ...]  # the console script (in this Python's bin) and a subcommand
    policies: Mapping[Policy, str]  # our policy -> the router's --policy value
    # The counter of requests a replica got, labelled worker="<url>" (and these labels).
    worker_requests: str
    worker_requests_labels: tuple[tuple[str, str], ...] = ()
    # What a policy relies on that a replica may not give, said beside its result.
    caveats: Mapping[Policy, str] = field(default_factory=dict)
    source: str = ""

    def policy_name(self, policy: Policy) -> str:
        try:
            return self.policies[policy]
        except KeyError:
            raise ValueError(f"{self.name} {self.version} has no {policy.value} policy (it has "
                             f"{', '.join(p.value for p in self.policies)})") from None


VLLM_ROUTER = RouterKind(
    name="vllm-router", package="vllm-router", version="0.1.17", command=("vllm-router",),
    policies={Policy.ROUND_ROBIN: "round_robin", Policy.LOAD_AWARE: "power_of_two",
              Policy.CACHE_AWARE: "cache_aware", Policy.SESSION_HASH: "consistent_hash"},
    worker_requests="vllm_router_processed_requests_total",
    caveats={Policy.SESSION_HASH: "consistent_hash keys on the X-Session-ID header first "
             "(then X-User-ID, ...), which the load generator sends per prefix group"},
    source="vllm-router --help (0.1.17); vllm-project/router docs/load_balancing/README.md")

SGLANG_ROUTER = RouterKind(
    name="sglang-router", package="sglang-router", version="0.3.2",
    command=("sglang-router", "launch"),
    policies={Policy.ROUND_ROBIN: "round_robin", Policy.LOAD_AWARE: "power_of_two",
              Policy.CACHE_AWARE: "cache_aware"},
    worker_requests="smg_worker_cb_outcomes_total",
    worker_requests_labels=(("outcome", "success"),),
    caveats={Policy.LOAD_AWARE: "power_of_two reads each worker's load from SGLang's own "
             "load route; a worker without it (llama.cpp, vLLM) gives none (the router logs "
             "\"No loads fetched from workers\")"},
    source="sglang-router launch --help (0.3.2)")

ROUTERS: dict[str, RouterKind] = {r.name: r for r in (VLLM_ROUTER, SGLANG_ROUTER)}


def router_kind(name: str) -> RouterKind:
    try:
        return ROUTERS[name]
    except KeyError:
        raise ValueError(f"unknown router {name!r}: choose one of "
                         f"{', '.join(sorted(ROUTERS))}") from None


def executable(kind: RouterKind, bin_dir: Path | None = None) -> Path:
    """The router's console script, installed with infopt (the same environment's bin)."""
    return (bin_dir or Path(sys.executable).parent) / kind.command[0]


def router_argv(kind: RouterKind, workers: list[str], policy: Policy, port: int,
                metrics_port: int, bin_dir: Path | None = None,
                host: str = "127.0.0.1") -> list[str]:
    """The router's command line: loopback only, its metrics on their own loopback port."""
    if not workers:
        raise ValueError("a router needs at least one replica")
    return [str(executable(kind, bin_dir)), *kind.command[1:], "--host", host,
            "--port", str(port), "--worker-urls", *workers,
            "--policy", kind.policy_name(policy),
            "--prometheus-host", host, "--prometheus-port", str(metrics_port)]
