"""The one way infopt runs an engine (issue 48): start it through the shared process control; on
a failed start, diagnose its log issue-first, apply the first remedy that keeps the API contract
and start once more; always stop it. Trials, the quality gate's reference, the kernel read, the
winner's scenarios, the exposed engine, cluster replicas and the benches all start engines here,
so each gets the same retries, diagnosis and remedy, and logs to the logger it is given (a
Prefect task's run logger inside a flow, this module's logger outside one)."""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from infopt.engines import adapter_for, process
from infopt.specs.approval import ExposureGrant
from infopt.specs.base import EngineStartError, PortTaken, ReadinessTimeout
from infopt.specs.diagnosis import Diagnosis, Remedy
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import RunningEngine
from infopt.specs.serving import AnyServingConfig, config_identity
from infopt.troubleshoot.diagnose import apply_remedy, contract_preserving_remedy, diagnose_file
from infopt.troubleshoot.github import github_token as env_github_token

Logger = logging.Logger | logging.LoggerAdapter
LOG = logging.getLogger("infopt.engines.session")

# A port taken between our pick and the engine's bind, or a start slower than the readiness
# timeout, is tried again (twice, a second apart); every other failure is deterministic and
# goes to diagnosis instead.
TRANSIENT_RETRIES = 2
RETRY_DELAY_S = 1.0


@dataclass(frozen=True)
class Troubleshooting:
    """How a failed start is looked into: the known-failure catalog always; upstream issue
    search when `search` (its host, and the credentials block holding the GitHub token).
    `token_source` names the function ("module:function") that reads the token from the
    block's name when a search runs: inside a flow blocks.credentials:github_token, which reads
    the Prefect block; None: $GITHUB_TOKEN. Named, not held, so these settings travel as JSON to
    a fan-out worker, and the token itself is never a task parameter."""

    search: bool = False
    github_url: str | None = None
    credentials_block: str | None = None
    token_to_url: bool = False
    token_source: str | None = None

    @classmethod
    def of(cls, request: OptimizeRequest, token_source: str | None = None) -> Troubleshooting:
        """The request's issue-search settings: the one place they are read."""
        return cls(search=request.github_search, github_url=request.github_url,
                   credentials_block=request.credentials_block,
                   token_to_url=request.github_token_to_url, token_source=token_source)

    def token(self) -> str | None:
        """The GitHub token, read now (only when searching)."""
        if not self.search:
            return None
        if self.token_source is None:
            return env_github_token()
        module, _, name = self.token_source.partition(":")
        read: Callable[[str | None], str | None] = getattr(importlib.import_module(module),
                                                           name)
        return read(self.credentials_block)


# No upstream search: the known-failure catalog only (what a session gets unless the run's
# settings are passed).
CATALOG_ONLY = Troubleshooting()


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


def start_engine(config: AnyServingConfig, log_path: Path, weights_bytes: int, *,
                 exposure: ExposureGrant | None = None, executable: str | None = None,
                 log: Logger = LOG) -> RunningEngine:
    """One start, ready to serve; a transient failure (PortTaken, ReadinessTimeout) is tried
    again up to TRANSIENT_RETRIES times. Raises the last EngineStartError."""
    adapter = adapter_for(config.engine)
    executable = executable or adapter.locate()
    for attempt in range(TRANSIENT_RETRIES + 1):
        log.info("starting %s: log %s", adapter.display_name, log_path)
        try:
            running = process.start(adapter, config, executable, log_path, weights_bytes,
                                    exposure=exposure)
        except (PortTaken, ReadinessTimeout) as exc:
            if attempt == TRANSIENT_RETRIES:
                raise
            log.warning("start failed transiently (%s): trying again (%d of %d)",
                        str(exc).splitlines()[0][:200], attempt + 1, TRANSIENT_RETRIES)
            time.sleep(RETRY_DELAY_S)
            continue
        log.info("%s %s ready at %s in %.1f s", adapter.display_name, running.version,
                 running.base_url, running.startup_s)
        return running
    raise AssertionError("unreachable: the last attempt returns or raises")


