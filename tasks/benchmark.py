"""The winner's standard scenarios as a task (infopt.runs.measure)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.runs import measure
from infopt.specs.results import RunningEngine, ScenarioResult


@task(name="benchmark-scenarios", cache_policy=NO_CACHE)
def benchmark_scenarios(running: RunningEngine, served_model_name: str,
                        native_context_tokens: int, target_concurrency: int,
                        requests_override: int | None, seed: int, run_dir: str,
                        trial_id: str, names: list[str] | None = None,
                        tokenizer_path: str | None = None) -> list[ScenarioResult]:
    return measure.benchmark_scenarios(running, served_model_name, native_context_tokens,
                                       target_concurrency, requests_override, seed, run_dir,
                                       trial_id, names, tokenizer_path, get_run_logger())
