"""Workload -> one closed-loop TrafficSpec per concurrency level -> summarized BenchmarkResult.

Every level goes through the same load generator as `infopt bench` (schedule, exact prompts,
warm-up of at least the level's concurrency so every slot has run once, measured phase, client
and engine monitors, cool-down). Summaries are pure functions of the records.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from infopt.analysis.stats import percentiles
from infopt.specs.endpoint import Endpoint
from infopt.loadgen.monitor import client_saturated
from infopt.loadgen.runner import PhaseResult, run_schedule
from infopt.loadgen.schedule import build_schedule
from infopt.loadgen.tokens import Counter
from infopt.specs.results import BenchmarkResult, LevelResult, RequestRecord
from infopt.specs.traffic import ClosedLoop, FixedLengths, RouteShare, TrafficSpec
from infopt.specs.workload import Workload

Progress = Callable[[str], None]


def summarize_level(records: list[RequestRecord], concurrency: int, wall_s: float) -> LevelResult:
    ok = [r for r in records if r.ok]
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    per_s = (lambda x: x / wall_s) if wall_s > 0 else (lambda x: 0.0)
    return LevelResult(
        concurrency=concurrency,
        requests=len(records),
        errors=len(records) - len(ok),
        error_rate=(len(records) - len(ok)) / len(records) if records else 0.0,
        lengths_not_reached=sum(1 for r in ok if not r.length_reached),
        prompt_lengths_off=sum(1 for r in ok if r.prompt_length_exact is False),
        chunk_counts_assumed=sum(1 for r in ok if r.chunk_tokens_counted is False),
        duration_s=wall_s,
        ttft_s=percentiles([r.ttft_s for r in ok if r.ttft_s is not None]),
        itl_s=percentiles([g for r in ok for g in r.itl_s]),
        tpot_s=percentiles(tpots),
        e2e_s=percentiles([r.e2e_s for r in ok if r.e2e_s is not None]),
        output_tokens_total=out_tokens,
        prompt_tokens_total=sum(prompts),
        prompt_tokens_mean=float(np.mean(prompts)) if prompts else None,
        output_tokens_per_s=per_s(out_tokens),
        total_tokens_per_s=per_s(out_tokens + sum(prompts)),
        requests_per_s=per_s(len(ok)),
    )


def with_monitors(level: LevelResult, phase: PhaseResult) -> LevelResult:
    """The level plus what was watched during it: client loop lag, engine CPU/memory/GPU."""
    usage = phase.engine
    return level.model_copy(update={
        "client_loop_lag_p99_s": phase.client.loop_lag_p99_s,
        "client_saturated": client_saturated(phase.client, level.itl_s.p50),
        "engine_cpu_percent_mean": usage.cpu_percent_mean,
        "engine_cpu_percent_max": usage.cpu_percent_max,
        "engine_rss_peak_bytes": usage.rss_peak_bytes,
        "gpu_util_percent_mean": usage.gpu_util_percent_mean,
        "gpu_memory_used_peak_bytes": usage.gpu_memory_used_peak_bytes})


def every_quarter(say: Progress, label: str) -> Callable[[int, int], None]:
    """A progress callback for a measured phase: one line per quarter of its requests."""
    def on_done(done: int, total: int) -> None:
        if done == total or done % max(1, total // 4) == 0:
            say(f"{label}: {done}/{total} requests done")
    return on_done


def level_spec(workload: Workload, concurrency: int, seed: int) -> TrafficSpec:
    """One level of the workload as a closed-loop traffic spec."""
    return TrafficSpec(
        name=f"{workload.name}@c{concurrency}", arrival=ClosedLoop(concurrency=concurrency),
        input_lengths=FixedLengths(tokens=workload.input_tokens),
        output_lengths=FixedLengths(tokens=workload.output_tokens),
        peak_active_generations=concurrency, measured_requests=workload.requests_per_level,
        warmup_requests=workload.warmup_for(concurrency), cooldown_s=workload.cooldown_s,
        routes=[RouteShare(route=workload.route)], seed=seed)


def run_benchmark(endpoint: Endpoint, workload: Workload, *, seed: int,
                  progress: Progress | None = None, counter: Counter | None = None,
                  max_input_tokens: int | None = None
                  ) -> tuple[BenchmarkResult, list[RequestRecord]]:
    """Run every concurrency level of `workload` against `endpoint`; returns the summary and the
    measured records."""
    levels: list[LevelResult] = []
    all_records: list[RequestRecord] = []
    say = progress or (lambda _msg: None)
    for i, conc in enumerate(workload.concurrency_levels):
        spec = level_spec(workload, conc, seed + i)
        planned = build_schedule(spec, seed=spec.seed,
                                 max_input_tokens=max_input_tokens or workload.input_tokens)
        phase = run_schedule(endpoint, planned, conc, seed=spec.seed,
                             progress=every_quarter(say, f"concurrency {conc}"),
                             counter=counter)
        level = with_monitors(summarize_level(phase.records, conc, phase.wall_s), phase)
        levels.append(level)
        if level.client_saturated:
            say(f"concurrency {conc}: WARNING client event-loop lag p99 "
                f"{phase.client.loop_lag_p99_s * 1e3:.1f} ms: the load generator may be the "
                "bottleneck")
        all_records.extend(phase.records)
        if spec.cooldown_s and i + 1 < len(workload.concurrency_levels):
            time.sleep(spec.cooldown_s)  # let the engine drain before the next level
    return BenchmarkResult(workload=workload, levels=levels), all_records
