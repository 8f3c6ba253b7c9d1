"""What a run tunes for: the traffic, in the language `infopt bench` reads (a `TrafficSpec`:
arrivals, length distributions or traces, prefix reuse, route mix, SLOs, peak active
generations), and the objective, read at the target load.

Every trial measures each scenario of the traffic (one per value of a concurrency sweep) through
the same `measure(endpoint, traffic)` path as `infopt bench`. The target load is
`peak_active_generations`: for a closed loop, the scenario at that concurrency; for an open loop
(Poisson, constant, bursts), the traffic itself. A rate sweep has no single target load: it
finds the highest sustainable rate, which is `infopt bench`'s job.
"""

from __future__ import annotations

import math
from enum import StrEnum

from pydantic import model_validator

from .base import InputError, Spec
from .traffic import (
    TRACE_COLUMNS,
    ClosedLoop,
    FixedLengths,
    LognormalLengths,
    RouteName,
    RouteShare,
    SweepArrival,
    TraceLengths,
    TrafficSpec,
    UniformLengths,
    expand_sweep,
    read_length_trace,
)


class Objective(StrEnum):
    # Good requests/s under the traffic's SLOs at the target load (higher is better).
    GOODPUT = "goodput"
    # Aggregate output tokens/s at the target load (higher is better).
    THROUGHPUT = "throughput"
    # A single stream's time per output token, TPOT p50 (lower is better): one active user,
    # interactive. Not ITL p50: under speculative decoding a verified draft's tokens arrive
    # together, and the median gap counts the gaps inside a burst as zeros.
    LATENCY = "latency"


HIGHER_IS_BETTER = {Objective.GOODPUT: True, Objective.THROUGHPUT: True,
                    Objective.LATENCY: False}


def default_objective(traffic: TrafficSpec) -> Objective:
    """Goodput when SLOs are given; else single-stream latency for one active user (the
    specification's default for a vague request); else throughput at the peak."""
    if traffic.slos:
        return Objective.GOODPUT
    return Objective.LATENCY if traffic.peak_active_generations == 1 else Objective.THROUGHPUT


def interactive_traffic() -> TrafficSpec:
    """A vague request's workload: one active user chatting (the specification's provisional
    assumption), prompts and answers of a short chat turn."""
    return TrafficSpec(name="interactive", arrival=ClosedLoop(concurrency=1),
                       input_lengths=FixedLengths(tokens=128),
                       output_lengths=FixedLengths(tokens=64),
                       peak_active_generations=1, measured_requests=8, cooldown_s=1.0)


def _closed_concurrencies(traffic: TrafficSpec) -> list[int] | None:
    """The concurrency of each scenario for a closed loop or a concurrency sweep; else None."""
    a = traffic.arrival
    if isinstance(a, ClosedLoop):
        return [a.concurrency]
    if isinstance(a, SweepArrival) and a.over == "concurrency":
        return [int(v) for v in a.values]
    return None


class Workload(Spec):
    traffic: TrafficSpec
    objective: Objective

    @model_validator(mode="after")
    def _objective_is_measurable(self) -> "Workload":
        t, a = self.traffic, self.traffic.arrival
        if isinstance(a, SweepArrival) and a.over == "rate":
            raise ValueError(
                "workload.arrival: a rate sweep finds the highest sustainable rate (run it with "
                "`infopt bench`); a run tunes at one target load: give a poisson or constant "
                "arrival at the target rate_per_s, or sweep over concurrency")
        levels = _closed_concurrencies(t)
        if levels is not None and t.peak_active_generations not in levels:
            raise ValueError(
                f"workload.peak_active_generations {t.peak_active_generations} is the target "
                f"load, but the closed loop runs at {levels}: add it to the sweep's values or "
                "set peak_active_generations to one of them")
        if self.objective is Objective.GOODPUT and not t.slos:
            raise ValueError("objective goodput counts requests that meet the SLOs: give "
                             "workload.slos, or choose throughput or latency")
        if self.objective is Objective.LATENCY and 1 not in (levels or []):
            raise ValueError("objective latency is a single stream's time per token: the workload "
                             "needs a closed loop at concurrency 1 (alone or in a concurrency "
                             "sweep)")
        if self.objective is Objective.LATENCY and not all(r.stream for r in t.routes):
            raise ValueError("objective latency is measured on streamed responses: set "
                             "stream: true on every workload route")
        return self

    @property
    def target_concurrency(self) -> int:
        return self.traffic.peak_active_generations

    def scenarios(self) -> list[TrafficSpec]:
        """What each trial measures, in order; sweep values get consecutive seeds so no two
        scenarios send the same lengths."""
        return [s.model_copy(update={"seed": self.traffic.seed + i})
                for i, s in enumerate(expand_sweep(self.traffic))]

    def _at(self, concurrency: int) -> str:
        """The name expand_sweep gave the closed loop at `concurrency` (validated present)."""
        return next(s.name for s in expand_sweep(self.traffic)
                    if getattr(s.arrival, "concurrency", None) == concurrency)

    @property
    def target_scenario(self) -> str:
        """The scenario the objective is read from (latency: the single stream)."""
        return self._at(1) if self.objective is Objective.LATENCY else self.load_scenario

    @property
    def load_scenario(self) -> str:
        """The scenario at the target load, where the SLOs bind (infopt.tuning.slo_gate)."""
        if _closed_concurrencies(self.traffic) is None:
            return self.traffic.name
        return self._at(self.target_concurrency)


