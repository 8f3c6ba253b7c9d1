"""The workload file: arrivals, length distributions, prefix reuse, route mix, SLOs and counts.

A `TrafficSpec` describes one measured scenario; `infopt.loadgen.schedule` turns it into the exact
list of requests to send. Units live in names: `_tokens` are model tokens, `_s` seconds,
`_per_s` events per second. `infopt.specs.traffic_file.load_traffic` reads a YAML file; the
standard scenarios are in `infopt.specs.scenarios`.

The SLO model (TTFT, ITL, TPOT, E2E; goodput; when a run meets an SLO) is defined once, in
docs/metrics.md, and computed once, in `infopt.analysis.slo`: `infopt bench`, the optimizer's
trials and the reports all read it from there.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from enum import StrEnum
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .base import InputError, Spec

# Scale guards: a value beyond these is a typo (a missing decimal point), not a load a single
# load generator can drive; the message says so instead of scheduling it.
MAX_CONCURRENCY = 4096  # simultaneous requests from one client process
MAX_RATE_PER_S = 10_000.0  # open-loop arrivals per second
MAX_WINDOW_S = 7 * 86400.0  # a measured window, burst interval or cool-down, s
MAX_WARMUP_REQUESTS = 100_000
# A schedule is built in memory; more than this is a typo in a rate or duration.
MAX_SCHEDULED_REQUESTS = 1_000_000
# The longest context announced for any model (Llama 4 Scout, 10M tokens, Meta 2025-04-05):
# a longer prompt, output or prefix is a typo, and a prompt of it would be built in memory.
MAX_LENGTH_TOKENS = 10_000_000
# Route weights are relative: beyond this ratio a route gets under one request in a million.
MAX_ROUTE_WEIGHT = 1_000_000.0

# --- arrivals --------------------------------------------------------------------------------


class ClosedLoop(Spec):
    """`concurrency` workers; each sends its next request when its previous one ends."""

    kind: Literal["closed_loop"] = "closed_loop"
    concurrency: int = Field(..., ge=1, le=MAX_CONCURRENCY)


class PoissonArrival(Spec):
    """Open loop: exponential inter-arrival times with mean 1 / rate_per_s."""

    kind: Literal["poisson"] = "poisson"
    rate_per_s: float = Field(..., gt=0, le=MAX_RATE_PER_S)
    # Rescale the drawn gaps (the warm-up's and the measured requests', each) so their mean is
    # exactly 1 / rate_per_s: a short schedule then offers the rate it is labelled with, its
    # burstiness still Poisson's. Forty Poisson gaps alone average anywhere within about +-30%
    # of it (an SLO boundary probe labelled 7.0 requests/s was sent at 4.3).
    exact_mean: bool = False


class ConstantArrival(Spec):
    """Open loop: one request exactly every 1 / rate_per_s seconds."""

    kind: Literal["constant"] = "constant"
    rate_per_s: float = Field(..., gt=0, le=MAX_RATE_PER_S)


class BurstArrival(Spec):
    """Open loop: `burst_size` requests every `burst_interval_s`; inside a burst they are sent
    together (within_burst_rate_per_s None) or spaced 1 / within_burst_rate_per_s apart."""

    kind: Literal["bursts"] = "bursts"
    burst_size: int = Field(..., ge=1, le=MAX_CONCURRENCY)
    burst_interval_s: float = Field(..., gt=0, le=MAX_WINDOW_S)
    within_burst_rate_per_s: float | None = Field(None, gt=0, le=MAX_RATE_PER_S)

    @model_validator(mode="after")
    def _bursts_do_not_overlap(self) -> "BurstArrival":
        if self.within_burst_rate_per_s is not None:
            span_s = (self.burst_size - 1) / self.within_burst_rate_per_s
            if span_s >= self.burst_interval_s:
                raise ValueError(
                    f"a burst of {self.burst_size} at {self.within_burst_rate_per_s}/s lasts "
                    f"{span_s:g} s, not shorter than burst_interval_s {self.burst_interval_s:g}: "
                    "raise within_burst_rate_per_s or burst_interval_s")
        return self


class SweepArrival(Spec):
    """Several scenarios, one per value: closed loops at each concurrency, or open loops
    (`rate_arrival`) at each rate. `expand_sweep` turns it into plain specs; the runner stops
    after the first value whose run misses an SLO when stop_at_first_slo_violation is set."""

    kind: Literal["sweep"] = "sweep"
    over: Literal["concurrency", "rate"]
    values: list[float] = Field(..., min_length=1, max_length=64)
    rate_arrival: Literal["poisson", "constant"] = "poisson"
    stop_at_first_slo_violation: bool = False

    @field_validator("values")
    @classmethod
    def _values_ascending(cls, values: list[float], info: ValidationInfo) -> list[float]:
        if any(v <= 0 for v in values):
            raise ValueError("values must all be > 0")
        cap = MAX_CONCURRENCY if info.data.get("over") == "concurrency" else MAX_RATE_PER_S
        if any(v > cap for v in values):
            raise ValueError(f"values must each be at most {cap:g} (got {max(values):g}): a "
                             "larger sweep value is a typo, not a load this tool can drive")
        if any(b <= a for a, b in pairwise(values)):
            raise ValueError(f"values must be strictly increasing (a sweep is ordered), got "
                             f"{values}")
        if info.data.get("over") == "concurrency" and any(v != int(v) for v in values):
            raise ValueError(f"concurrency values must be whole numbers, got {values}")
        return values


Arrival = Annotated[Union[ClosedLoop, PoissonArrival, ConstantArrival, BurstArrival,
                          SweepArrival], Field(discriminator="kind")]

# --- lengths ---------------------------------------------------------------------------------

# Phi^-1(0.95) = 1.6448536...: the standard normal's 95th percentile.
Z_P95 = statistics.NormalDist().inv_cdf(0.95)


class FixedLengths(Spec):
    kind: Literal["fixed"] = "fixed"
    tokens: int = Field(..., ge=1, le=MAX_LENGTH_TOKENS)


class UniformLengths(Spec):
    """Whole numbers, uniform over [min_tokens, max_tokens], both ends included."""

    kind: Literal["uniform"] = "uniform"
    min_tokens: int = Field(..., ge=1, le=MAX_LENGTH_TOKENS)
    max_tokens: int = Field(..., ge=1, le=MAX_LENGTH_TOKENS)

    @field_validator("max_tokens")
    @classmethod
    def _max_not_below_min(cls, v: int, info: ValidationInfo) -> int:
        lo = info.data.get("min_tokens")
        if lo is not None and v < lo:
            raise ValueError(f"max_tokens ({v}) must be >= min_tokens ({lo})")
        return v


class LognormalLengths(Spec):
    """Log-normal, given by its median and 95th percentile (the numbers people know).

    ln(X) ~ Normal(mu, sigma), so median = exp(mu) and p95 = exp(mu + z95 * sigma) with
    z95 = Phi^-1(0.95) ~= 1.6449. Hence mu = ln(p50_tokens) and
    sigma = (ln(p95_tokens) - mu) / z95 = ln(p95_tokens / p50_tokens) / 1.6449.
    Draws are rounded to whole tokens, at least 1, at most max_tokens when given.
    """

    kind: Literal["lognormal"] = "lognormal"
    p50_tokens: float = Field(..., ge=1, le=MAX_LENGTH_TOKENS)
    p95_tokens: float = Field(..., ge=1, le=MAX_LENGTH_TOKENS)
    max_tokens: int | None = Field(None, ge=1, le=MAX_LENGTH_TOKENS,
                                   description="cap on a single draw")

    @field_validator("p95_tokens")
    @classmethod
    def _p95_above_p50(cls, v: float, info: ValidationInfo) -> float:
        p50 = info.data.get("p50_tokens")
        if p50 is not None and v <= p50:
            raise ValueError(f"p95_tokens ({v:g}) must exceed p50_tokens ({p50:g}); "
                             "for one length use kind: fixed")
        return v

    @property
    def mu(self) -> float:
        return math.log(self.p50_tokens)

    @property
    def sigma(self) -> float:
        return math.log(self.p95_tokens / self.p50_tokens) / Z_P95


class TraceLengths(Spec):
    """Lengths drawn from a recorded trace: a CSV with a header row, or JSONL objects, with
    `input_tokens` and/or `output_tokens` (other columns ignored). As `input_lengths` it reads
    `input_tokens`, as `output_lengths` it reads `output_tokens`; use `lengths_trace` to keep
    each row's pair together. A relative path is relative to the workload file."""

    kind: Literal["trace"] = "trace"
    path: str = Field(..., min_length=1)
    order: Literal["random", "sequential"] = "random"  # sequential replays rows, cycling


