"""What routers and replicas say about a measured scenario, from their own Prometheus text:
the requests each replica got (the router's counter) and each replica's prefix-cache hits (the
engine's counters), as differences between a reading before and one after."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from infopt.cluster.routers import Policy, RouterKind
from infopt.loadgen.spec_counters import parse_counter
from infopt.specs.cluster import ReplicaEvidence, RouterRun
from infopt.specs.contract import ContractCheck
from infopt.specs.endpoint import PrefixCacheCounters
from infopt.specs.results import ScenarioResult

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def labelled_counter(text: str, name: str, label: str,
                     where: tuple[tuple[str, str], ...] = ()) -> dict[str, float]:
    """`name`'s samples summed per value of `label`, over those whose labels include `where`."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, _, value = line.rpartition(" ")
        labels = dict(_LABEL.findall(head[len(name):]))
        if label not in labels or any(labels.get(k) != v for k, v in where):
            continue
        try:
            out[labels[label]] = out.get(labels[label], 0.0) + float(value)
        except ValueError:
            continue
    return out


def routed(kind: RouterKind, text: str) -> dict[str, float]:
    """Requests per replica URL, by the router's own counter."""
    return labelled_counter(text, kind.worker_requests, "worker", kind.worker_requests_labels)


def cache_counts(c: PrefixCacheCounters, text: str) -> tuple[float, float] | None:
    """(prompt tokens from the cache, prompt tokens looked up) now; None: not exposed."""
    hits = parse_counter(text, c.hits)
    if hits is None:
        return None
    if c.queried is not None:
        queried = parse_counter(text, c.queried)
        return None if queried is None else (hits, queried)
    missed = parse_counter(text, c.missed) if c.missed else None
    return None if missed is None else (hits, hits + missed)


def replica_evidence(kind: RouterKind, router_before: str, router_after: str,
                     replicas_before: Mapping[str, str], replicas_after: Mapping[str, str],
                     counters: PrefixCacheCounters | None) -> list[ReplicaEvidence]:
    """Per replica (URL order as given): the before/after differences."""
    before, after = routed(kind, router_before), routed(kind, router_after)
    out = []
    for url in replicas_after:
        n = after.get(url)
        cache_b = cache_counts(counters, replicas_before.get(url, "")) if counters else None
        cache_a = cache_counts(counters, replicas_after[url]) if counters else None
        hits = looked = None
        if cache_a is not None:
            b = cache_b or (0.0, 0.0)
            hits, looked = round(cache_a[0] - b[0]), round(cache_a[1] - b[1])
        out.append(ReplicaEvidence(
            url=url, requests_routed=None if n is None else round(n - before.get(url, 0.0)),
            prompt_tokens_from_cache=hits, prompt_tokens_looked_up=looked))
    return out


def router_head(kind: RouterKind, policy: Policy, replicas: int, workload: str
                ) -> dict[str, Any]:
    """What names a router comparison's row: the router, its policy (and the flag that picks
    it), the workload and the replica count, with the policy's caveat."""
    return dict(router=f"{kind.name} {kind.version}", policy=policy.value,
                policy_flag=kind.policy_name(policy), workload=workload, replicas=replicas,
                caveat=kind.caveats.get(policy))


def router_failed(head: dict[str, Any], exc: BaseException) -> RouterRun:
    """A router that failed to start, to keep the contract or to measure: a row, not a crash."""
    return RouterRun(**head, requests=0, errors=0, output_tokens_per_s=0.0, ttft_p50_s=None,
                     ttft_p95_s=None, e2e_p50_s=None, prefix_hit_ratio=None, evidence=[],
                     failed=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")


def router_row(head: dict[str, Any], result: ScenarioResult, evidence: list[ReplicaEvidence],
               checks: list[ContractCheck], same: bool, detail: str) -> RouterRun:
    """A measured router comparison: the scenario's level, the replicas' prefix-cache hit
    ratio (their own counters), the contract through the router and greedy identity."""
    lvl = result.level
    hits = sum(e.prompt_tokens_from_cache or 0 for e in evidence)
    looked = sum(e.prompt_tokens_looked_up or 0 for e in evidence)
    return RouterRun(**head, requests=lvl.requests, errors=lvl.errors,
                     output_tokens_per_s=lvl.output_tokens_per_s, ttft_p50_s=lvl.ttft_s.p50,
                     ttft_p95_s=lvl.ttft_s.p95, e2e_p50_s=lvl.e2e_s.p50,
                     prefix_hit_ratio=hits / looked if looked else None, evidence=evidence,
                     contract_passed=all(c.ok for c in checks if c.required),
                     quality_identical=same, quality_detail=detail)
