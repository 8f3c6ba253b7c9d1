"""A short, bounded measurement of this host's matrix-multiply rate (numpy fp32 GEMM through its
BLAS), for the calibrated CPU envelope. 2 x n^3 FLOPs per n x n product."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np


def gemm_flops(n: int, seconds: float) -> float:
    """FLOP/s of one n x n x n product that took `seconds` (multiply-add = 2 FLOPs)."""
    if seconds <= 0:
        raise ValueError("time must be positive")
    return 2.0 * n**3 / seconds


def measure_gemm_flops(n: int = 1024, max_seconds: float = 1.0, min_repeats: int = 3,
                       clock: Callable[[], float] = time.perf_counter) -> float:
    """Median FLOP/s over repeated products after one warm-up (BLAS threads spin up)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up: thread pool start, page faults
    rates: list[float] = []
    start = clock()
    while len(rates) < min_repeats or clock() - start < max_seconds:
        t0 = clock()
        a @ b
        rates.append(gemm_flops(n, clock() - t0))
        if len(rates) >= 50:
            break
    return float(statistics.median(rates))
