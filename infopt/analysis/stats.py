"""Summary statistics over measured samples (seconds in, seconds out)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from infopt.specs.results import Percentiles

# Below these many samples a p95 / p99 is an interpolation between the few largest points (at
# least one sample beyond the percentile is needed to estimate it); flag it.
MIN_SAMPLES_FOR_P95 = 20
MIN_SAMPLES_FOR_P99 = 100


def percentiles(samples: Sequence[float]) -> Percentiles:
    n = len(samples)
    if n == 0:
        return Percentiles(n=0, p50=None, p95=None, p99=None, mean=None, low_sample_p95=True,
                           low_sample_p99=True)
    arr = np.asarray(samples, dtype=float)
    p50, p95, p99 = (float(v) for v in np.percentile(arr, [50, 95, 99]))
    return Percentiles(n=n, p50=p50, p95=p95, p99=p99, mean=float(arr.mean()),
                       low_sample_p95=n < MIN_SAMPLES_FOR_P95,
                       low_sample_p99=n < MIN_SAMPLES_FOR_P99)


def median_and_spread(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Median and range (max - min) of repeated measurements; (None, None) if there are none."""
    if not values:
        return None, None
    return float(statistics.median(values)), float(max(values) - min(values))
