"""The quality gate's Prefect tasks at the run's level: each a thin wrapper over
infopt.quality.gate_run with the task's run logger (the reference and floor, the task sets; a
trial's verdict is judged inside its run-trial task)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.engines.session import CATALOG_ONLY, Troubleshooting
from infopt.quality import gate_run
from infopt.quality.keys import DEFAULT_MAX_PROMPTS
from infopt.specs.quality import TaskSetResult
from infopt.specs.results import RunningEngine


@task(name="quality-reference", cache_policy=NO_CACHE)
def quality_reference(config, quality_dir: str, weights_bytes: int, key: str,
                      weights_why: str | None = None, prompts: int = DEFAULT_MAX_PROMPTS,
                      troubleshoot: Troubleshooting = CATALOG_ONLY) -> tuple[str | None, str]:
    return gate_run.quality_reference(config, quality_dir, weights_bytes, key, weights_why,
                                      prompts, troubleshoot, get_run_logger())


@task(name="reference-task-sets", cache_policy=NO_CACHE)
def reference_task_sets(config, quality_dir: str, weights_bytes: int, key: str,
                        items_per_set: int, troubleshoot: Troubleshooting = CATALOG_ONLY
                        ) -> list[TaskSetResult]:
    return gate_run.reference_task_sets(config, quality_dir, weights_bytes, key, items_per_set,
                                        troubleshoot, get_run_logger())


@task(name="task-sets", cache_policy=NO_CACHE)
def task_sets(running: RunningEngine, config, quality_dir: str, key: str,
              items_per_set: int) -> list[TaskSetResult]:
    return gate_run.task_sets(running, config, quality_dir, key, items_per_set,
                              get_run_logger())
