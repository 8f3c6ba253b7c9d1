"""Establish the target: hardware inventory and model profile."""

from __future__ import annotations

from prefect import get_run_logger, task

from blocks.credentials import hf_token
from infopt.engines.routing import engine_order_for
from infopt.hardware.gpu_calibration import CalibrationError, run_calibration, torch_python
from infopt.hardware.host import inventory
from infopt.model.drafters import search_drafters
from infopt.model.hub import default_cache_dir
from infopt.model.profile import profile_model
from infopt.model.shortlist import build_shortlist, device_from_inventory
from infopt.specs.base import InputError
from infopt.specs.checkpoint import Shortlist
from infopt.specs.drafters import DrafterSearch
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile


@task(name="inventory-host")
def inventory_host(known: HardwareInventory | None = None) -> HardwareInventory:
    """This machine (`known`: measured already by the caller in this process, not again)."""
    hw = known or inventory()
    h = hw.host
    get_run_logger().info(
        "host: %s, %d usable CPUs, %.1f GiB RAM; %s", h.cpu_model, h.usable_cpus,
        h.ram_total_bytes / 2**30, hw.gpu_probe)
    return hw


@task(name="profile-model")
def profile_model_task(model_path: str) -> ModelProfile:
    m = profile_model(model_path)
    get_run_logger().info(
        "model: %s (%s, %s), %d layers, %s %d/%d heads, native context %d tokens",
        m.name, m.architecture, m.weight_format, m.num_layers, m.inspection.attention.kind.value,
        m.num_query_heads, m.num_kv_heads, m.native_context_tokens)
    return m


@task(name="drafter-search", retries=0)
def drafter_task(base_model: str, endpoint: str | None,
                 credentials_block: str | None = None) -> DrafterSearch | None:
    """Drafters of the exact hub model for speculative decoding, verified from metadata (no
    weights fetched). A hub that cannot be searched leaves the run without hub drafters (the
    model's own MTP layers and n-gram drafting remain), logged, never fatal."""
    log = get_run_logger()
    try:
        found = search_drafters(base_model, cache_dir=default_cache_dir(), endpoint=endpoint,
                                token=hf_token(credentials_block), say=log.info)
    except InputError as exc:
        log.warning("drafter search for %s skipped: %s", base_model, str(exc)[:300])
        return None
    log.info("drafters for %s: %d verified, %d turned down", base_model, len(found.drafters),
             len(found.rejected))
    return found


@task(name="shortlist-checkpoints")
def shortlist_task(base_model: str, hardware: HardwareInventory, endpoint: str | None,
                   max_weight_bits: int = 4, target_concurrency: int = 1,
                   credentials_block: str | None = None) -> Shortlist:
    """Quantized variants of the exact hub model, verified from metadata (no weights fetched)."""
    device = device_from_inventory(hardware)
    sl = build_shortlist(base_model, device=device,
                         cache_dir=default_cache_dir(), endpoint=endpoint,
                         token=hf_token(credentials_block),
                         max_weight_bits=max_weight_bits,
                         engine_order=engine_order_for(device, target_concurrency))
    get_run_logger().info("shortlist for %s: %d candidates, %d rejected", base_model,
                          len(sl.candidates), len(sl.rejected))
    return sl


@task(name="calibrate-gpu")
def calibrate_gpu_task(hw: HardwareInventory, engines: list[str]) -> HardwareInventory:
    """The GPU envelope measured once per run with the first planned engine's torch
    (infopt.hardware.gpu_calibration), kept in the inventory the trials read their ceilings
    from; the inventory unchanged off GPUs, without such an engine, or when it fails (said)."""
    log = get_run_logger()
    if not hw.gpus or hw.gpu_calibration is not None:
        return hw
    python = torch_python(engines)
    if python is None:
        log.info("GPU calibration: no planned engine with a torch environment (%s); the "
                 "calibrated envelope is unavailable", ", ".join(engines) or "none")
        return hw
    try:
        cal = run_calibration(python)
    except CalibrationError as exc:
        log.warning("GPU calibration failed: %s; the calibrated envelope is unavailable", exc)
        return hw
    log.info("GPU calibration: %s: copy %.0f GB/s, %s", cal.device_name,
             cal.copy_bytes_per_s.median / 1e9,
             ", ".join(f"{k} {r.median / 1e12:.0f} TFLOP/s" for k, r in
                       cal.gemm_flops_per_s.items()) or "no GEMM")
    return hw.model_copy(update={"gpu_calibration": cal})
