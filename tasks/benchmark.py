"""Benchmark a running engine on the workload; per-request records go to the trial folder."""

from __future__ import annotations

from pathlib import Path

import httpx
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.analysis.records import errors_by_kind, records_frame, save_parquet
from infopt.analysis.validation import validate_records
from infopt.engines import endpoint_for
from infopt.loadgen.benchmark import every_quarter, run_benchmark
from infopt.loadgen.standalone import run_scenario
from infopt.loadgen.tokens import prompt_counter
from infopt.specs.scenarios import standard_scenarios
from infopt.report.rundir import trial_dir, write_records
from infopt.specs.base import InputError
from infopt.specs.results import BenchmarkResult, RunningEngine, ScenarioResult
from infopt.specs.workload import Workload


@task(name="benchmark", cache_policy=NO_CACHE)
def benchmark(running: RunningEngine, served_model_name: str, workload: Workload, seed: int,
              run_dir: str, trial_id: str, max_input_tokens: int | None = None,
              tokenizer_path: str | None = None) -> BenchmarkResult:
    logger = get_run_logger()
    endpoint = endpoint_for(running.engine, running.base_url, served_model_name, running.pid)
    with httpx.Client(timeout=30.0) as client:
        # Prompts of exactly workload.input_tokens, counted by the engine's own tokenizer (or
        # the model's tokenizer.json when the engine has no tokenize route).
        counter = prompt_counter(client, endpoint, tokenizer_path)
        result, records = run_benchmark(
            endpoint, workload, seed=seed,
            progress=lambda msg: logger.info("%s: %s", trial_id, msg), counter=counter,
            max_input_tokens=max_input_tokens)
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


@task(name="benchmark-scenarios", cache_policy=NO_CACHE)
def benchmark_scenarios(running: RunningEngine, served_model_name: str,
                        native_context_tokens: int, target_concurrency: int,
                        requests_override: int | None, seed: int, run_dir: str,
                        trial_id: str, names: list[str] | None = None,
                        tokenizer_path: str | None = None) -> list[ScenarioResult]:
    """The specification's standard scenarios (short, medium, full context, single stream,
    target concurrency) on one running configuration; exact prompt lengths."""
    logger = get_run_logger()
    specs = standard_scenarios(native_context_tokens, target_concurrency)
    if names:
        unknown = set(names) - {s.name for s in specs}
        if unknown:
            raise InputError(f"unknown scenario(s) {sorted(unknown)}; choose from "
                             f"{[s.name for s in specs]} or 'all'")
        specs = [s for s in specs if s.name in names]
    if requests_override:
        specs = [s.model_copy(update={"measured_requests": requests_override,
                                      "seed": seed}) for s in specs]
    out = trial_dir(Path(run_dir), trial_id)
    results = []
    endpoint = endpoint_for(running.engine, running.base_url, served_model_name, running.pid)
    with httpx.Client(timeout=60.0) as client:
        counter = prompt_counter(client, endpoint, tokenizer_path)
        for spec in specs:
            logger.info("%s: scenario %s (%s)", trial_id, spec.name, spec.description or "")
            r = run_scenario(endpoint, spec, out_dir=out, max_input_tokens=native_context_tokens,
                             counter=counter,
                             progress=every_quarter(logger.info, f"{trial_id} {spec.name}"))
            lv = r.level
            logger.info("%s %s: TTFT p50 %.0f ms, ITL p50 %.1f ms, %.1f out tok/s%s", trial_id,
                        spec.name, (lv.ttft_s.p50 or 0) * 1e3, (lv.itl_s.p50 or 0) * 1e3,
                        lv.output_tokens_per_s, "" if r.validation_passed else
                        " (VALIDATION FAILED)")
            results.append(r)
    return results
