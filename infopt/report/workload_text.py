"""A workload (traffic + objective) in one readable paragraph, for reports and logs."""

from __future__ import annotations

from infopt.specs.traffic import (
    FixedLengths,
    LognormalLengths,
    TraceLengths,
    TrafficSpec,
    UniformLengths,
)
from infopt.specs.workload import OBJECTIVE_UNIT, Workload


def _lengths(d) -> str:
    if isinstance(d, FixedLengths):
        return f"{d.tokens}"
    if isinstance(d, UniformLengths):
        return f"uniform {d.min_tokens}-{d.max_tokens}"
    if isinstance(d, LognormalLengths):
        return f"lognormal p50 {d.p50_tokens:g} / p95 {d.p95_tokens:g}"
    if isinstance(d, TraceLengths):
        return f"trace {d.path}"
    return "?"


def _arrival(t: TrafficSpec) -> str:
    a = t.arrival
    if a.kind == "closed_loop":
        return f"closed loop at {a.concurrency} concurrent"
    if a.kind == "sweep":
        return f"{a.over} sweep {[int(v) if a.over == 'concurrency' else v for v in a.values]}"
    if a.kind == "bursts":
        return f"bursts of {a.burst_size} every {a.burst_interval_s:g} s"
    return f"{a.kind} arrivals at {a.rate_per_s:g}/s"


def describe_traffic(t: TrafficSpec) -> str:
    lengths = (f"lengths from trace {t.lengths_trace.path}" if t.lengths_trace else
               f"{_lengths(t.input_lengths)} input tokens (chat template included; a shared "
               f"prefix adds to it), {_lengths(t.output_lengths)} output tokens (forced)")
    prefix = (f"; {t.prefix.reuse_ratio:.0%} of requests share one of {t.prefix.prefix_groups} "
              f"{t.prefix.shared_prefix_tokens}-token prefixes" if t.prefix.reuse_ratio else
              "; unique prompt prefixes")
    routes = ", ".join(f"{r.route.value}{'' if r.stream else ' (not streamed)'}"
                       f"{f' x{r.weight:g}' if len(t.routes) > 1 else ''}" for r in t.routes)
    slos = ", ".join(f"{s.metric.value} p{s.percentile} <= {s.max_s * 1e3:g} ms"
                     for s in t.slos) or "none"
    count = " and ".join(x for x in (
        f"{t.measured_requests} measured requests" if t.measured_requests else "",
        f"{t.duration_s:g} s" if t.duration_s else "") if x)
    warmup = ("one warm-up request per concurrent slot" if t.warmup_requests is None
              else f"{t.warmup_requests} warm-up requests")
    return (f"`{t.name}`: {_arrival(t)}, peak {t.peak_active_generations} active generations; "
            f"{lengths}{prefix}; routes {routes}; SLOs {slos}; {count} per scenario after "
            f"{warmup}")


def describe_workload(w: Workload) -> str:
    return (f"{describe_traffic(w.traffic)}. Objective **{w.objective.value}** "
            f"({OBJECTIVE_UNIT[w.objective]}, read from scenario `{w.target_scenario}`).")
