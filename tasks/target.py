"""Establish the target: hardware inventory and model profile."""

from __future__ import annotations

from prefect import get_run_logger, task

from infopt.hardware.host import inventory
from infopt.model.profile import profile_model
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile


@task(name="inventory-host")
def inventory_host() -> HardwareInventory:
    hw = inventory()
    h = hw.host
    get_run_logger().info(
        "host: %s, %d usable CPUs, %.1f GiB RAM; %s", h.cpu_model, h.usable_cpus,
        h.ram_total_bytes / 2**30, hw.gpu_probe)
    return hw


@task(name="profile-model")
def profile_model_task(model_path: str) -> ModelProfile:
    m = profile_model(model_path)
    get_run_logger().info(
        "model: %s (%s, %s), %d layers, %d/%d heads, native context %d tokens",
        m.name, m.architecture, m.weight_format, m.num_layers, m.num_query_heads, m.num_kv_heads,
        m.native_context_tokens)
    return m
