"""The fit inside the optimize flow: prune candidates that cannot hold the full context. (Each
trial labels its measured levels with their ceilings itself: tasks/trial.py.)"""

from __future__ import annotations

from prefect import get_run_logger, task

from infopt.specs.fit import MemoryFit
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.serving import AnyServingConfig
from infopt.tuning.candidates import fit_config


@task(name="fit-candidates")
def fit_candidates(model: ModelProfile, hw: HardwareInventory,
                   configs: list[AnyServingConfig], target_concurrency: int
                   ) -> list[MemoryFit]:
    fits = [fit_config(model, hw, c, target_concurrency) for c in configs]
    for c, f in zip(configs, fits, strict=True):
        get_run_logger().info(
            "fit %s: %s (KV %.2f GiB needed of %.2f GiB budget)", c.engine,
            "fits" if f.fits else f"does not fit, {f.gap_bytes / 2**30:.2f} GiB short",
            f.required_kv_bytes_per_gpu / 2**30, f.kv_budget_bytes_per_gpu / 2**30)
    return fits
