"""Summaries of a measured phase (pure functions of its records) and the progress callback;
`infopt.loadgen.measure` is the one path that produces them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from infopt.analysis.stats import percentiles
from infopt.loadgen.monitor import client_bound_reason
from infopt.loadgen.runner import PhaseResult
from infopt.loadgen.steady import steady_window
from infopt.specs.results import LevelResult, RequestRecord

Progress = Callable[[str], None]


def summarize_level(records: list[RequestRecord], concurrency: int, wall_s: float,
                    closed: bool = False) -> LevelResult:
    """`closed`: a closed loop at `concurrency` workers, whose steady-state window is counted
    beside the whole phase."""
    ok = [r for r in records if r.ok]
    steady = steady_window(records, concurrency) if closed else None
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    cached = [r.prompt_tokens_cached for r in ok if r.prompt_tokens_cached is not None]
    drafted = [r for r in ok if r.draft_tokens is not None]
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
        prompt_tokens_cached_total=sum(cached) if cached else None,
        draft_tokens_total=sum(r.draft_tokens or 0 for r in drafted) if drafted else None,
        draft_tokens_accepted_total=(sum(r.draft_tokens_accepted or 0 for r in drafted)
                                     if drafted else None),
        output_tokens_per_s=per_s(out_tokens),
        steady_output_tokens_per_s=steady.output_tokens_per_s if steady else None,
        steady_window_s=steady.duration_s if steady else None,
        total_tokens_per_s=per_s(out_tokens + sum(prompts)),
        requests_per_s=per_s(len(ok)),
    )


def with_monitors(level: LevelResult, phase: PhaseResult) -> LevelResult:
    """The level plus what was watched during it: client loop lag, engine CPU/memory/GPU."""
    usage = phase.engine
    reason = client_bound_reason(phase.client, level.itl_s.p50)
    return level.model_copy(update={
        "client_loop_lag_p99_s": phase.client.loop_lag_p99_s,
        "client_cpu_share": phase.client.cpu_share,
        "client_saturated": reason is not None,
        "client_bound_reason": reason,
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
