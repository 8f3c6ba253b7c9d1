"""Queueing formulas the capacity plan uses (the skill reference's "Queueing Theory Applied to
LLM Inference", patterns P1 and P4; its arithmetic checked in tests/unit/test_cluster_capacity.py,
not copied): Erlang-C for the chance a request waits, the M/M/c waiting-time tail, and the
Allen-Cunneen correction for general arrivals and service times (M/G/c is approximated, not
solved exactly)."""

from __future__ import annotations

import math


def erlang_c(servers: int, offered_erlangs: float) -> float:
    """P(wait > 0) in M/M/c with `servers` and offered load a = lambda x E[S] (a < c), by the
    Erlang-B recursion (B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1})), numerically stable."""
    c, a = servers, offered_erlangs
    if c < 1:
        raise ValueError("servers must be >= 1")
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1 - b))


def allen_cunneen(arrival_cv2: float, service_cv2: float) -> float:
    """The factor M/G/c's mean wait is approximately M/M/c's times: (CV_a^2 + CV_s^2) / 2."""
    return (arrival_cv2 + service_cv2) / 2


def wait_quantile_s(servers: int, rate_per_s: float, service_mean_s: float, quantile: float,
                    variability: float = 1.0) -> float:
    """The `quantile` of the queueing wait: M/M/c's P(W > t) = C e^{-(c mu - lambda) t}, solved
    for t, scaled by the Allen-Cunneen factor `variability`; inf when the queue is unstable."""
    mu = 1 / service_mean_s
    if rate_per_s >= servers * mu:
        return math.inf
    c = erlang_c(servers, rate_per_s * service_mean_s)
    tail = 1 - quantile
    if c <= tail:
        return 0.0
    return variability * math.log(c / tail) / (servers * mu - rate_per_s)


def split_arrival_cv2(replicas: int) -> float:
    """A Poisson stream dealt round robin to n replicas: each sees Erlang-n gaps, CV^2 = 1/n."""
    return 1 / replicas
