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


def process_group_gpu_bytes(pgid: int, backend: NvmlBackend | None = None,
                            group_of=_group_of) -> int | None:
    """Bytes of GPU memory the processes of group `pgid` use over every device; None when NVML
    is unavailable or lists none of them (another PID namespace, a driver that hides usage)."""
    from infopt.hardware.nvml import PynvmlBackend

    backend = backend or PynvmlBackend()
    try:
        backend.init()
    except NvmlUnavailable:
        return None
    try:
        used = [p.used_memory_bytes for i in range(backend.device_count())
                for p in backend.processes(i, "compute")
                if group_of(p.pid) == pgid and p.used_memory_bytes is not None]
    except NvmlError:
        return None
    finally:
        backend.shutdown()
    return sum(used) if used else None
