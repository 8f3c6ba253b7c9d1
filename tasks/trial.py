"""The one per-trial Prefect task, `run-trial`, over infopt.runs.trial_run (start, contract,
quality, measure and stop are plain calls inside it, not tasks of their own). A trial whose
engine a signal killed is asked again by the climb (infopt.tuning.climb), as its own task."""

from __future__ import annotations

import logging

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError

from infopt.engines.session import EnginePool
from infopt.runs import trial_run
from infopt.runs.engine_run import EngineRun
from infopt.specs.fit import MemoryFit
from infopt.specs.results import Trial
from infopt.specs.trial import TrialSpec


def _log() -> logging.Logger | logging.LoggerAdapter:
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("infopt.tasks.trial")


@task(name="run-trial", cache_policy=NO_CACHE)
def run_trial(spec: TrialSpec, key: str, fit: MemoryFit | None, ctx: EngineRun,
              pool: EnginePool | None = None) -> Trial:
    """`pool`: engines kept up between trials (flows/climb.run_climb); None: the trial starts
    and stops its own."""
    return trial_run.run_trial(spec, key, fit, ctx, pool, _log())
