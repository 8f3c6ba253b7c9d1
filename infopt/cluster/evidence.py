"""What routers and replicas say about a measured scenario, from their own Prometheus text:
the requests each replica got (the router's counter) and each replica's prefix-cache hits (the
engine's counters), as differences between a reading before and one after."""

from __future__ import annotations

import re
from collections.abc import Mapping

from infopt.cluster.routers import RouterKind
from infopt.loadgen.spec_counters import parse_counter
from infopt.specs.cluster import ReplicaEvidence
from infopt.specs.endpoint import PrefixCacheCounters

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
