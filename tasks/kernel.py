"""The kernel path of the recommended configuration as a task (infopt.engines.kernel_path)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.engines.kernel_path import kernel_path
from infopt.engines.session import CATALOG_ONLY, Troubleshooting
from infopt.specs.results import KernelPath, Trial


@task(name="kernel-path", cache_policy=NO_CACHE)
def kernel_path_task(winner: Trial, run_dir: str, weights_bytes: int,
                     troubleshoot: Troubleshooting = CATALOG_ONLY) -> KernelPath:
    return kernel_path(winner, run_dir, weights_bytes, troubleshoot, get_run_logger())
