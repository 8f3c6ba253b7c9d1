"""Start and stop engines through the shared process control."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from blocks.credentials import github_token
from infopt.engines import adapter_for, process
from infopt.engines.session import apply_remedy
from infopt.specs.approval import ExposureGrant
from infopt.specs.base import EngineStartError, PortTaken, ReadinessTimeout
from infopt.specs.diagnosis import Diagnosis, Remedy
from infopt.specs.results import RunningEngine
from infopt.specs.serving import AnyServingConfig, config_identity
from infopt.troubleshoot.diagnose import contract_preserving_remedy, diagnose_file


def _is_transient(task, task_run, state) -> bool:
    """Retry only transient failures: a port taken between our pick and the engine's bind, or a
    start slower than the readiness timeout. Deterministic failures go to diagnosis instead."""
    try:
        state.result()
    except (PortTaken, ReadinessTimeout):
        return task_run.run_count <= 2
    except Exception:  # noqa: BLE001 - anything else is deterministic: no retry
        return False
    return False


@task(name="start-engine", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1,
      retry_condition_fn=_is_transient)
def start_engine(config: AnyServingConfig, log_path: str, weights_bytes: int,
                 exposure: ExposureGrant | None = None) -> RunningEngine:
    adapter = adapter_for(config.engine)
    executable = adapter.locate()
    logger = get_run_logger()
    logger.info("starting %s: log %s", adapter.display_name, log_path)
    running = process.start(adapter, config, executable, Path(log_path), weights_bytes,
                            exposure=exposure)
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


@dataclass(frozen=True)
class Troubleshooting:
    """How a failed start is looked into: the known-failure catalog always; upstream issue
    search when `search` (its host, and the credentials block holding the GitHub token)."""

    search: bool = False
    github_url: str | None = None
    credentials_block: str | None = None
    token_to_url: bool = False


@dataclass(frozen=True)
class Started:
    """What an engine session started: the engine, the configuration it runs (a remedy
    applied), and the failed first start's diagnosis and the remedy, when there was one."""

    running: RunningEngine
    config: AnyServingConfig
    diagnosis: Diagnosis | None = None
    remedy: Remedy | None = None


class StartFailed(EngineStartError):
    """The start failed, after its one contract-preserving remedy where the catalog had one:
    the last diagnosis, the configuration last tried and the remedy applied."""

    def __init__(self, cause: EngineStartError, diagnosis: Diagnosis,
                 config: AnyServingConfig, remedy: Remedy | None):
        super().__init__(str(cause), cause.log_path)
        self.diagnosis, self.config, self.remedy = diagnosis, config, remedy


@contextmanager
def engine_session(config: AnyServingConfig, log_path: str | Path, weights_bytes: int, *,
                   troubleshoot: Troubleshooting = Troubleshooting(),
                   exposure: ExposureGrant | None = None) -> Iterator[Started]:
    """The one way infopt runs an engine: start it; on a failed start, diagnose the log
    (issue-first), apply the first remedy that keeps the API contract (its knobs and
    environment, `infopt.engines.session.apply_remedy`) and start once more; yield what
    started; always stop it. Raises StartFailed when no start succeeded."""
    log = Path(log_path)
    try:
        started = Started(start_engine(config, str(log), weights_bytes, exposure), config)
    except EngineStartError as exc:
        started = _remedied(config, log, weights_bytes, exc, troubleshoot, exposure)
    try:
        yield started
    finally:
        stop_engine(started.running)


def _remedied(config: AnyServingConfig, log: Path, weights_bytes: int, exc: EngineStartError,
              ts: Troubleshooting, exposure: ExposureGrant | None) -> Started:
    logger = get_run_logger()
    logger.warning("start failed: %s", str(exc).splitlines()[0])
    diag = diagnose_start(exc.log_path or str(log), str(config.engine), ts.search,
                          ts.github_url, ts.credentials_block, ts.token_to_url)
    remedy = contract_preserving_remedy(diag, config)  # one whose knobs this engine has
    fixed = apply_remedy(config, remedy) if remedy is not None else None
    if fixed is None:
        raise StartFailed(exc, diag, config, None) from exc
    logger.info("applying remedy (keeps the contract): %s", remedy.change)
    retry_log = log.with_name(f"{log.stem}.remedied{log.suffix}")
    try:
        return Started(start_engine(fixed, str(retry_log), weights_bytes, exposure), fixed,
                       diag, remedy)
    except EngineStartError as again:
        raise StartFailed(again, diagnose_start(
            str(retry_log), str(config.engine), ts.search, ts.github_url, ts.credentials_block,
            ts.token_to_url), fixed, remedy) from again


class EnginePool:
    """Engines kept up across trials, so paired windows alternate between running engines
    instead of restarting them (a restart's own variance and minutes gone). At most `capacity`
    engines are up at once: two on a CPU host whose free memory holds another engine (the
    incumbent and its candidate), one on a GPU host, where each engine claims most of the GPU
    memory (there, rounds alternate restarts). A configuration's engine is reused only while it
    is alive; the least recently used is stopped to make room. `close` stops them all."""

    def __init__(self, capacity: int, troubleshoot: Troubleshooting = Troubleshooting()):
        self.capacity = max(1, capacity)
        self.troubleshoot = troubleshoot
        self._up: dict[str, tuple[Started, ExitStack]] = {}  # config key -> session, LRU order

    @staticmethod
    def _key(config: AnyServingConfig) -> str:
        return json.dumps(config_identity(config), sort_keys=True)

    @contextmanager
    def session(self, config: AnyServingConfig, log_path: str | Path, weights_bytes: int,
                fits_beside: bool = True) -> Iterator[Started]:
        """The running engine of `config` (started when none is up); kept up afterwards unless
        the caller `discard`s it. `fits_beside`: whether this host's free memory holds it next
        to the engines already up (False: they are stopped first)."""
        key = self._key(config)
        held = self._up.pop(key, None)
        if held is not None and process.exit_status(held[0].running.pid) is not None:
            held[1].close()  # it died since: start it afresh
            held = None
        if held is None:
            while self._up and (len(self._up) >= self.capacity or not fits_beside):
                self._stop(next(iter(self._up)))
            stack = ExitStack()
            started = stack.enter_context(engine_session(
                config, log_path, weights_bytes, troubleshoot=self.troubleshoot))
            held = (started, stack)
        self._up[key] = held  # most recently used last
        yield held[0]

    def discard(self, config: AnyServingConfig) -> None:
        """Stop `config`'s engine (it died, hung or misbehaved: the next trial starts afresh)."""
        if (key := self._key(config)) in self._up:
            self._stop(key)

    def _stop(self, key: str) -> None:
        _, stack = self._up.pop(key)
        stack.close()

    def close(self) -> None:
        while self._up:
            self._stop(next(iter(self._up)))
