"""The P/D interference rule on planted ITLs: one pool under the line, sized separate pools
(labelled an untested suggestion) over it, nothing when ITL was not measured."""

from __future__ import annotations

from infopt.cluster.interference import THRESHOLD, judge_interference
from infopt.specs.cluster import InterferenceSample

COMMON = dict(long_prompt_tokens=2048, prefill_tokens_per_s=4000.0, decode_tokens_per_s=100.0,
              mean_prompt_tokens=1000.0, mean_output_tokens=200.0)
PEAK = 2.0  # requests/s


def sample(alone, mixed) -> InterferenceSample:
    return InterferenceSample(itl_alone_s=alone, itl_mixed_s=mixed, **COMMON)


def test_under_the_line_one_pool_serves_both_phases():
    v = judge_interference(sample(0.02, 0.025), PEAK)
    assert not v.recommend_pools and v.prefill_replicas is None
    assert f"under the x{THRESHOLD:g} line" in v.why and v.ratio == 1.25


def test_over_the_line_separate_pools_are_sized_and_labelled_untested():
    v = judge_interference(sample(0.02, 0.06), PEAK)
    assert v.recommend_pools
    # 2 req/s x 1,000 prompt tokens / 4,000 tok/s -> 1; 2 x 200 / 100 tok/s -> 4.
    assert (v.prefill_replicas, v.decode_replicas) == (1, 4)
    assert "An untested suggestion" in v.why
    assert judge_interference(sample(None, 0.06), PEAK) is None
