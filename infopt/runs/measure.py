"""Measure a running engine (the trial's workload, or the standard scenarios) through the one
`measure` path; per-request records and parquet go to the trial's folder in the run. Plain
functions taking a logger (tasks/benchmark.py wraps the scenarios as a task)."""

from __future__ import annotations

from pathlib import Path

import httpx

from infopt.engines import endpoint_for
from infopt.engines.session import LOG, Logger
from infopt.loadgen.measure import STALL_TIMEOUT_S, measure, measure_workload
from infopt.loadgen.summary import every_quarter
from infopt.loadgen.tokens import prompt_counter
from infopt.runs.rundir import trial_dir, write_records
from infopt.specs.base import InputError
from infopt.specs.results import BenchmarkResult, RunningEngine, ScenarioResult
from infopt.specs.scenarios import standard_scenarios
from infopt.specs.workload import Workload


def benchmark(running: RunningEngine, served_model_name: str, workload: Workload, run_dir: str,
              trial_id: str, max_input_tokens: int,
              tokenizer_path: str | None = None,
              stall_timeout_s: float = STALL_TIMEOUT_S, logger: Logger = LOG) -> BenchmarkResult:
    """Every scenario of the workload through `measure`; records and parquet in the trial's
    folder. A scenario whose records fail validation marks the trial (not trusted)."""
    endpoint = endpoint_for(running.engine, running.base_url, served_model_name, running.pid)
    with httpx.Client(timeout=30.0) as client:
        # Exact prompt lengths, counted by the engine's own tokenizer (or the model's
        # tokenizer.json when the engine has no tokenize route).
        counter = prompt_counter(client, endpoint, tokenizer_path)
        result, records = measure_workload(
            endpoint, workload, out_dir=trial_dir(Path(run_dir), trial_id),
            max_input_tokens=max_input_tokens, counter=counter,
            say=lambda msg: logger.info("%s: %s", trial_id, msg), stall_timeout_s=stall_timeout_s)
    write_records(Path(run_dir), trial_id, records)
    for s in result.scenarios:
        _log_scenario(logger, trial_id, s)
    if not result.validation_passed:
        logger.warning("%s: record validation FAILED: %s", trial_id,
                       "; ".join(result.validation_failures))
    return result


def _log_scenario(logger: Logger, trial_id: str, s: ScenarioResult) -> None:
    lv = s.level
    good = ("" if s.goodput_requests_per_s is None else
            f", goodput {s.goodput_requests_per_s:.2f} req/s"
            f"{' (SLO missed)' if s.slo_violated else ''}")
    logger.info("%s %s: TTFT p50 %.0f ms, ITL p50 %.1f ms, %.1f out tok/s, %d errors, %d short%s%s",
                trial_id, s.name, (lv.ttft_s.p50 or 0) * 1e3, (lv.itl_s.p50 or 0) * 1e3,
                lv.output_tokens_per_s, lv.errors, lv.lengths_not_reached, good,
                "" if s.validation_passed else " (VALIDATION FAILED)")


def benchmark_scenarios(running: RunningEngine, served_model_name: str,
                        native_context_tokens: int, target_concurrency: int,
                        requests_override: int | None, seed: int, run_dir: str,
                        trial_id: str, names: list[str] | None = None,
                        tokenizer_path: str | None = None, logger: Logger = LOG
                        ) -> list[ScenarioResult]:
    """The specification's standard scenarios (short, medium, full context, single stream,
    target concurrency) on one running configuration; exact prompt lengths."""
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
            r, _ = measure(endpoint, spec, out_dir=out, max_input_tokens=native_context_tokens,
                           counter=counter,
                           progress=every_quarter(logger.info, f"{trial_id} {spec.name}"),
                           say=logger.warning)
            _log_scenario(logger, trial_id, r)
            results.append(r)
    return results
