"""The steady-state window of a closed-loop phase: from the moment the target concurrency is
first held (its last worker's first request has started) to the moment it is lost for good (the
first request to finish after the last one was sent: from then on the loop drains). Output
throughput counted inside it leaves out the ramp (prefills of the first wave, one slot's queue
filling) and the drain (the last wave's stragglers running alone), which on a short window are
much of its time and most of its noise (docs/metrics.md).

Token times come from the stream: the first at start + TTFT, each later one after its ITL gap.
A request without a stream counts its tokens spread evenly over its span. Times in seconds
relative to the phase start."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from infopt.specs.results import RequestRecord


@dataclass(frozen=True)
class SteadyWindow:
    start_s: float
    end_s: float
    output_tokens: float  # counted inside the window (a fraction for unstreamed requests)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s


def steady_window(records: list[RequestRecord], concurrency: int) -> SteadyWindow | None:
    """The window, or None when it is not there: fewer requests than the concurrency, a
    failed request (the loop did not hold its load), or an empty window."""
    if len(records) < concurrency or not records or not all(r.ok for r in records):
        return None
    if any(r.e2e_s is None for r in records):
        return None
    starts = sorted(r.start_offset_s for r in records)
    t0 = starts[concurrency - 1]
    last_sent = starts[-1]
    ends = [r.start_offset_s + (r.e2e_s or 0.0) for r in records]
    after = [e for e in ends if e > last_sent]
    if not after:
        return None
    t1 = min(after)
    if t1 <= t0:
        return None
    tokens = sum(_tokens_within(r, t0, t1) for r in records)
    return SteadyWindow(start_s=t0, end_s=t1, output_tokens=tokens)


def _tokens_within(r: RequestRecord, t0: float, t1: float) -> float:
    n = r.output_tokens or 0
    if n == 0:
        return 0.0
    start, end = r.start_offset_s, r.start_offset_s + (r.e2e_s or 0.0)
    if r.ttft_s is None:  # not streamed: spread evenly over its span
        span = end - start
        overlap = max(0.0, min(end, t1) - max(start, t0))
        return n * overlap / span if span > 0 else 0.0
    times = [start + r.ttft_s + gap for gap in accumulate(r.itl_s, initial=0.0)]
    # A chunk may carry several tokens (speculation): weight each time by tokens per chunk.
    per = n / len(times)
    return per * sum(1 for t in times if t0 <= t <= t1)
