"""What this machine is, as infopt's own inventory reads it (NVML, /proc, cgroups), for tests
whose expectations differ between a CPU-only host and a GPU host, or with the host's memory.
A test asserts what follows from these facts, never a fact of the machine it was written on."""

from __future__ import annotations

from functools import cache

from infopt.specs.hardware import HardwareInventory


@cache
def inventory() -> HardwareInventory:
    """The inventory the optimizer plans with (no bandwidth measurement: ~0.1 s)."""
    from infopt.hardware.host import inventory as probe

    return probe(measure_bandwidth=False)


def nvidia_gpus() -> int:
    return len(inventory().gpus)
