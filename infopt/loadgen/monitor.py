"""What runs beside a measured phase: the client's own event-loop lag (is the load generator the
bottleneck?), the engine's CPU and memory (psutil over its whole process group), and, where
NVML answers, GPU utilization and memory in use (summed over the visible GPUs).

Event-loop lag: a ticker asks to sleep `interval_s` and records how late it wakes. Every
timestamp the client takes is late by up to that much, so a p99 lag that is a noticeable share of
the ITL means the client, not the engine, shapes the numbers.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

import numpy as np
import psutil

from infopt.specs.base import Spec


class ClientHealth(Spec):
    loop_lag_p50_s: float
    loop_lag_p99_s: float
    loop_lag_max_s: float
    ticks: int


class EngineUsage(Spec):
    samples: int
    cpu_percent_mean: float | None  # over all the engine's processes; 100 = one core
    cpu_percent_max: float | None
    rss_peak_bytes: int | None
    gpu_util_percent_mean: float | None = None  # mean over samples of the mean over GPUs
    gpu_memory_used_peak_bytes: int | None = None  # peak over samples of the sum over GPUs


# The client is called saturated when its p99 loop lag exceeds this share of the median ITL
# (timestamps then carry >= 10% error) or 5 ms, whichever is larger.
SATURATION_SHARE_OF_ITL = 0.10
SATURATION_FLOOR_S = 0.005


def client_saturated(health: ClientHealth, itl_p50_s: float | None) -> bool:
    limit = max(SATURATION_FLOOR_S, SATURATION_SHARE_OF_ITL * (itl_p50_s or 0.0))
    return health.loop_lag_p99_s > limit


class LoopLagProbe:
    """`async with LoopLagProbe() as probe:` ... then `probe.result()`."""

    def __init__(self, interval_s: float = 0.01):
        self.interval_s = interval_s
        self._lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            self._lags.append(max(0.0, time.perf_counter() - t0 - self.interval_s))

    async def __aenter__(self) -> LoopLagProbe:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def result(self) -> ClientHealth:
        lags = np.asarray(self._lags or [0.0])
        return ClientHealth(loop_lag_p50_s=float(np.percentile(lags, 50)),
                            loop_lag_p99_s=float(np.percentile(lags, 99)),
                            loop_lag_max_s=float(lags.max()), ticks=len(self._lags))


class GpuSampler:
    """Utilization and memory in use of every GPU NVML sees; nothing when NVML is absent."""

    def __init__(self, backend: Any = None):
        self.backend, self.count = backend, 0

    def open(self) -> None:
        from infopt.hardware.nvml import NvmlError, NvmlUnavailable, PynvmlBackend

        self.backend = self.backend or PynvmlBackend()
        try:
            self.backend.init()
            self.count = self.backend.device_count()
        except (NvmlUnavailable, NvmlError):
            self.count = 0

    def sample(self) -> tuple[float | None, int] | None:
        """(mean utilization % or None when unsupported, memory used in bytes), or None."""
        from infopt.hardware.nvml import NvmlError

        if not self.count:
            return None
        try:
            used = sum(self.backend.memory_info(i).used_bytes for i in range(self.count))
        except NvmlError:
            return None
        try:
            util = float(np.mean([self.backend.utilization_percent(i)
                                  for i in range(self.count)]))
        except NvmlError:  # e.g. MIG instances do not report utilization
            util = None
        return util, used

    def close(self) -> None:
        if self.count:
            self.backend.shutdown()


class ResourceSampler:
    """Samples CPU% and RSS of a process and its descendants, and the GPUs (`gpu`), on a
    background thread."""

    def __init__(self, pid: int | None, interval_s: float = 0.5, gpu: GpuSampler | None = None):
        self.pid = pid
        self.interval_s = interval_s
        self.gpu = gpu
        self._cpu: list[float] = []
        self._rss: list[int] = []
        self._gpu_util: list[float] = []
        self._gpu_mem: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs: dict[int, psutil.Process] = {}

    def _family(self) -> list[psutil.Process]:
        root = psutil.Process(self.pid)
        found = [root, *root.children(recursive=True)]
        # Keep Process objects across samples: cpu_percent() measures since its last call.
        for p in found:
            self._procs.setdefault(p.pid, p)
        return [self._procs[p.pid] for p in found]

    def _run(self) -> None:
        first = True
        while not self._stop.wait(0 if first else self.interval_s):
            try:
                fam = self._family()
                cpu = sum(p.cpu_percent(None) for p in fam)
                rss = sum(p.memory_info().rss for p in fam)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if not first:  # the first cpu_percent() call of a process always returns 0.0
                self._cpu.append(cpu)
                self._rss.append(rss)
                if self.gpu is not None and (g := self.gpu.sample()) is not None:
                    if g[0] is not None:
                        self._gpu_util.append(g[0])
                    self._gpu_mem.append(g[1])
            first = False

    def __enter__(self) -> ResourceSampler:
        if self.pid is not None and psutil.pid_exists(self.pid) and self.pid != os.getpid():
            if self.gpu is not None:
                self.gpu.open()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
            if self.gpu is not None:
                self.gpu.close()

    def result(self) -> EngineUsage:
        if not self._cpu:
            return EngineUsage(samples=0, cpu_percent_mean=None, cpu_percent_max=None,
                               rss_peak_bytes=None)
        return EngineUsage(samples=len(self._cpu), cpu_percent_mean=float(np.mean(self._cpu)),
                           cpu_percent_max=float(max(self._cpu)), rss_peak_bytes=max(self._rss),
                           gpu_util_percent_mean=float(np.mean(self._gpu_util))
                           if self._gpu_util else None,
                           gpu_memory_used_peak_bytes=max(self._gpu_mem) if self._gpu_mem
                           else None)
