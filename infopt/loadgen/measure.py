"""The one measurement path: `measure(endpoint, traffic)` -> schedule -> run -> records ->
parquet -> validation -> summary with SLOs and goodput. `infopt bench` (each scenario of a
workload file), the optimizer's trials (each scenario of the request's workload) and the
standard scenarios on the winner all go through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from infopt.analysis.records import errors_by_kind, records_frame, save_parquet
from infopt.analysis.slo import evaluate_slos
from infopt.analysis.validation import validate_records
from infopt.loadgen.runner import run_schedule
from infopt.loadgen.schedule import build_schedule, summarize_schedule
from infopt.loadgen.spec_counters import (
    read_accept_length,
    read_counters,
    with_counted_drafts,
)
from infopt.loadgen.summary import every_quarter, summarize_level, with_monitors
from infopt.loadgen.tokens import Counter
from infopt.specs.endpoint import Endpoint
from infopt.specs.results import BenchmarkResult, RequestRecord, ScenarioResult
from infopt.specs.traffic import TrafficSpec
from infopt.specs.workload import Workload

Say = Callable[[str], None]


def concurrency_of(spec: TrafficSpec) -> int:
    """Closed loop: its workers; open loop: the declared peak (the sender's pool size)."""
    return getattr(spec.arrival, "concurrency", None) or spec.peak_active_generations


# How long a request may get nothing from the engine before the engine counts as hung: long,
# since a long prompt's prefill on a busy CPU legitimately sends nothing for minutes.
STALL_TIMEOUT_S = 600.0


def measure(endpoint: Endpoint, spec: TrafficSpec, *, out_dir: Path | None,
            max_input_tokens: int, progress: Callable[[int, int], None] | None = None,
            counter: Counter | None = None, say: Say | None = None,
            stall_timeout_s: float = STALL_TIMEOUT_S
            ) -> tuple[ScenarioResult, list[RequestRecord]]:
    """Measure one (non-sweep) traffic spec against `endpoint`. `out_dir`: where the
    per-request parquet goes (None: nowhere). `say` gets warnings (a saturated client).
    `stall_timeout_s`: a request that gets nothing for this long means the engine hung (the
    phase's later requests are recorded as not sent)."""
    planned = build_schedule(spec, seed=spec.seed, max_input_tokens=max_input_tokens)
    summary = summarize_schedule([r for r in planned if r.phase.value == "measured"])
    conc = concurrency_of(spec)
    drafts_before = read_counters(endpoint)
    phase = run_schedule(endpoint, planned, conc, seed=spec.seed, progress=progress,
                         counter=counter, timeout_s=stall_timeout_s)
    drafts_after = read_counters(endpoint) if drafts_before is not None else None
    records, wall = phase.records, phase.wall_s
    if summary.clipped_inputs and say is not None:
        say(f"{spec.name}: WARNING {summary.clipped_inputs} measured prompt(s) drawn longer "
            f"than {max_input_tokens:,} tokens were cut to it; cap the length distribution "
            "(max_tokens) to measure exactly the workload asked for")
    closed = getattr(spec.arrival, "concurrency", None) is not None
    level = with_counted_drafts(with_monitors(summarize_level(records, conc, wall, closed),
                                              phase),
                                drafts_before, drafts_after, read_accept_length(endpoint))
    if level.client_saturated and say is not None:
        say(f"{spec.name}: WARNING the load generator was the bottleneck: "
            f"{level.client_bound_reason}")
    df = records_frame(records)
    path = None
    if out_dir is not None:
        path = str(save_parquet(df, out_dir / f"{spec.name}.requests.parquet"))
    check = validate_records(df)
    slos, good = evaluate_slos(records, spec.slos, wall)
    return ScenarioResult(
        name=spec.name, arrival=spec.arrival.kind, level=level,
        input_tokens_mean=summary.input_tokens_mean, output_tokens_mean=summary.output_tokens_mean,
        clipped_inputs=summary.clipped_inputs,
        slos=slos, goodput_requests_per_s=good,
        slo_violated=not all(s.met for s in slos) if slos else None,
        validation_passed=check.success, validation_failures=check.failed,
        errors_by_kind=errors_by_kind(df), records_path=path), records


def measure_workload(endpoint: Endpoint, workload: Workload, *, out_dir: Path | None,
                     max_input_tokens: int, counter: Counter | None = None,
                     say: Say | None = None, stall_timeout_s: float = STALL_TIMEOUT_S
                     ) -> tuple[BenchmarkResult, list[RequestRecord]]:
    """Every scenario of the workload, in order, with its cool-down between them."""
    talk = say or (lambda _msg: None)
    results, all_records = [], []
    specs = workload.scenarios()
    for i, spec in enumerate(specs):
        result, records = measure(endpoint, spec, out_dir=out_dir,
                                  max_input_tokens=max_input_tokens,
                                  progress=every_quarter(talk, spec.name), counter=counter,
                                  say=talk, stall_timeout_s=stall_timeout_s)
        results.append(result)
        all_records.extend(records)
        if spec.cooldown_s and i + 1 < len(specs):
            time.sleep(spec.cooldown_s)  # let the engine drain before the next scenario
    return BenchmarkResult(workload=workload, scenarios=results), all_records