# How each objective's value reads in reports (its unit and where it is measured).
OBJECTIVE_UNIT = {Objective.GOODPUT: "good requests/s under the SLOs at the target load",
                  Objective.THROUGHPUT: "output tokens/s at the target load",
                  Objective.LATENCY: "s per output token of a single stream (TPOT p50)"}


def fixed_levels(*, input_tokens: int, output_tokens: int, levels: list[int], target: int,
                 requests: int, objective: Objective = Objective.THROUGHPUT,
                 name: str = "chat", route: RouteName = RouteName.CHAT_COMPLETIONS,
                 warmup_requests: int | None = None, cooldown_s: float = 0.0,
                 seed: int = 0) -> Workload:
    """Fixed lengths at closed-loop concurrency levels (one level, or a sweep): the shape the
    CLI's --concurrency/--input-tokens flags and the tests build."""
    arrival = (ClosedLoop(concurrency=levels[0]) if len(levels) == 1 else
               SweepArrival(over="concurrency", values=[float(v) for v in levels]))
    traffic = TrafficSpec(
        name=name, arrival=arrival, input_lengths=FixedLengths(tokens=input_tokens),
        output_lengths=FixedLengths(tokens=output_tokens), peak_active_generations=target,
        measured_requests=requests, warmup_requests=warmup_requests, cooldown_s=cooldown_s,
        routes=[RouteShare(route=route)], seed=seed)
    return Workload(traffic=traffic, objective=objective)


# --- lengths against the model's context -------------------------------------------------------


def _longest(dist: FixedLengths | UniformLengths | LognormalLengths | TraceLengths,
             column: str) -> tuple[int, str]:
    """The longest length a distribution draws, and how it was found. An uncapped log-normal
    has no longest draw: its p95 stands in (the tail above it is clipped at run time)."""
    if isinstance(dist, FixedLengths):
        return dist.tokens, "fixed"
    if isinstance(dist, UniformLengths):
        return dist.max_tokens, "max_tokens"
    if isinstance(dist, LognormalLengths):
        return (dist.max_tokens, "max_tokens") if dist.max_tokens is not None else (
            math.ceil(dist.p95_tokens), "p95_tokens")
    assert isinstance(dist, TraceLengths)
    return max(r[0] for r in read_length_trace(dist.path, (column,))), f"the longest {column}"


def longest_request(traffic: TrafficSpec) -> tuple[int, int, str, str]:
    """(prompt tokens with the shared prefix, output tokens, how each was found) of the
    longest request the traffic can send. Reads trace files (resolved paths)."""
    prefix = traffic.prefix.shared_prefix_tokens if traffic.prefix.reuse_ratio > 0 else 0
    if traffic.lengths_trace is not None:  # rows are pairs: the longest pair, not two maxima
        rows = read_length_trace(traffic.lengths_trace.path, TRACE_COLUMNS)
        (i, o), hi, ho = max(rows, key=sum), "the longest row of lengths_trace", ""
    else:
        assert traffic.input_lengths is not None and traffic.output_lengths is not None
        (i, hi), (o, ho) = (_longest(traffic.input_lengths, "input_tokens"),
                            _longest(traffic.output_lengths, "output_tokens"))
        hi, ho = f"input_lengths {hi}", f"output_lengths {ho}"
    hi += f", with the {prefix:,}-token shared prefix" if prefix else ""
    return prefix + i, o, hi, ho


def check_fits_context(traffic: TrafficSpec, *, context_tokens: int | None = None,
                       max_input_tokens: int | None = None, what: str = "the model") -> None:
    """Refuse, before any request, a workload whose longest prompt is longer than
    `max_input_tokens` or whose longest prompt plus output exceeds `context_tokens`: the load
    generator clips such prompts to fit, so it would measure another workload than the one
    asked for, and say nothing."""
    prompt, output, how_in, how_out = longest_request(traffic)
    if max_input_tokens is not None and prompt > max_input_tokens:
        raise InputError(
            f"workload {traffic.name}: prompts up to {prompt:,} tokens ({how_in}) are longer "
            f"than max_input_tokens {max_input_tokens:,} and would be clipped to it: shorten "
            "input_lengths (or the shared prefix), or raise --max-input-tokens")
    if context_tokens is not None and prompt + output > context_tokens:
        how = "; ".join(h for h in (how_in, how_out) if h)
        raise InputError(
            f"workload {traffic.name}: the longest request is {prompt:,} prompt + {output:,} "
            f"output = {prompt + output:,} tokens ({how}), more than the {context_tokens:,}-token "
            f"context of {what}, so its prompt would be clipped to fit: shorten input_lengths or "
            "output_lengths (or cap a log-normal with max_tokens), or use a model with a longer "
            "context")
