"""Issue 30: the client is called the bottleneck only when it is one (its loop thread near a core,
or its loop lag as large as the ITL it measured), never for a late loop on a machine whose cores
the engine holds; the reason is in the level result, the warning and the report text."""

from __future__ import annotations

import pytest

from infopt.loadgen import measure as measure_mod
from infopt.loadgen.monitor import (
    CLIENT_BOUND_CPU_SHARE,
    ClientHealth,
    EngineUsage,
    client_bound_reason,
    client_saturated,
)
from infopt.loadgen.runner import PhaseResult
from infopt.loadgen.schedule import Phase
from infopt.loadgen.summary import summarize_level, with_monitors
from infopt.report.bench_text import render_bench
from infopt.specs.endpoint import Endpoint
from infopt.specs.results import BenchResult, RequestRecord
from infopt.specs.traffic import TrafficSpec


def _health(lag_s: float, cpu: float | None, wait: float | None = None) -> ClientHealth:
    return ClientHealth(loop_lag_p50_s=lag_s / 4, loop_lag_p99_s=lag_s, loop_lag_max_s=lag_s,
                        ticks=500, cpu_share=cpu, cpu_wait_share=wait)


def test_the_demo_control_trial_is_not_client_bound() -> None:
    # The log line: lag p99 6.9 ms, client CPU 5%, ITL ~20-60 ms (llama.cpp on both
    # cores), and the worst of the demo's recorded control repeats: 12.7 ms against 29 ms.
    for itl in (0.020, 0.030, 0.060):
        assert client_bound_reason(_health(0.0069, 0.05, wait=0.10), itl) is None
    assert client_bound_reason(_health(0.0127, 0.05), 0.029) is None
    assert not client_saturated(_health(0.0069, 0.05), 0.030)


def test_a_busy_client_is_flagged_for_its_cpu() -> None:
    reason = client_bound_reason(_health(0.002, 0.93), 0.030)
    assert reason == "client CPU 93% of a core (>= 80%)"
    assert client_bound_reason(_health(0.002, CLIENT_BOUND_CPU_SHARE), 0.030) is not None
    assert client_bound_reason(_health(0.002, 0.79), 0.030) is None
    # No ITL to compare with (nothing streamed): the CPU rule still applies.
    assert client_bound_reason(_health(0.002, 0.95), None) == "client CPU 95% of a core (>= 80%)"


def test_a_loop_as_late_as_the_itl_is_flagged_for_its_lag() -> None:
    reason = client_bound_reason(_health(0.045, 0.30), 0.030)
    assert reason == "event-loop lag p99 45.0 ms >= the ITL p50 30.0 ms it measured"
    # Even at 5% CPU when the lag is the size of the gaps measured (chunks read in bursts).
    assert client_bound_reason(_health(0.300, 0.05), 0.002) is not None
    assert client_bound_reason(_health(0.029, 0.30), 0.030) is None


def test_both_reasons_are_given_and_the_floor_holds() -> None:
    both = client_bound_reason(_health(0.400, 0.98), 0.050)
    assert both == ("client CPU 98% of a core (>= 80%); "
                    "event-loop lag p99 400.0 ms >= the ITL p50 50.0 ms it measured")
    # Under 5 ms, lag is a healthy loop's bursts and scheduler noise, whatever the ITL.
    assert client_bound_reason(_health(0.004, 0.20), 0.002) is None
    assert client_bound_reason(_health(0.005, 0.20), 0.002) is not None
    # No ITL: a late loop alone is nothing to judge against.
    assert client_bound_reason(_health(0.050, 0.20), None) is None


def _records(n: int, itl_s: float) -> list[RequestRecord]:
    return [RequestRecord(request_id=f"r{i}", concurrency=2, ok=True, prompt_tokens=16,
                          prompt_tokens_requested=16, output_tokens=8, output_tokens_requested=8,
                          content_chunks=8, streamed_tokens=8, chunk_tokens_counted=True,
                          ttft_s=0.05, e2e_s=0.05 + 7 * itl_s, itl_s=[itl_s] * 7,
                          start_offset_s=0.1 * i)
            for i in range(n)]


def _engine() -> EngineUsage:
    return EngineUsage(samples=4, cpu_percent_mean=190.0, cpu_percent_max=199.0,
                       rss_peak_bytes=2**28)


def test_the_level_carries_the_flag_and_its_reason() -> None:
    recs = _records(8, 0.030)
    calm = with_monitors(summarize_level(recs, 2, 1.0),
                         PhaseResult(recs, 1.0, _health(0.0069, 0.05), _engine()))
    assert calm.client_saturated is False and calm.client_bound_reason is None
    assert calm.client_loop_lag_p99_s == 0.0069 and calm.client_cpu_share == 0.05
    busy = with_monitors(summarize_level(recs, 2, 1.0),
                         PhaseResult(recs, 1.0, _health(0.002, 0.9), _engine()))
    assert busy.client_saturated is True
    assert busy.client_bound_reason == "client CPU 90% of a core (>= 80%)"


@pytest.mark.parametrize(("health", "warned"), [
    (_health(0.0069, 0.05), None),
    (_health(0.002, 0.92), "client CPU 92% of a core (>= 80%)"),
    (_health(0.060, 0.40), "event-loop lag p99 60.0 ms >= the ITL p50 30.0 ms it measured"),
])
def test_measure_warns_only_for_a_client_bound_phase_with_its_reason(monkeypatch, health,
                                                                      warned) -> None:
    def fake_run(endpoint, planned, concurrency, **_kw):
        measured = [r for r in planned if r.phase is Phase.MEASURED]
        return PhaseResult(_records(len(measured), 0.030), 1.0, health, _engine())

    monkeypatch.setattr(measure_mod, "run_schedule", fake_run)
    spec = TrafficSpec(name="control", arrival={"kind": "closed_loop", "concurrency": 2},
                       input_lengths={"kind": "fixed", "tokens": 16},
                       output_lengths={"kind": "fixed", "tokens": 8},
                       warmup_requests=0, measured_requests=8)
    said: list[str] = []
    result, _ = measure_mod.measure(Endpoint(base_url="http://127.0.0.1:9", model="m"), spec,
                                    out_dir=None, max_input_tokens=64, say=said.append)
    warnings = [s for s in said if "bottleneck" in s]
    assert result.level.client_bound_reason == warned
    if warned is None:
        assert warnings == [] and result.level.client_saturated is False
    else:
        assert warnings == [f"control: WARNING the load generator was the bottleneck: {warned}"]
        text = render_bench(BenchResult(workload="w", endpoint="e", model="m",
                                        scenarios=[result]))
        assert f"client-bound: {warned}" in text


def test_the_report_checks_cell_names_the_reason() -> None:
    from infopt.report.markdown import _checks

    recs = _records(8, 0.030)
    level = with_monitors(summarize_level(recs, 2, 1.0),
                          PhaseResult(recs, 1.0, _health(0.002, 0.9), _engine()))
    assert _checks(True, level) == "ok, client-bound (client CPU 90% of a core (>= 80%))"
    # A level recorded before the reason existed still reads as flagged.
    old = level.model_copy(update={"client_bound_reason": None})
    assert _checks(True, old) == "ok, client-bound"


def test_a_gap_under_a_millisecond_is_written_legibly() -> None:
    # bench/load_bench.py at 1,000 streams: chunks read in bursts, ITL p50 0.03 ms.
    assert client_bound_reason(_health(1.4161, 0.61, wait=0.39), 0.00003) == (
        "event-loop lag p99 1416.1 ms >= the ITL p50 0.03 ms it measured")
