"""Shared engine process control: start in its own process group on 127.0.0.1, log to a file,
wait for readiness, stop gracefully (SIGTERM, then SIGKILL of the whole group), leave no orphans.

Every started process is registered here; `stop_all()` runs at interpreter exit and from the
flow's crash/cancel hooks, so an engine never outlives the optimizer that started it.
"""

from __future__ import annotations

import atexit
import errno
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from infopt.engines import registry
from infopt.engines.base import EngineAdapter
from infopt.engines.launch import launch_for
from infopt.engines.render import write_launch_files
from infopt.environ import scrubbed
from infopt.specs.approval import ExposureGrant, is_loopback
from infopt.specs.base import (
    EngineStartError,
    ExposureError,
    InputError,
    PortTaken,
    ReadinessTimeout,
)
from infopt.specs.results import RunningEngine
from infopt.specs.serving import AnyServingConfig

_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now. Another process can take it before the engine binds:
    that race is a transient failure the start task retries."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InputError(
                    f"port {port} on {host} is already in use by another process. Choose a free "
                    "port with --port, or omit --port to let infopt pick one.") from None
            raise


def tail(path: Path, lines: int = 20) -> str:
    """The last `lines` lines of an engine log (empty when unreadable)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _secret_env(adapter: EngineAdapter, config: AnyServingConfig, exposure: ExposureGrant | None
                ) -> dict[str, str]:
    """The one gate in front of every non-loopback bind: whatever set `config.host` (a flag, a
    file, a flow parameter, a knob), no grant from an approved expose gate means no start.
    An exposed engine always requires its API key, handed over in the environment only."""
    if is_loopback(config.host):
        return {}
    if exposure is None or not exposure.answer.approved or exposure.address != config.host:
        raise ExposureError(
            f"refusing to bind {adapter.display_name} to {config.host}: serving beyond "
            "127.0.0.1 needs an approved expose gate (the request's `expose: {address: ...}` "
            "answered in the Prefect UI or with `infopt approve`, or pre-authorized with "
            "`authorize: [expose]`); nothing else sets a non-loopback host")
    if adapter.api_key_env is None:
        raise ExposureError(f"{adapter.display_name} reads its API key only from the command "
                            "line, where any local user sees it: infopt does not expose it")
    return {adapter.api_key_env: exposure.api_key.get_secret_value()}


def engine_environ(adapter: EngineAdapter, environ: dict[str, str] | None = None
                   ) -> dict[str, str]:
    """`environ` without credentials: an engine runs third-party code and writes its own
    logs, and needs none of infopt's tokens (it serves local files) unless its adapter says so.
    The exposure API key is added after this, on purpose."""
    return scrubbed(environ, adapter.passes_secrets)


def _connect_host(host: str) -> str:
    """Where this machine reaches an engine bound to `host` (a wildcard bind: loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def listening(pid: int) -> list[str]:
    """The addresses the engine's process group really listens on ("ip:port"), read from
    the kernel's socket table: what the report states, never the configured value."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    found = set()
    for p in procs:
        try:
            found |= {f"{c.laddr.ip}:{c.laddr.port}" for c in p.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return sorted(found)


def start(adapter: EngineAdapter, config: AnyServingConfig, executable: str, log_path: Path,
          weights_bytes: int, *, poll_interval_s: float = 0.25,
          exposure: ExposureGrant | None = None) -> RunningEngine:
    """Launch `config` with `adapter` (its `env` on top of the adapter's) and block until its
    health route answers 200.
    `exposure`: the grant a non-loopback `config.host` needs (its key goes to the engine's
    environment only: not in the printed command, the log or the returned record)."""
    secret_env = _secret_env(adapter, config, exposure)
    port = config.port if config.port is not None else free_port(config.host)
    if config.port is not None:
        check_port_free(config.host, port)
    launch = launch_for(adapter, config, executable, port)
    write_launch_files(launch)  # side files the argv points at (TensorRT-LLM's options YAML)
    version = adapter.detect_version(executable)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    timeout_s = adapter.readiness_timeout_s(weights_bytes, config)
    t0 = time.perf_counter()
    with log_path.open("ab") as log:
        log.write(f"$ {launch.command}\n".encode())
        log.flush()
        proc = subprocess.Popen(launch.argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env={**engine_environ(adapter),
                                     **launch.env, **secret_env},
                                start_new_session=True)  # own group: we can kill its children
    with _LOCK:
        _LIVE[proc.pid] = proc
    registry.record(proc.pid, launch.command)  # for reap_stale() after a SIGKILLed optimizer
    _install_signal_handlers()
    host = _connect_host(config.host)
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    try:
        _wait_ready(proc, f"{url}{adapter.health_path}", timeout_s, poll_interval_s, log_path,
                    adapter.display_name)
        _refuse_shortened_context(adapter, config, log_path)
    except BaseException:
        stop(proc.pid)
        raise
    return RunningEngine(
        engine=str(adapter.name), pid=proc.pid, base_url=url, port=port, argv=launch.argv,
        env_overrides=launch.env, command=launch.command, version=version,
        log_path=str(log_path), startup_s=time.perf_counter() - t0,
        bind_addresses=listening(proc.pid),
        api_key_source=exposure.key_source if secret_env and exposure else None)


def start_process(argv: list[str], log_path: Path, health_url: str, name: str,
                  timeout_s: float, env: dict[str, str] | None = None,
                  poll_interval_s: float = 0.25) -> int:
    """A helper process beside the engines (a router): its own process group, logged to
    `log_path`, stopped by stop() and at exit like an engine; blocks until `health_url`
    answers 200. Returns its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(argv)
    with log_path.open("ab") as log:
        log.write(f"$ {command}\n".encode())
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**scrubbed(), **(env or {})},
                                start_new_session=True)
    with _LOCK:
        _LIVE[proc.pid] = proc
    registry.record(proc.pid, command)
    _install_signal_handlers()
    try:
        _wait_ready(proc, health_url, timeout_s, poll_interval_s, log_path, name)
    except BaseException:
        stop(proc.pid)
        raise
    return proc.pid


