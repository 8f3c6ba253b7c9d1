"""TrafficSpec -> the exact requests to send: when, how long, which prefix, which route.

Pure and deterministic: the same spec, seed and numpy version give the same schedule. Each
aspect draws from its own child of `numpy.random.SeedSequence(seed)`, so changing the route mix
does not move the arrival times or the lengths.

Times are seconds from the start of the schedule (warm-up included); a closed loop has no send
times (a worker sends the next request when its previous one ends). `input_tokens` is the whole
prompt: the shared prefix (if any) plus the request's own tokens, clipped to `max_input_tokens`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

import numpy as np
from pydantic import Field

from infopt.specs.base import InputError, Spec
from infopt.specs.traffic import (
    MAX_LENGTH_TOKENS,
    MAX_SCHEDULED_REQUESTS,
    BurstArrival,
    ConstantArrival,
    FixedLengths,
    LognormalLengths,
    PoissonArrival,
    RouteName,
    SweepArrival,
    TraceLengths,
    TrafficSpec,
    UniformLengths,
    read_length_trace,
)

T = TypeVar("T")


class Phase(StrEnum):
    WARMUP = "warmup"
    MEASURED = "measured"


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    request_id: str
    send_offset_s: float | None  # None: closed loop, sent when a worker frees
    input_tokens: int  # whole prompt, prefix included, after clipping
    output_tokens: int
    prefix_group: int | None  # None: a prefix unique to this request
    prefix_tokens: int  # tokens of the shared prefix (0 when unique)
    route: RouteName
    stream: bool
    phase: Phase
    input_tokens_drawn: int  # before clipping to max_input_tokens

    @property
    def clipped(self) -> bool:
        return self.input_tokens < self.input_tokens_drawn


class ScheduleSummary(Spec):
    requests: int
    warmup_requests: int
    measured_requests: int
    clipped_inputs: int  # requests whose drawn input exceeded max_input_tokens
    shared_prefix_requests: int
    routes: dict[str, int] = Field(default_factory=dict)  # "route/stream|batch" -> count
    input_tokens_mean: float
    output_tokens_mean: float
    last_send_offset_s: float | None  # None for a closed loop


def summarize_schedule(requests: list[PlannedRequest]) -> ScheduleSummary:
    n = len(requests)
    offsets = [r.send_offset_s for r in requests if r.send_offset_s is not None]
    return ScheduleSummary(
        requests=n,
        warmup_requests=sum(r.phase is Phase.WARMUP for r in requests),
        measured_requests=sum(r.phase is Phase.MEASURED for r in requests),
        clipped_inputs=sum(r.clipped for r in requests),
        shared_prefix_requests=sum(r.prefix_group is not None for r in requests),
        routes=dict(Counter(f"{r.route}/{'stream' if r.stream else 'batch'}" for r in requests)),
        input_tokens_mean=sum(r.input_tokens for r in requests) / n if n else 0.0,
        output_tokens_mean=sum(r.output_tokens for r in requests) / n if n else 0.0,
        last_send_offset_s=max(offsets) if offsets else None,
    )


# Child-seed slots: fixed positions so adding an aspect never reshuffles the others.
_ARRIVALS, _INPUTS, _OUTPUTS, _PREFIX, _ROUTES = range(5)


def build_schedule(spec: TrafficSpec, *, seed: int, max_input_tokens: int) -> list[PlannedRequest]:
    """Warm-up then measured requests, in send order. Callers usually pass seed=spec.seed;
    repeats of one scenario on one engine should use different seeds, since request ids (and so
    the unique prompt prefixes a client builds from them) derive from the seed."""
    if spec.arrival.kind == "sweep":
        raise InputError(f"{spec.name}: a sweep is several schedules; call expand_sweep(spec) "
                         "and build one schedule per spec")
    if max_input_tokens < 1:
        raise InputError(f"max_input_tokens must be >= 1, got {max_input_tokens}")
    shared = spec.prefix.shared_prefix_tokens if spec.prefix.reuse_ratio > 0 else 0
    if shared >= max_input_tokens:
        raise InputError(f"prefix.shared_prefix_tokens {shared} leaves no room for a request's "
                         f"own tokens within max_input_tokens {max_input_tokens}")
    seeds = np.random.SeedSequence(seed).spawn(5)
    rng = [np.random.default_rng(s) for s in seeds]

    n_warm = spec.warmup_count()
    offsets, n_measured = _arrivals(spec, n_warm, seeds[_ARRIVALS])
    if offsets is not None and isinstance(spec.arrival, PoissonArrival) \
            and spec.arrival.exact_mean:
        offsets = exact_mean_offsets(offsets, n_warm, spec.arrival.rate_per_s)
    n = n_warm + n_measured
    own_in, out = _lengths(spec, n, rng[_INPUTS], rng[_OUTPUTS])

    phases = [Phase.WARMUP] * n_warm + [Phase.MEASURED] * n_measured
    groups = _per_phase(n_warm, n_measured, lambda k: _prefix_groups(spec, k, rng[_PREFIX]))
    weights = [r.weight for r in spec.routes]
    route_idx = _per_phase(n_warm, n_measured, lambda k: _apportion(weights, k, rng[_ROUTES]))

    requests = []
    for i in range(n):
        g = groups[i]
        prefix = shared if g is not None else 0
        drawn = prefix + int(own_in[i])
        share = spec.routes[route_idx[i]]
        requests.append(PlannedRequest(
            request_id=f"{spec.name}-{seed:x}-{i:05d}",
            send_offset_s=None if offsets is None else float(offsets[i]),
            input_tokens=min(drawn, max_input_tokens),
            output_tokens=int(out[i]),
            prefix_group=g,
            prefix_tokens=prefix,
            route=share.route,
            stream=share.stream,
            phase=phases[i],
            input_tokens_drawn=drawn,
        ))
    return requests


# --- arrivals --------------------------------------------------------------------------------


def _arrivals(spec: TrafficSpec, n_warm: int, seed: np.random.SeedSequence
              ) -> tuple[np.ndarray | None, int]:
    """Send offsets for all requests (None for a closed loop) and the measured count."""
    a = spec.arrival
    if a.kind == "closed_loop":
        assert spec.measured_requests is not None  # the spec's validator guarantees it
        return None, spec.measured_requests
    # build_schedule refuses a sweep (one schedule per expanded spec) before drawing arrivals.
    assert not isinstance(a, SweepArrival)
    if spec.duration_s is None:
        assert spec.measured_requests is not None
        return _offsets(a, n_warm + spec.measured_requests, seed), spec.measured_requests
    # Duration-bounded: the measured window starts at the first measured send. Draw a generous
    # count; if the window is not covered, redraw twice as many from the same seed (the first
    # k draws of a stream do not depend on how many follow).
    cap = spec.measured_requests or MAX_SCHEDULED_REQUESTS
    guess = n_warm + min(cap, math.ceil(spec.duration_s * _mean_rate(a) * 1.2) + 16)
    while True:
        offsets = _offsets(a, guess, seed)
        start = offsets[n_warm] if guess > n_warm else 0.0
        in_window = int(np.searchsorted(offsets[n_warm:], start + spec.duration_s, "left"))
        if in_window < guess - n_warm or in_window >= cap:
            if spec.measured_requests is None and in_window >= MAX_SCHEDULED_REQUESTS:
                break
            n_measured = min(in_window, cap)
            return offsets[:n_warm + n_measured], n_measured
        guess = n_warm + min(cap, 2 * (guess - n_warm))
    raise InputError(f"{spec.name}: duration_s {spec.duration_s:g} at this arrival rate "
                             f"is over {MAX_SCHEDULED_REQUESTS} requests; shorten it or set "
                             "measured_requests")


def _mean_rate(a: PoissonArrival | ConstantArrival | BurstArrival) -> float:
    if isinstance(a, BurstArrival):
        return a.burst_size / a.burst_interval_s
    return a.rate_per_s


def _offsets(a: PoissonArrival | ConstantArrival | BurstArrival, n: int,
             seed: np.random.SeedSequence) -> np.ndarray:
    """n send offsets in seconds; the first request goes at 0."""
    i = np.arange(n, dtype=float)
    if isinstance(a, ConstantArrival):
        return i / a.rate_per_s  # i / rate, not a running sum: no accumulated rounding
    if isinstance(a, BurstArrival):
        within = (i % a.burst_size) / a.within_burst_rate_per_s if a.within_burst_rate_per_s \
            else np.zeros(n)
        return np.floor(i / a.burst_size) * a.burst_interval_s + within
    # Poisson process: independent exponential gaps with mean 1 / rate.
    gaps = np.random.default_rng(seed).exponential(1.0 / a.rate_per_s, size=n)
    return np.concatenate(([0.0], np.cumsum(gaps[1:]))) if n else gaps


def exact_mean_offsets(offsets: np.ndarray, n_warm: int, rate_per_s: float) -> np.ndarray:
    """The same schedule with the warm-up's gaps and the measured requests' gaps each rescaled
    to a mean of exactly 1 / rate_per_s (PoissonArrival.exact_mean): the measured requests are
    sent at the rate the schedule names."""
    gaps = np.diff(offsets, prepend=0.0)  # gaps[k]: before request k (gaps[0] = 0)
    # Within the warm-up, then within the measured requests; the one gap between them as drawn.
    for lo, hi in ((1, n_warm), (n_warm + 1, len(gaps))):
        part = gaps[lo:hi]
        if len(part) and part.sum() > 0:
            gaps[lo:hi] = part * (len(part) / rate_per_s / part.sum())
    return np.cumsum(gaps)


# --- lengths ---------------------------------------------------------------------------------


def _lengths(spec: TrafficSpec, n: int, rng_in: np.random.Generator,
             rng_out: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if spec.lengths_trace is not None:
        rows = np.asarray(read_length_trace(spec.lengths_trace.path), dtype=np.int64)
        idx = _trace_rows(len(rows), n, spec.lengths_trace.order, rng_in)
        return rows[idx, 0], rows[idx, 1]
    assert spec.input_lengths is not None and spec.output_lengths is not None
    return (sample_lengths(spec.input_lengths, n, rng_in, "input_tokens"),
            sample_lengths(spec.output_lengths, n, rng_out, "output_tokens"))


def mean_lengths(spec: TrafficSpec, n: int = 20_000) -> tuple[int, int]:
    """(mean prompt tokens, mean output tokens) of `spec`'s requests: n draws with its own
    seed (traces and capped distributions included), shared prefixes counted at their share."""
    inp, out = _lengths(spec, n, np.random.default_rng([spec.seed, 0]),
                        np.random.default_rng([spec.seed, 1]))
    prefix = spec.prefix.reuse_ratio * spec.prefix.shared_prefix_tokens
    return max(1, round(float(inp.mean()) + prefix)), max(1, round(float(out.mean())))


def sample_lengths(dist: FixedLengths | UniformLengths | LognormalLengths | TraceLengths,
                   n: int, rng: np.random.Generator, column: str = "input_tokens") -> np.ndarray:
    """n whole token counts (>= 1) from one length distribution; `column` picks a trace's."""
    if isinstance(dist, FixedLengths):
        return np.full(n, dist.tokens, dtype=np.int64)
    if isinstance(dist, UniformLengths):
        return rng.integers(dist.min_tokens, dist.max_tokens + 1, size=n, dtype=np.int64)
    if isinstance(dist, LognormalLengths):
        x = np.maximum(np.rint(rng.lognormal(dist.mu, dist.sigma, size=n)), 1)
        # Uncapped, an extreme p95/p50 ratio draws past int64; no request is that long.
        cap = dist.max_tokens if dist.max_tokens is not None else MAX_LENGTH_TOKENS
        return np.minimum(x, cap).astype(np.int64)
    col = np.asarray([r[0] for r in read_length_trace(dist.path, (column,))], dtype=np.int64)
    return col[_trace_rows(len(col), n, dist.order, rng)]


