"""Benchmark a running engine on the workload; per-request records go to the trial folder."""

from __future__ import annotations

from pathlib import Path

import httpx
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.analysis.records import errors_by_kind, records_frame, save_parquet
from infopt.analysis.validation import validate_records
from infopt.engines import adapter_for
from infopt.loadgen.benchmark import run_benchmark
from infopt.loadgen.tokens import engine_counter
from infopt.report.rundir import trial_dir, write_records
from infopt.specs.results import BenchmarkResult, RunningEngine
from infopt.specs.workload import Workload


@task(name="benchmark", cache_policy=NO_CACHE)
def benchmark(running: RunningEngine, served_model_name: str, workload: Workload, seed: int,
              run_dir: str, trial_id: str) -> BenchmarkResult:
    logger = get_run_logger()
    adapter = adapter_for(running.engine)
    with httpx.Client(timeout=30.0) as client:
        # Prompts of exactly workload.input_tokens, counted by the engine's own tokenizer.
        counter = engine_counter(client, running.base_url, served_model_name,
                                 adapter.tokenize_path, adapter.tokenize_body,
                                 adapter.tokenize_count) if adapter.tokenize_path else None
        result, records = run_benchmark(
            running.base_url, served_model_name, workload,
            adapter.forced_length_fields(workload.output_tokens), seed=seed,
            progress=lambda msg: logger.info("%s: %s", trial_id, msg),
            engine_pid=running.pid, counter=counter)
    write_records(Path(run_dir), trial_id, records)
    # One row per request as parquet, then the great-expectations suite: a failed validation
    # marks the trial (its numbers are not trusted for the decision).
    df = records_frame(records)
    parquet = save_parquet(df, trial_dir(Path(run_dir), trial_id) / "requests.parquet")
    check = validate_records(df)
    result = result.model_copy(update={
        "validation_passed": check.success, "validation_failures": check.failed,
        "errors_by_kind": errors_by_kind(df), "records_path": str(parquet)})
    if not check.success:
        logger.warning("%s: record validation FAILED: %s", trial_id, check.failure_message())
    for lvl in result.levels:
        logger.info(
            "%s c=%d: TTFT p50 %.1f ms, ITL p50 %.1f ms, %.1f out tok/s, %d errors, %d short",
            trial_id, lvl.concurrency, (lvl.ttft_s.p50 or 0) * 1e3, (lvl.itl_s.p50 or 0) * 1e3,
            lvl.output_tokens_per_s, lvl.errors, lvl.lengths_not_reached)
    return result
