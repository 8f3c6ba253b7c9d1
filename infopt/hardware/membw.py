"""Measured host memory bandwidth: a short, bounded numpy copy microbenchmark (bytes/s).

A copy of N bytes reads N and writes N, so one pass moves 2N bytes and the bandwidth is 2N / t;
STREAM's Copy kernel counts bytes the same way (McCalpin, www.cs.virginia.edu/stream/ref.html).
(Write-allocate caches may also read the destination before writing it, so the DRAM traffic can
be 3N: 2N is the conventional, conservative count.) The arrays are sized well above the
last-level cache so the copy streams from DRAM, and the copy is split across threads because
one core cannot saturate a server's memory channels (numpy releases the GIL while copying).

This is a calibration input for CPU-engine ceilings, not a promise: a large copy is not evidence
that a decode step reaches the same rate (see the hardware-throughput-ceilings reference).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path

import numpy as np
import psutil

from infopt.specs.base import InputError
from infopt.specs.hardware import HostMemoryBandwidth

MIB = 1 << 20
GIB = 1 << 30

# Array size: 4x the last-level cache so at most a quarter of it can be cache-resident, within
# [64 MiB, 256 MiB], and at most 1/8 of available RAM (source and destination take 2x the array).
# The cap keeps the whole run, page faults included, near 1.5 s: first-touching 2 GiB of pages
# took ~5 s of system time in a VM here. A host whose cache exceeds 64 MiB gets exceeds_llc=False.
LLC_MULTIPLE = 4
MIN_ARRAY_BYTES = 64 * MIB
MAX_ARRAY_BYTES = 256 * MIB
MAX_THREADS = 16

CPU_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


def copy_bytes_moved(array_bytes: int) -> int:
    """Bytes a copy of `array_bytes` moves: one read plus one write of every byte."""
    return 2 * array_bytes


def copy_bandwidth_bytes_per_s(array_bytes: int, seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("copy time must be positive")
    return copy_bytes_moved(array_bytes) / seconds


def summarize_copies(array_bytes: int, durations_s: list[float]) -> tuple[float, float, float, float]:
    """(median, min, max, spread) bandwidth over copy durations; spread = (max - min) / median."""
    rates = [copy_bandwidth_bytes_per_s(array_bytes, d) for d in durations_s]
    median = statistics.median(rates)
    return median, min(rates), max(rates), (max(rates) - min(rates)) / median


def parse_cache_size(text: str) -> int:
    """sysfs cache size ("32768K", "480M", "1024 KB") -> bytes."""
    value = text.strip().upper().replace(" ", "").removesuffix("B")
    units = {"K": 1 << 10, "M": MIB, "G": GIB}
    if value and value[-1] in units:
        return int(value[:-1]) * units[value[-1]]
    return int(value)


def last_level_cache_bytes(cache_dir: Path = CPU_CACHE_DIR) -> int | None:
    """Size of the highest-level data/unified cache cpu0 sees, from sysfs; None when unknown."""
    best: tuple[int, int] | None = None
    for index in cache_dir.glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            size = parse_cache_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if best is None or level > best[0]:
            best = (level, size)
    return best[1] if best else None


def default_array_bytes(llc_bytes: int | None, available_bytes: int) -> int:
    target = max(LLC_MULTIPLE * (llc_bytes or 0), MIN_ARRAY_BYTES)
    return int(min(target, MAX_ARRAY_BYTES, available_bytes // 8))


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def measure_host_bandwidth(array_bytes: int | None = None, *, max_seconds: float = 1.5,
                           min_repeats: int = 3, max_repeats: int = 20, threads: int | None = None,
                           clock: Callable[[], float] = time.perf_counter) -> HostMemoryBandwidth:
    """Copy an array repeatedly until `max_seconds` have passed since the start (allocation
    included), with at least `min_repeats` timed copies.

    `array_bytes` defaults to 4x the last-level cache within [64 MiB, 256 MiB]; `threads`
    defaults to the CPUs this process may use (at most 16).
    """
    start = clock()
    llc = last_level_cache_bytes()
    if array_bytes is None:
        array_bytes = default_array_bytes(llc, psutil.virtual_memory().available)
    if array_bytes < MIB:
        raise InputError(f"array_bytes={array_bytes} is too small to measure DRAM bandwidth; "
                         f"use at least 1 MiB, ideally several times the {llc or 'unknown'}-byte cache")
    threads = max(1, min(threads or _usable_cpus(), MAX_THREADS))
    src = np.ones(array_bytes, dtype=np.uint8)  # ones, not empty: touch every page before timing
    dst = np.empty_like(src)
    bounds = np.linspace(0, array_bytes, threads + 1, dtype=np.int64)
    chunks = [(int(a), int(b)) for a, b in pairwise(bounds)]

    def copy_chunk(span: tuple[int, int]) -> None:
        np.copyto(dst[span[0]:span[1]], src[span[0]:span[1]])

    durations: list[float] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(copy_chunk, chunks))  # warm-up: faults in dst pages, starts the threads
        while len(durations) < max_repeats and (len(durations) < min_repeats
                                                 or clock() - start < max_seconds):
            t0 = clock()
            list(pool.map(copy_chunk, chunks))
            durations.append(clock() - t0)
    elapsed = clock() - start
    median, low, high, spread = summarize_copies(array_bytes, durations)
    return HostMemoryBandwidth(
        median_bytes_per_s=median, min_bytes_per_s=low, max_bytes_per_s=high, spread=spread,
        array_bytes=array_bytes, bytes_moved_per_copy=copy_bytes_moved(array_bytes),
        repeats=len(durations), threads=threads, llc_bytes=llc,
        exceeds_llc=None if llc is None else array_bytes >= 2 * llc, elapsed_s=elapsed)
