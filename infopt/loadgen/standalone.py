"""`infopt bench`: a workload file against any OpenAI-compatible endpoint, per scenario (a sweep
expands into one scenario per value): schedule -> run -> records -> validation -> summary."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from infopt.analysis.compare import Slo, goodput
from infopt.analysis.records import errors_by_kind, records_frame, save_parquet
from infopt.analysis.validation import validate_records
from infopt.loadgen.benchmark import summarize_level, with_monitors
from infopt.loadgen.runner import run_schedule
from infopt.loadgen.schedule import build_schedule, summarize_schedule
from infopt.specs.endpoint import Endpoint
from infopt.loadgen.tokens import Counter, hf_counter, prompt_counter
from infopt.specs.base import InputError
from infopt.specs.results import BenchResult, ScenarioResult
from infopt.specs.traffic import TrafficSpec, expand_sweep
from infopt.specs.traffic_file import load_traffic



def _concurrency(spec: TrafficSpec) -> int:
    return getattr(spec.arrival, "concurrency", None) or spec.peak_active_generations


def run_scenario(endpoint: Endpoint, spec: TrafficSpec, *, out_dir: Path | None,
                 max_input_tokens: int, progress: Callable[[int, int], None] | None = None,
                 counter: Counter | None = None) -> ScenarioResult:
    planned = build_schedule(spec, seed=spec.seed, max_input_tokens=max_input_tokens)
    summary = summarize_schedule([r for r in planned if r.phase.value == "measured"])
    conc = _concurrency(spec)
    phase = run_schedule(endpoint, planned, conc, seed=spec.seed, progress=progress,
                         counter=counter)
    records, wall = phase.records, phase.wall_s
    level = with_monitors(summarize_level(records, conc, wall), phase)
    df = records_frame(records)
    path = None
    if out_dir is not None:
        path = str(save_parquet(df, out_dir / f"{spec.name}.requests.parquet"))
    check = validate_records(df)
    # The traffic spec names metrics "ttft"; the records frame's columns are "ttft_s".
    slos = [Slo(metric=f"{s.metric.value}_s", percentile=s.percentile, max_s=s.max_s)
            for s in spec.slos]
    good = goodput(df, slos, wall) if slos else None
    return ScenarioResult(
        name=spec.name, arrival=spec.arrival.kind, level=level,
        input_tokens_mean=summary.input_tokens_mean, output_tokens_mean=summary.output_tokens_mean,
        goodput_requests_per_s=good,
        slo_violated=(good == 0.0) if slos else None,
        validation_passed=check.success, validation_failures=check.failed,
        errors_by_kind=errors_by_kind(df), records_path=path)


def run_workload_file(endpoint: Endpoint, workload_path: str, *, out_dir: str | None,
                      max_input_tokens: int, progress: Callable[[int, int], None] | None = None,
                      tokenizer: str | None = None) -> BenchResult:
    spec = load_traffic(workload_path)
    out = Path(out_dir).expanduser() if out_dir else None
    if tokenizer is not None and hf_counter(tokenizer) is None:
        raise InputError(f"--tokenizer {tokenizer}: no tokenizer.json there; give the file "
                         "or the model folder that holds it")
    with httpx.Client(timeout=60.0) as client:
        counter = prompt_counter(client, endpoint, tokenizer)
        return _run_all(spec, endpoint, workload_path, out=out,
                        max_input_tokens=max_input_tokens, progress=progress, counter=counter)


def _run_all(spec: TrafficSpec, endpoint: Endpoint, workload_path: str, *,
             out: Path | None, max_input_tokens: int,
             progress: Callable[[int, int], None] | None, counter: Counter | None
             ) -> BenchResult:
    results: list[ScenarioResult] = []
    stopped = None
    sweep = spec.arrival.kind == "sweep"
    for child in expand_sweep(spec) if sweep else [spec]:
        r = run_scenario(endpoint, child, out_dir=out, max_input_tokens=max_input_tokens,
                         progress=progress, counter=counter)
        results.append(r)
        if child.cooldown_s:  # let the engine drain and settle before the next scenario
            time.sleep(child.cooldown_s)
        if sweep and spec.arrival.stop_at_first_slo_violation and r.slo_violated:
            stopped = f"stopped at {child.name}: first SLO violation"
            break
    result = BenchResult(endpoint=endpoint.base_url, model=endpoint.model,
                         workload=str(workload_path),
                         scenarios=results, stopped_early=stopped)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(result.model_dump(mode="json"), indent=2))
    return result