def _refuse_shortened_context(adapter: EngineAdapter, config: Any, log_path: Path) -> None:
    if adapter.context_shortened is None:
        return
    why = adapter.context_shortened(Path(log_path).read_text(errors="replace"), config)
    if why is not None:
        raise EngineStartError(f"{adapter.display_name} started but {why}; infopt never serves "
                               "a shorter context than asked. Engine log: " + str(log_path),
                               str(log_path))


_PORT_TAKEN = re.compile(r"address already in use|couldn't bind", re.IGNORECASE)


def _wait_ready(proc: subprocess.Popen[bytes], health_url: str, timeout_s: float,
                poll_interval_s: float, log_path: Path, name: str) -> None:
    deadline = time.perf_counter() + timeout_s
    with httpx.Client(timeout=5.0) as client:
        while True:
            code = proc.poll()
            if code is not None:
                last = tail(log_path)
                # Its own words for a port taken under it (llama.cpp: "couldn't bind HTTP server
                # socket"; uvicorn, so vLLM and SGLang: "[Errno 98] ... address already in use").
                error = PortTaken if _PORT_TAKEN.search(last) else EngineStartError
                raise error(f"{name} exited with code {code} before becoming ready. Engine "
                            f"log: {log_path}\nLast lines:\n{last}", log_path=str(log_path))
            try:
                if client.get(health_url).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            if time.perf_counter() > deadline:
                raise ReadinessTimeout(
                    f"{name} did not answer {health_url} within {timeout_s:.0f} s. Engine log: "
                    f"{log_path}\nLast lines:\n{tail(log_path)}", log_path=str(log_path))
            time.sleep(poll_interval_s)


def stop(pid: int, grace_s: float = 15.0) -> int | None:
    """SIGTERM the engine's process group, SIGKILL it after `grace_s`. Returns the exit code."""
    with _LOCK:
        proc = _LIVE.pop(pid, None)
    if proc is None:
        return None
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        # A stopped engine (SIGSTOP, a debugger) acts on SIGTERM only once continued.
        os.killpg(proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    try:
        code = proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        code = None
    # Kill whatever is left of the group (vLLM's engine-core workers, for one).
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if code is None:
        code = proc.wait(timeout=10)
    registry.forget(proc.pid)
    return code


def exit_status(pid: int, wait_s: float = 0.0) -> int | None:
    """The exit code of an engine this process started, if it has exited (negative: killed by
    that signal); None while it runs or when it is not ours. `wait_s`: how long to wait for it
    to end, for a caller that saw its connection drop: a killed engine's sockets close before
    its process can be reaped, so a client can see the reset before poll() sees the exit."""
    with _LOCK:
        proc = _LIVE.get(pid)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=wait_s) if wait_s > 0 else proc.poll()
    except subprocess.TimeoutExpired:
        return None


_STATES = {"R": "running", "S": "sleeping (waiting on something)", "D": "in uninterruptible I/O",
           "T": "stopped (SIGSTOP or a debugger)", "t": "stopped by a debugger",
           "Z": "a zombie (exited)"}


def run_state(pid: int) -> str:
    """The engine process's scheduler state, in words (/proc/<pid>/stat field 3)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    code = stat[stat.rindex(")") + 2:].split()[0]
    return _STATES.get(code, f"in state {code}")


def live_pids() -> list[int]:
    with _LOCK:
        return list(_LIVE)


def stop_all() -> None:
    for pid in live_pids():
        stop(pid, grace_s=5.0)


atexit.register(stop_all)


def _install_signal_handlers() -> None:
    """On SIGTERM/SIGHUP (a cancelled deployment run, a closed terminal) stop our engines, then
    hand the signal to whoever handled it before (Prefect's own handler, or the default action).
    atexit alone is not enough: the default SIGTERM action skips it, and the engines live in
    their own process groups, so nothing else would stop them."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for sig in (signal.SIGTERM, signal.SIGHUP):
        prev = signal.getsignal(sig)
        if getattr(prev, "_infopt_stops_engines", False):
            continue

        def handler(signum: int, frame: FrameType | None, prev: Any = prev) -> None:
            stop_all()
            if callable(prev):
                prev(signum, frame)
            elif prev == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        handler._infopt_stops_engines = True  # type: ignore[attr-defined]
        signal.signal(sig, handler)
