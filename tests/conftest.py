"""Test-wide settings: Prefect never writes to ~/.prefect and never phones home."""

from __future__ import annotations

import os
import tempfile

import pytest

# Set before anything imports prefect (conftest is imported first). Each pytest-xdist worker
# (`make test` runs two) gets its own: the workers inherit the controller's environment, and
# two ephemeral Prefect servers on one SQLite database lock each other out.
_PREFECT_HOME = tempfile.mkdtemp(prefix="infopt-test-prefect-")
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["PREFECT_HOME"] = _PREFECT_HOME
else:
    os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
# Helpers of the flow are also called directly in tests (outside a flow run).
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
# The quality gate's kept references, scores and verdicts, and the kept API-contract results:
# this session's own folders, so no verdict and no contract table comes from the machine's
# earlier runs (every session probes its engines; the engines' cache stays shared).
os.environ["INFOPT_QUALITY_CACHE_DIR"] = tempfile.mkdtemp(prefix="infopt-test-quality-")
os.environ["INFOPT_CONTRACT_CACHE_DIR"] = tempfile.mkdtemp(prefix="infopt-test-contract-")


def _free_port() -> int:
    # Imported here, not at the top: nothing of infopt (or Prefect through it) may load before
    # the PREFECT_* variables above are set.
    from infopt.engines.process import free_port

    return free_port()


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """A real `prefect server start` on 127.0.0.1 (API and UI), for the tests whose flows are
    answered from another process; yields the environment that points at it."""
    from tests import prefectserver

    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
    proc = prefectserver.start(home, port, env)
    yield env
    prefectserver.stop(proc)


# Session fixtures that cost a minute or more: every test that uses one runs on the same
# pytest-xdist worker, so each is built once. The other tests go with their module (module
# fixtures: a llama-server, a fixture hub) and the workers take modules as they free up.
_SHARED_GROUPS = (("optimized_run", "optimized-run"), ("vllm_server", "vllm"),
                  ("vllm_failed_starts", "vllm"))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        names = set(getattr(item, "fixturenames", ()))
        group = next((g for fixture, g in _SHARED_GROUPS if fixture in names),
                     item.nodeid.split("::", 1)[0])
        item.add_marker(pytest.mark.xdist_group(group))
