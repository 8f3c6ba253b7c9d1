"""Resolve `infopt plan` inputs: the device (a catalog GPU, the detected GPUs, or this host's
CPU). Errors say what to pass instead. The engine comes from infopt.engines.routing.route_for,
the same rule the flow routes by."""

from __future__ import annotations

from infopt.costmodel.device import device_from_catalog, device_from_host, device_of_gpus
from infopt.hardware.catalog import lookup_gpu, match_gpu
from infopt.specs.base import InputError
from infopt.specs.fit import DeviceBudget
from infopt.specs.hardware import HardwareInventory


def resolve_device(gpu: str | None, hw: HardwareInventory | None
                   ) -> tuple[DeviceBudget, int, bool]:
    """(device, detected GPU count, is_cpu). `gpu` names a catalog row (aliases and NVML names
    accepted); without it the detected hardware is used."""
    if gpu:
        return device_from_catalog(lookup_gpu(gpu)), 0, False
    if hw is None:
        raise InputError("no --gpu given and no hardware inventory; pass --gpu NAME")
    if hw.gpus:
        g = hw.gpus[0]
        spec = match_gpu(g.name, g.memory_total_bytes)
        if spec is None:
            raise InputError(
                f"the detected GPU '{g.name}' is not in infopt's sourced catalog and there are no "
                "measured bandwidth/compute figures for it, so a ceiling would be a guess. Pass "
                "--gpu with the closest catalog name to plan against its published figures.")
        # The calibrated envelope: the inventory's GPU calibration when it ran, else
        # reported unavailable.
        return device_of_gpus(spec, hw), len(hw.gpus), False
    return device_from_host(hw), 0, True


