"""A real `prefect server start` on 127.0.0.1 for tests: the session's (tests/conftest.py) and
the ones a fault test stops and starts again on the same port and database."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def start(home: Path, port: int, env: dict[str, str], timeout_s: float = 180) -> subprocess.Popen:
    """Start it (API and UI) with PREFECT_HOME `home`, and wait for /api/health."""
    log = (home / "server.log").open("ab")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start",
                             "--host", "127.0.0.1", "--port", str(port)],
                            env={**env, "PREFECT_HOME": str(home)}, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"prefect server exited: {(home / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"prefect server did not answer /api/health within {timeout_s:.0f} s")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM its process group (the API and UI), SIGKILL it after 30 s."""
    from tests.procs import end_process

    end_process(proc)
