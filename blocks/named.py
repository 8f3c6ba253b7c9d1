"""Blocks loaded by name (ResultsStore, EngineRuntime, ClusterTarget), and a run's results
store: what the optimize flow (and `infopt optimize --results-store`) does at the start of a
run so a run whose disk went away resumes elsewhere.

`open_results_store(name, run_dir)`: load the block, restore what the store holds of this run
into `run_dir` (files not already here: completed trials are then loaded, not re-run), and
attach the store so every later trial, report and verdict is also written there.
"""

from __future__ import annotations

import logging
from pathlib import Path

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

from blocks.cluster import ClusterTarget
from blocks.loading import load_named
from blocks.results_store import ResultsStore
from blocks.runtime import EngineRuntime
from infopt.runs.rundir import attach_store
from infopt.runs.store import RunStore


def load_results_store(name: str) -> RunStore:
    """The store saved as ResultsStore block `name`."""
    return load_named(ResultsStore, name, "ResultsStore(url=...)").run_store()


def load_engine_runtime(name: str) -> EngineRuntime:
    return load_named(EngineRuntime, name,
                      "EngineRuntime(engine=..., version=..., binary_path=...)")


def load_cluster_target(name: str) -> ClusterTarget:
    return load_named(ClusterTarget, name, "ClusterTarget(namespace=..., gpu_node_selector=...)")


def restore_run(name: str, run_dir: Path) -> list[Path]:
    """Files of `run_dir` restored from store `name` (those missing here)."""
    return load_results_store(name).pull(run_dir.name, run_dir.parent)


def open_results_store(name: str | None, run_dir: Path) -> RunStore | None:
    """Restore, then attach (see the module docstring). None: no store named."""
    if name is None:
        return None
    store = load_results_store(name)
    restored = store.pull(run_dir.name, run_dir.parent)
    attach_store(run_dir, store)
    _logger().info("results store %s (block '%s'): %d file(s) of run %s restored here; every "
                   "trial and report is written there too", store.url, name, len(restored),
                   run_dir.name)
    return store


def _logger() -> logging.Logger | logging.LoggerAdapter:
    try:
        return get_run_logger()
    except MissingContextError:  # called outside a flow run (tests, the CLI)
        return logging.getLogger(__name__)
