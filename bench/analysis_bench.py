"""Speed of infopt's own analysis (was a timed unit test; a wall-clock bound on 2 shared cores is
a benchmark, not a test). Run by `make bench` (python -m bench.analysis_bench); a few seconds.

Measured: `bootstrap_diff` with its default 2,000 resamples over two samples of 1,000 values
(the size of one large trial's per-request records). Goal: under 0.1 s, so a tuning decision
over many values never waits on statistics. One warm-up call, then 7 timed calls; the median
and range are reported. Exit status 1 when the median misses the goal.

Results go to $INFOPT_BENCH_OUT/analysis_results.json (default /tmp/infopt-bench).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from infopt.analysis.compare import bootstrap_diff

GOAL_S = 0.1
REPEATS = 7


def time_bootstrap(n_samples: int = 1000) -> list[float]:
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(0, 0.5, n_samples), rng.lognormal(0.1, 0.5, n_samples)
    bootstrap_diff(a, b, higher_is_better=False, seed=0)  # warm-up: numpy's first-call costs
    out = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        bootstrap_diff(a, b, higher_is_better=False, seed=0)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    times = time_bootstrap()
    median = statistics.median(times)
    ok = median < GOAL_S
    print(f"bootstrap_diff, 2,000 resamples of 1,000 + 1,000 samples: median "
          f"{median * 1e3:.1f} ms [{min(times) * 1e3:.1f}-{max(times) * 1e3:.1f}] over "
          f"{REPEATS} calls; goal < {GOAL_S * 1e3:.0f} ms: {'met' if ok else 'MISSED'}")
    out = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench")) / "analysis_results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"bootstrap_diff_s": times, "median_s": median, "goal_s": GOAL_S,
                               "met": ok, "platform": platform.platform(),
                               "load_avg": os.getloadavg()}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
