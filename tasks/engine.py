"""Start and stop engines through the shared process control."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.engines import adapter_for
from infopt.engines import process
from infopt.specs.approval import ExposureGrant
from infopt.specs.base import EngineStartError
from infopt.specs.diagnosis import Diagnosis
from infopt.troubleshoot.diagnose import diagnose_file
from blocks.credentials import github_token
from infopt.specs.results import RunningEngine
from infopt.specs.serving import AnyServingConfig


_TRANSIENT = ("address already in use", "couldn't bind", "did not answer")


def _is_transient(task, task_run, state) -> bool:
    """Retry only transient failures: a port taken between our pick and the engine's bind, or a
    start slower than the readiness timeout. Deterministic failures go to diagnosis instead."""
    try:
        state.result()
    except EngineStartError as exc:
        return any(t in str(exc).lower() for t in _TRANSIENT) and task_run.run_count <= 2
    except Exception:  # noqa: BLE001 - anything else is deterministic: no retry
        return False
    return False


@task(name="start-engine", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1,
      retry_condition_fn=_is_transient)
def start_engine(config: AnyServingConfig, log_path: str, weights_bytes: int,
                 extra_env: dict[str, str] | None = None,
                 exposure: ExposureGrant | None = None) -> RunningEngine:
    adapter = adapter_for(config.engine)
    executable = adapter.locate()
    logger = get_run_logger()
    logger.info("starting %s: log %s", adapter.display_name, log_path)
    running = process.start(adapter, config, executable, Path(log_path), weights_bytes,
                            extra_env=extra_env, exposure=exposure)
    logger.info("%s %s ready at %s in %.1f s", adapter.display_name, running.version,
                running.base_url, running.startup_s)
    return running


@task(name="stop-engine", cache_policy=NO_CACHE)
def stop_engine(running: RunningEngine) -> int | None:
    return process.stop(running.pid)


@task(name="diagnose-start", cache_policy=NO_CACHE)
def diagnose_start(log_path: str, engine: str, search: bool, github_url: str | None,
                   credentials_block: str | None = None,
                   github_token_to_url: bool = False) -> Diagnosis:
    """Issue-first: root error, known failures, upstream issues (offline -> catalog only)."""
    logger = get_run_logger()
    d = diagnose_file(log_path, engine, search=search, github_url=github_url,
                      github_token=github_token(credentials_block) if search else None,
                      github_token_to_url=github_token_to_url, log=logger)
    logger.warning("diagnosis (%s): %s", d.category.value, d.root_error[:300])
    for m in d.matches[:3]:
        logger.info("  upstream [%s %.2f]: %s %s", m.source, m.score, m.title, m.url)
    logger.info("  search: %s", d.search)
    return d
