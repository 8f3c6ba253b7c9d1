"""The steady-state window (infopt.loadgen.steady): planted closed-loop phases whose ramp and
drain are known, and the throughput counted inside."""

from __future__ import annotations

import pytest

from infopt.loadgen.steady import steady_window
from infopt.loadgen.summary import summarize_level
from infopt.specs.results import RequestRecord


def rec(i: int, start: float, tokens: int, gap: float, ttft: float = 0.1,
        streamed: bool = True, ok: bool = True) -> RequestRecord:
    e2e = ttft + gap * (tokens - 1)
    return RequestRecord(request_id=f"r{i}", concurrency=2, ok=ok, output_tokens=tokens,
                         output_tokens_requested=tokens, start_offset_s=start,
                         e2e_s=e2e, ttft_s=ttft if streamed else None,
                         itl_s=[gap] * (tokens - 1) if streamed else [])


def test_a_straggler_draining_alone_is_left_out():
    """Two workers: three requests of 11 tokens at 0.1 s per token, then one long request of
    41 tokens running alone for 3 s after the others finish. The whole phase averages the
    drain in; the steady window ends when the last request sent is the only one left."""
    recs = [rec(0, 0.0, 11, 0.1), rec(1, 0.0, 11, 0.1),  # each ends at 1.1 s
            rec(2, 1.1, 11, 0.1),  # ends 2.2
            rec(3, 1.1, 41, 0.1)]  # ends 5.2: alone from 2.2 s
    w = steady_window(recs, 2)
    assert (w.start_s, w.end_s) == (0.0, pytest.approx(2.2))
    # Inside [0, 2.2]: 11 + 11 + 11 tokens, and the long request's first 11 (1.2 s .. 2.2 s).
    assert w.output_tokens == pytest.approx(44)
    level = summarize_level(recs, 2, 5.2, closed=True)
    assert level.steady_output_tokens_per_s == pytest.approx(20.0)
    assert level.output_tokens_per_s == pytest.approx(74 / 5.2)  # 14.2: the drain counted
    assert level.steady_window_s == pytest.approx(2.2)


def test_the_ramp_is_left_out_until_every_worker_has_started():
    recs = [rec(0, 0.0, 11, 0.1), rec(1, 0.5, 11, 0.1), rec(2, 1.1, 11, 0.1)]
    w = steady_window(recs, 2)
    assert w.start_s == 0.5 and w.end_s == pytest.approx(1.6)  # r1 ends after r2 was sent


def test_an_unstreamed_request_counts_its_tokens_evenly_over_its_span():
    recs = [rec(0, 0.0, 10, 0.1, streamed=False), rec(1, 0.0, 10, 0.2, streamed=False),
            rec(2, 1.0, 10, 0.1, streamed=False)]
    w = steady_window(recs, 2)
    # r1 (0 .. 1.9 s) is the first to end after r2 was sent at 1.0 s.
    assert (w.start_s, w.end_s) == (0.0, pytest.approx(1.9))
    # r0 and r1 wholly inside; r2 spans 1.0 .. 2.0 s, 0.9 s of it inside -> 9 of its 10.
    assert w.output_tokens == pytest.approx(10 + 10 + 9)


@pytest.mark.parametrize("recs", [
    [rec(0, 0.0, 11, 0.1)],  # fewer requests than workers
    [rec(0, 0.0, 11, 0.1), rec(1, 0.0, 11, 0.1, ok=False)],  # the loop did not hold
])
def test_no_window_where_the_load_was_not_held(recs):
    assert steady_window(recs, 2) is None
    assert summarize_level(recs, 2, 1.0, closed=True).steady_output_tokens_per_s is None


def test_an_open_loop_has_no_steady_window():
    recs = [rec(0, 0.0, 11, 0.1), rec(1, 0.0, 11, 0.1), rec(2, 1.1, 11, 0.1)]
    assert summarize_level(recs, 2, 2.2).steady_output_tokens_per_s is None