def _trace_rows(rows: int, n: int, order: str, rng: np.random.Generator) -> np.ndarray:
    if order == "sequential":
        return np.arange(n) % rows
    return rng.integers(0, rows, size=n)


# --- prefix groups and routes ----------------------------------------------------------------


def _per_phase(n_warm: int, n_measured: int, assign: Callable[[int], Iterable[T]]) -> list[T]:
    """Apply an exact-share assignment to each phase separately, so the measured requests
    alone carry the spec's fractions."""
    return list(assign(n_warm)) + list(assign(n_measured))


def _prefix_groups(spec: TrafficSpec, k: int, rng: np.random.Generator) -> list[int | None]:
    """round(reuse_ratio * k) requests, at random positions, share a prefix; the groups take
    turns so they are as even as the count allows."""
    p = spec.prefix
    n_shared = math.floor(p.reuse_ratio * k + 0.5) if p.reuse_ratio > 0 else 0
    out: list[int | None] = [None] * k
    for j, pos in enumerate(rng.permutation(k)[:n_shared]):
        out[int(pos)] = j % p.prefix_groups
    return out


def _apportion(weights: list[float], k: int, rng: np.random.Generator) -> np.ndarray:
    """k route indices with counts by largest remainder (shares exact to within one request),
    in random order."""
    total = sum(weights)
    quotas = [w * k / total for w in weights]
    counts = [math.floor(q) for q in quotas]
    by_remainder = sorted(range(len(weights)), key=lambda j: (-(quotas[j] - counts[j]), j))
    for j in by_remainder[:k - sum(counts)]:
        counts[j] += 1
    idx = np.repeat(np.arange(len(weights)), counts)
    return rng.permutation(idx)