def diagnose_start(log_path: str, engine: str, troubleshoot: Troubleshooting,
                   log: Logger = LOG) -> Diagnosis:
    """Issue-first: root error, known failures, upstream issues (offline -> catalog only)."""
    ts = troubleshoot
    d = diagnose_file(log_path, engine, search=ts.search, github_url=ts.github_url,
                      github_token=ts.token(), github_token_to_url=ts.token_to_url, log=log)
    log.warning("diagnosis (%s): %s", d.category.value, d.root_error[:300])
    for m in d.matches[:3]:
        log.info("  upstream [%s %.2f]: %s %s", m.source, m.score, m.title, m.url)
    log.info("  search: %s", d.search)
    return d


@contextmanager
def engine_session(config: AnyServingConfig, log_path: str | Path, weights_bytes: int, *,
                   troubleshoot: Troubleshooting = CATALOG_ONLY,
                   exposure: ExposureGrant | None = None, executable: str | None = None,
                   log: Logger = LOG) -> Iterator[Started]:
    """Start `config`; on a failed start, diagnose the log (issue-first), apply the first
    remedy that keeps the API contract (its knobs and environment, apply_remedy) and start
    once more; yield what started; always stop it. Raises StartFailed when no start
    succeeded."""
    path = Path(log_path)
    try:
        started = Started(start_engine(config, path, weights_bytes, exposure=exposure,
                                       executable=executable, log=log), config)
    except EngineStartError as exc:
        started = _remedied(config, path, weights_bytes, exc, troubleshoot, exposure,
                            executable, log)
    try:
        yield started
    finally:
        process.stop(started.running.pid)


def _remedied(config: AnyServingConfig, path: Path, weights_bytes: int, exc: EngineStartError,
              ts: Troubleshooting, exposure: ExposureGrant | None, executable: str | None,
              log: Logger) -> Started:
    log.warning("start failed: %s", str(exc).splitlines()[0])
    diag = diagnose_start(exc.log_path or str(path), str(config.engine), ts, log)
    remedy = contract_preserving_remedy(diag, config)  # one whose knobs this engine has
    fixed = apply_remedy(config, remedy) if remedy is not None else None
    if remedy is None or fixed is None:
        raise StartFailed(exc, diag, config, None) from exc
    log.info("applying remedy (keeps the contract): %s", remedy.change)
    retry_log = path.with_name(f"{path.stem}.remedied{path.suffix}")
    try:
        return Started(start_engine(fixed, retry_log, weights_bytes, exposure=exposure,
                                    executable=executable, log=log), fixed, diag, remedy)
    except EngineStartError as again:
        raise StartFailed(again, diagnose_start(str(retry_log), str(config.engine), ts, log),
                          fixed, remedy) from again


class EnginePool:
    """Engines kept up across trials, so paired windows alternate between running engines
    instead of restarting them (a restart's own variance and minutes gone). At most `capacity`
    engines are up at once: two on a CPU host whose free memory holds another engine (the
    incumbent and its candidate), one on a GPU host, where each engine claims most of the GPU
    memory (there, rounds alternate restarts). A configuration's engine is reused only while it
    is alive; the least recently used is stopped to make room. `close` stops them all."""

    def __init__(self, capacity: int, troubleshoot: Troubleshooting = CATALOG_ONLY,
                 log: Logger = LOG):
        self.capacity = max(1, capacity)
        self.troubleshoot = troubleshoot
        self.log = log
        self._up: dict[str, tuple[Started, ExitStack]] = {}  # config key -> session, LRU order

    @staticmethod
    def _key(config: AnyServingConfig) -> str:
        return json.dumps(config_identity(config), sort_keys=True)

    @contextmanager
    def session(self, config: AnyServingConfig, log_path: str | Path, weights_bytes: int,
                fits_beside: bool = True, log: Logger | None = None) -> Iterator[Started]:
        """The running engine of `config` (started when none is up); kept up afterwards unless
        the caller `discard`s it. `fits_beside`: whether this host's free memory holds it next
        to the engines already up (False: they are stopped first). `log`: where this start
        logs (the calling task's logger), the pool's by default."""
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
                config, log_path, weights_bytes, troubleshoot=self.troubleshoot,
                log=log or self.log))
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
