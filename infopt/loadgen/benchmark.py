"""Workload -> closed-loop levels -> summarized BenchmarkResult.

Each level: warm-up requests (discarded, at least the level's concurrency so every slot has run
once), then the measured requests. Summaries are pure functions of the records.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable
from typing import Any

from infopt.analysis.stats import percentiles
from infopt.loadgen.client import RequestSpec, run_closed_loop, synthetic_prompt
from infopt.loadgen.monitor import LoopLagProbe, ResourceSampler, client_saturated
from infopt.loadgen.tokens import Counter, exact_prompt
from infopt.specs.results import BenchmarkResult, LevelResult, RequestRecord
from infopt.specs.workload import Workload

Progress = Callable[[str], None]


def summarize_level(records: list[RequestRecord], concurrency: int, wall_s: float) -> LevelResult:
    ok = [r for r in records if r.ok]
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    return LevelResult(
        concurrency=concurrency,
        requests=len(records),
        errors=len(records) - len(ok),
        lengths_not_reached=sum(1 for r in ok if not r.length_reached),
        duration_s=wall_s,
        ttft_s=percentiles([r.ttft_s for r in ok if r.ttft_s is not None]),
        itl_s=percentiles([g for r in ok for g in r.itl_s]),
        e2e_s=percentiles([r.e2e_s for r in ok if r.e2e_s is not None]),
        output_tokens_total=out_tokens,
        prompt_tokens_mean=(sum(prompts) / len(prompts)) if (prompts := [
            r.prompt_tokens for r in ok if r.prompt_tokens is not None]) else None,
        output_tokens_per_s=out_tokens / wall_s if wall_s > 0 else 0.0,
        requests_per_s=len(ok) / wall_s if wall_s > 0 else 0.0,
    )


def _specs(n: int, workload: Workload, concurrency: int, tag: str,
           rng: random.Random, counter: Counter | None = None) -> list[RequestSpec]:
    specs = []
    for _ in range(n):
        rid = f"{tag}-{uuid.UUID(int=rng.getrandbits(128)).hex[:12]}"
        if counter is not None:  # exact length, counted by the engine's own tokenizer
            text, _ = exact_prompt(rid, workload.input_tokens, counter, seed=0)
        else:
            text = synthetic_prompt(rid, workload.input_tokens, rng)
        specs.append(RequestSpec(rid, text, workload.output_tokens, concurrency))
    return specs


def run_benchmark(base_url: str, model: str, workload: Workload,
                  forced_length_fields: dict[str, Any], *, seed: int,
                  progress: Progress | None = None, engine_pid: int | None = None,
                  counter: Counter | None = None
                  ) -> tuple[BenchmarkResult, list[RequestRecord]]:
    """Run every concurrency level of `workload`; returns the summary and the measured records."""
    rng = random.Random(seed)
    url = f"{base_url}/v1/chat/completions"
    levels: list[LevelResult] = []
    all_records: list[RequestRecord] = []
    say = progress or (lambda _msg: None)
    for conc in workload.concurrency_levels:
        warm = _specs(workload.warmup_for(conc), workload, conc, "warm", rng, counter)
        if warm:
            asyncio.run(run_closed_loop(url, model, warm, conc, forced_length_fields))
        specs = _specs(workload.requests_per_level, workload, conc, f"c{conc}", rng, counter)
        step = max(1, len(specs) // 4)

        def on_done(done: int, total: int, conc: int = conc) -> None:
            if done % step == 0 or done == total:
                say(f"concurrency {conc}: {done}/{total} requests done")

        probe = LoopLagProbe()
        with ResourceSampler(engine_pid) as sampler:
            records, wall_s = asyncio.run(
                run_closed_loop(url, model, specs, conc, forced_length_fields, on_done,
                                probe=probe))
        level = summarize_level(records, conc, wall_s)
        health, usage = probe.result(), sampler.result()
        levels.append(level.model_copy(update={
            "client_loop_lag_p99_s": health.loop_lag_p99_s,
            "client_saturated": client_saturated(health, level.itl_s.p50),
            "engine_cpu_percent_mean": usage.cpu_percent_mean,
            "engine_rss_peak_bytes": usage.rss_peak_bytes}))
        if levels[-1].client_saturated:
            say(f"concurrency {conc}: WARNING client event-loop lag p99 "
                f"{health.loop_lag_p99_s * 1e3:.1f} ms: the load generator may be the bottleneck")
        all_records.extend(records)
    return BenchmarkResult(workload=workload, levels=levels), all_records
