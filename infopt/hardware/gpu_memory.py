"""The GPU memory an engine holds, as the driver reports it (issue 32, item 11): NVML's compute
processes on every device, summed over the engine's process group (its API server and the
workers it spawned: infopt starts each engine in a session of its own). The Pareto set's
memory axis on a GPU host; host RSS says nothing of what a GPU engine allocated."""

from __future__ import annotations

import os

from infopt.hardware.nvml import NvmlBackend, NvmlError, NvmlUnavailable


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def process_group_gpu_memory(pgid: int, backend: NvmlBackend | None = None,
                             group_of=_group_of) -> dict[int, int] | None:
    """Bytes of GPU memory the processes of group `pgid` use, per device index (a TP=2
    engine: two devices, one worker each); None when NVML is unavailable or lists none of them
    (another PID namespace, a driver that hides usage). Per device, not only the sum: a layout
    fits when its fullest GPU does, and the report shows each rank's share."""
    from infopt.hardware.nvml import PynvmlBackend

    backend = backend or PynvmlBackend()
    try:
        backend.init()
    except NvmlUnavailable:
        return None
    per_device: dict[int, int] = {}
    try:
        for i in range(backend.device_count()):
            for p in backend.processes(i, "compute"):
                if group_of(p.pid) == pgid and p.used_memory_bytes is not None:
                    per_device[i] = per_device.get(i, 0) + p.used_memory_bytes
    except NvmlError:
        return None
    finally:
        backend.shutdown()
    return per_device or None