Lengths = Annotated[Union[FixedLengths, UniformLengths, LognormalLengths, TraceLengths],
                    Field(discriminator="kind")]


class PairedTrace(Spec):
    """One trace giving both lengths of each request (rows are never split)."""

    path: str = Field(..., min_length=1)
    order: Literal["random", "sequential"] = "random"


TRACE_COLUMNS = ("input_tokens", "output_tokens")


def read_length_trace(path: str | Path, columns: tuple[str, ...] = TRACE_COLUMNS
                      ) -> list[tuple[int, ...]]:
    """Rows of `columns` (positive whole token counts) from a .csv or .jsonl/.ndjson trace."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"length trace {p} not found: give an existing CSV or JSONL file")
    suffix = p.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise InputError(f"{p}: unknown trace format {suffix or '(none)'}; use .csv or .jsonl")
    raw = p.read_bytes()
    try:  # decoded here, not by the locale's codec mid-iteration
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text (byte {exc.start}: {raw[exc.start]:#04x}); save "
                         "the trace as UTF-8") from None
    rows: list[tuple[int, ...]] = []
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{p}: header has no column {', '.join(missing)}; found "
                             f"{', '.join(reader.fieldnames or []) or 'no header'}")
        records = ((reader.line_num, r) for r in reader)
    else:  # blank lines are skipped, but still counted, so line numbers match an editor's
        records = ((i, _json_line(p, i, line)) for i, line in enumerate(text.splitlines(), 1)
                   if line.strip())
    for line_no, rec in records:
        rows.append(tuple(_token_count(p, line_no, c, rec.get(c), suffix != ".csv")
                          for c in columns))
    if not rows:
        raise InputError(f"{p}: the trace has no rows")
    return rows


def _json_line(p: Path, line_no: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: line {line_no}: not JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{p}: line {line_no}: expected a JSON object")
    return obj


def _token_count(p: Path, line_no: int, column: str, raw: Any, from_json: bool) -> int:
    """A whole token count >= 1. A JSON value must be a number: `true` is an int to Python and
    "12" a string, both typos in a trace; a CSV cell is always text."""
    where = f"{p}: line {line_no}"
    if raw is None:
        raise InputError(f"{where}: {column} must be a whole number >= 1, but the row has no "
                         f"{column}")
    try:
        value = float(raw) if not from_json or (
            isinstance(raw, (int, float)) and not isinstance(raw, bool)) else math.nan
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise InputError(f"{where}: {column} must be a whole number >= 1, got {raw!r}")
    if value > MAX_LENGTH_TOKENS:
        raise InputError(f"{where}: {column} {raw!r} is longer than any model's context (at "
                         f"most {MAX_LENGTH_TOKENS}); check the trace's columns")
    return int(value)


# --- prefix reuse, routes, SLOs --------------------------------------------------------------


class PrefixReuse(Spec):
    """Shared prompt prefixes. A fraction `reuse_ratio` of the requests (exactly, per phase)
    start with one of `prefix_groups` shared prefixes of `shared_prefix_tokens` tokens, added in
    front of their own input; every other request starts with a prefix unique to it, so no engine
    can serve it from cache (the measurement default)."""

    reuse_ratio: float = Field(0.0, ge=0, le=1)
    shared_prefix_tokens: int = Field(0, ge=0, le=MAX_LENGTH_TOKENS)
    prefix_groups: int = Field(1, ge=1, le=MAX_SCHEDULED_REQUESTS)  # at most one per request

    @model_validator(mode="after")
    def _prefix_has_tokens(self) -> "PrefixReuse":
        if self.reuse_ratio > 0 and self.shared_prefix_tokens < 1:
            raise ValueError("shared_prefix_tokens must be >= 1 when reuse_ratio > 0")
        return self


class RouteName(StrEnum):
    CHAT_COMPLETIONS = "chat_completions"  # OpenAI POST /v1/chat/completions
    COMPLETIONS = "completions"  # OpenAI POST /v1/completions
    RESPONSES = "responses"  # OpenAI POST /v1/responses
    ANTHROPIC_MESSAGES = "anthropic_messages"  # Anthropic POST /v1/messages


class RouteShare(Spec):
    route: RouteName = RouteName.CHAT_COMPLETIONS
    weight: float = Field(1.0, gt=0, le=MAX_ROUTE_WEIGHT)  # relative: weight / sum of weights
    stream: bool = True


class SloMetric(StrEnum):
    # Definitions: docs/metrics.md (one place; bench, tuning and reports all use them).
    TTFT = "ttft"  # request sent -> first output token, s
    ITL = "itl"  # gap between consecutive output tokens of a stream, s
    TPOT = "tpot"  # a request's (E2E - TTFT) / (output tokens - 1), s
    E2E = "e2e"  # request sent -> last output token, s


class Slo(Spec):
    """`metric` at `percentile` must be at most `max_s` (e.g. TTFT p95 <= 0.5 s)."""

    metric: SloMetric
    percentile: Literal[50, 90, 95, 99]
    max_s: float = Field(..., gt=0, le=86400)


# --- the spec --------------------------------------------------------------------------------


class TrafficSpec(Spec):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]*$")
    description: str | None = None
    # Default (filled in before validation): a closed loop at peak_active_generations.
    arrival: Arrival
    input_lengths: Lengths | None = None  # the request's own tokens (prefix excluded)
    output_lengths: Lengths | None = None
    lengths_trace: PairedTrace | None = None  # instead of both of the above
    prefix: PrefixReuse = Field(default_factory=PrefixReuse)
    routes: list[RouteShare] = Field(default_factory=lambda: [RouteShare()], min_length=1)
    slos: list[Slo] = Field(default_factory=list)
    # The user's peak simultaneous *active generations* (not registered users). One active user
    # is the specification's provisional assumption when the workload is vague.
    peak_active_generations: int = Field(1, ge=1, le=MAX_CONCURRENCY)
    warmup_requests: int | None = Field(
        None, ge=0, le=MAX_WARMUP_REQUESTS,
        description="discarded first requests; default = the concurrency")
    measured_requests: int | None = Field(None, ge=1, le=MAX_SCHEDULED_REQUESTS)
    duration_s: float | None = Field(None, gt=0, le=MAX_WINDOW_S,
                                     description="measured window (open loop)")
    cooldown_s: float = Field(0.0, ge=0, le=3600,
                              description="idle pause after the measured requests, s")
    seed: int = Field(0, ge=0, le=2**32 - 1)

    @model_validator(mode="before")
    @classmethod
    def _default_arrival(cls, data: Any) -> Any:
        if isinstance(data, dict) and "arrival" not in data:
            peak = data.get("peak_active_generations", 1)
            data = {**data, "arrival": {"kind": "closed_loop", "concurrency": peak}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "TrafficSpec":
        if self.lengths_trace is not None:
            if self.input_lengths is not None or self.output_lengths is not None:
                raise ValueError("give lengths_trace or input_lengths/output_lengths, not both")
        elif self.input_lengths is None or self.output_lengths is None:
            raise ValueError("input_lengths and output_lengths are required unless "
                             "lengths_trace gives both")
        if getattr(self.arrival, "exact_mean", False) and self.duration_s is not None:
            # The rescaled gaps would move the measured window the duration was cut to.
            raise ValueError("arrival.exact_mean needs a count (measured_requests), not "
                             "duration_s: drop one of them")
        if self.measured_requests is None and self.duration_s is None:
            raise ValueError("give measured_requests or duration_s (or both: whichever ends "
                             "first)")
        a = self.arrival
        closed = a.kind == "closed_loop" or (a.kind == "sweep" and a.over == "concurrency")
        if closed and self.measured_requests is None:
            raise ValueError("a closed loop needs measured_requests: how many requests fit in "
                             "duration_s depends on the engine's speed")
        if a.kind == "sweep" and a.stop_at_first_slo_violation and not self.slos:
            raise ValueError("arrival.stop_at_first_slo_violation needs at least one entry in "
                             "slos (or set it to false)")
        pairs = [(r.route, r.stream) for r in self.routes]
        if len(set(pairs)) != len(pairs):
            raise ValueError("routes: each (route, stream) pair may appear once; merge weights")
        keys = [(s.metric, s.percentile) for s in self.slos]
        if len(set(keys)) != len(keys):
            raise ValueError("slos: each (metric, percentile) pair may appear once")
        if problem := _slo_contradiction(self):
            raise ValueError(f"slos: {problem}")
        return self

    def warmup_count(self) -> int:
        """Warm-up requests: as given, else one per concurrent slot so every slot has run once
        (closed loop: its concurrency; open loop: peak_active_generations)."""
        if self.warmup_requests is not None:
            return self.warmup_requests
        if self.arrival.kind == "closed_loop":
            return self.arrival.concurrency
        return self.peak_active_generations

    def trace_paths(self) -> dict[str, str]:
        """Field path -> trace file, for every trace this spec reads."""
        out = {f"{f}.path": d.path for f in ("input_lengths", "output_lengths")
               if isinstance(d := getattr(self, f), TraceLengths)}
        if self.lengths_trace is not None:
            out["lengths_trace.path"] = self.lengths_trace.path
        return out


_STREAM_ONLY = (SloMetric.TTFT, SloMetric.ITL, SloMetric.TPOT)


def _slo_contradiction(spec: TrafficSpec) -> str | None:
    """Why these SLOs cannot be judged on this traffic, or cannot all bind; None if they can."""
    timed = [s for s in spec.slos if s.metric in _STREAM_ONLY]
    if timed and not any(r.stream for r in spec.routes):
        return (f"{timed[0].metric.value} is only measured on streamed responses, but no route "
                "in the mix streams; set stream: true on a route or drop that SLO")
    gaps = [s for s in spec.slos if s.metric in (SloMetric.ITL, SloMetric.TPOT)]
    out = spec.output_lengths
    if gaps and isinstance(out, FixedLengths) and out.tokens < 2:
        return (f"{gaps[0].metric.value} needs at least 2 output tokens per request (a gap "
                "between tokens), but output_lengths is fixed at 1; raise it or drop that SLO")
    bound = {(s.metric, s.percentile): s.max_s for s in spec.slos}
    for (metric, pct), ttft_max in bound.items():
        e2e_max = bound.get((SloMetric.E2E, pct))
        if metric is SloMetric.TTFT and e2e_max is not None and ttft_max >= e2e_max:
            # Every request's E2E is at least its TTFT, so the E2E bound already implies a
            # tighter TTFT bound: the user meant something else.
            return (f"ttft p{pct} <= {ttft_max:g} s can never bind beside e2e p{pct} <= "
                    f"{e2e_max:g} s (a request's E2E includes its TTFT); give a TTFT bound "
                    "below the E2E bound")
    return None


def expand_sweep(spec: TrafficSpec) -> list[TrafficSpec]:
    """One spec per sweep value, in sweep order (a non-sweep spec comes back alone)."""
    a = spec.arrival
    if a.kind != "sweep":
        return [spec]
    out = []
    for v in a.values:
        if a.over == "concurrency":
            arrival: ClosedLoop | PoissonArrival | ConstantArrival = ClosedLoop(concurrency=int(v))
            name = f"{spec.name}@c{int(v)}"
        elif a.rate_arrival == "poisson":
            arrival, name = PoissonArrival(rate_per_s=v), f"{spec.name}@{v:g}rps"
        else:
            arrival, name = ConstantArrival(rate_per_s=v), f"{spec.name}@{v:g}rps"
        out.append(spec.model_copy(update={"arrival": arrival, "name": name}))
    return out
