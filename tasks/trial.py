"""The one per-trial Prefect task, `run-trial`, over infopt.runs.trial_run (start, contract,
quality, measure and stop are plain calls inside it, not tasks of their own), and the retries
of a trial whose engine a signal killed."""

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
    """`pool`: engines kept up between trials (flows/ladder.run_climb); None: the trial starts
    and stops its own."""
    return trial_run.run_trial(spec, key, fit, ctx, pool, _log())


def run_attempts(spec: TrialSpec, key: str, fit: MemoryFit | None, ctx: EngineRun,
                 retries: int, pool: EnginePool | None = None) -> list[Trial]:
    """The trial, started afresh up to `retries` times while its engine is killed by a signal
    mid-trial (a fault of the machine, not of the configuration). Attempt n > 1 has its own
    key and id (`-retry{n-1}`), so a resumed run reloads each attempt it finished and every
    failed attempt stays in the report with its diagnosis. The last one is the outcome."""
    attempts = [run_trial(spec, key, fit, ctx, pool)]
    while attempts[-1].killed_by_signal is not None and len(attempts) <= retries:
        n = len(attempts)
        _log().warning("%s: its engine was killed by signal %d; starting it afresh (retry %d "
                       "of %d)", spec.trial_id, attempts[-1].killed_by_signal, n, retries)
        again = spec.model_copy(update={"trial_id": f"{spec.trial_id}-retry{n}"})
        attempts.append(run_trial(again, f"{key}-retry{n}", fit, ctx, pool))
    return attempts
