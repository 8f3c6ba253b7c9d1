"""A run's results store, by `ResultsStore` block name: what the optimize flow (and
`infopt optimize --results-store`) does at the start of a run so a run whose disk went away
resumes elsewhere.

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
from blocks.results_store import ResultsStore
from blocks.runtime import EngineRuntime
from infopt.report.rundir import attach_store
from infopt.report.store import RunStore
from infopt.specs.base import InputError


def load_results_store(name: str) -> RunStore:
    """The store saved as ResultsStore block `name`; InputError saying how to make it."""
    try:
        block = ResultsStore.load(name)
    except ValueError as exc:  # Prefect's "Unable to find block document named ..."
        raise InputError(
            f"no ResultsStore block named '{name}' ({exc}). Create it once on this Prefect "
            "server: `PYTHONPATH=. prefect block register -m blocks`, then in the UI (Blocks "
            f"-> + -> infopt results store) or `ResultsStore(url=...).save('{name}')`") from None
    return block.run_store()


def load_engine_runtime(name: str) -> EngineRuntime:
    """The EngineRuntime block `name`; InputError saying how to make it."""
    try:
        return EngineRuntime.load(name)
    except ValueError as exc:
        raise InputError(
            f"no EngineRuntime block named '{name}' ({exc}). Create it once on this Prefect "
            "server: `PYTHONPATH=. prefect block register -m blocks`, then in the UI or "
            f"`EngineRuntime(engine=..., version=..., binary_path=...).save('{name}')`") from None


def load_cluster_target(name: str) -> ClusterTarget:
    """The ClusterTarget block `name`; InputError saying how to make it."""
    try:
        return ClusterTarget.load(name)
    except ValueError as exc:
        raise InputError(
            f"no ClusterTarget block named '{name}' ({exc}). Create it once on this Prefect "
            "server: `PYTHONPATH=. prefect block register -m blocks`, then in the UI or "
            f"`ClusterTarget(namespace=..., gpu_node_selector=...).save('{name}')`") from None


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
