"""Start and stop engines through the shared process control."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.engines import adapter_for
from infopt.engines import process
from infopt.specs.base import EngineStartError
from infopt.specs.results import RunningEngine
from infopt.specs.serving import LlamaCppConfig, VllmConfig


def _is_port_race(task, task_run, state) -> bool:
    """Retry only the transient failure: another process took the free port we picked."""
    try:
        state.result()
    except EngineStartError as exc:
        return "address already in use" in str(exc).lower() and task_run.run_count <= 2
    except Exception:  # noqa: BLE001 - anything else is deterministic: no retry
        return False
    return False


@task(name="start-engine", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1,
      retry_condition_fn=_is_port_race)
def start_engine(config: LlamaCppConfig | VllmConfig, log_path: str,
                 weights_bytes: int) -> RunningEngine:
    adapter = adapter_for(config.engine)
    executable = adapter.locate()
    logger = get_run_logger()
    logger.info("starting %s: log %s", adapter.display_name, log_path)
    running = process.start(adapter, config, executable, Path(log_path), weights_bytes)
    logger.info("%s %s ready at %s in %.1f s", adapter.display_name, running.version,
                running.base_url, running.startup_s)
    return running


@task(name="stop-engine", cache_policy=NO_CACHE)
def stop_engine(running: RunningEngine) -> int | None:
    return process.stop(running.pid)
