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


def _measured(itl_p95, prompt_mean, ttft_mean, out_total=800, requests=4, out_rate=50.0):
    from infopt.specs.results import LevelResult, Percentiles, ScenarioResult

    none = Percentiles(n=0, p50=None, p95=None, p99=None, mean=None, low_sample_p95=True)
    level = LevelResult(concurrency=4, requests=requests, errors=0, lengths_not_reached=0,
                        duration_s=10.0, ttft_s=none.model_copy(update={"mean": ttft_mean}),
                        itl_s=none.model_copy(update={"p95": itl_p95}), e2e_s=none,
                        output_tokens_total=out_total, output_tokens_per_s=out_rate,
                        requests_per_s=0.4, prompt_tokens_mean=prompt_mean)
    return ScenarioResult(name="x", arrival="closed_loop", level=level, slos=[],
                          goodput_requests_per_s=None, slo_violated=None,
                          validation_passed=True, validation_failures=[], errors_by_kind={},
                          records_path=None)


def test_the_sample_is_read_from_the_three_measurements():
    """infopt.cluster.interference.interference_sample: ITL p95 alone and mixed, the long
    prompts' prefill rate (prompt tokens over mean TTFT), the decode load's rates."""
    from infopt.cluster.interference import interference_sample

    s = interference_sample(_measured(0.02, 100.0, 0.1), _measured(0.05, 100.0, 0.1),
                            _measured(None, 2048.0, 0.5), 2048)
    assert (s.itl_alone_s, s.itl_mixed_s, s.long_prompt_tokens) == (0.02, 0.05, 2048)
    assert s.prefill_tokens_per_s == 2048.0 / 0.5 and s.decode_tokens_per_s == 50.0
    assert (s.mean_prompt_tokens, s.mean_output_tokens) == (100.0, 200.0)
    unmeasured = interference_sample(_measured(0.02, 100.0, 0.1), _measured(0.05, 100.0, 0.1),
                                     _measured(None, None, None), 2048)
    assert unmeasured.prefill_tokens_per_s is None


def test_long_prompts_are_half_the_context_at_most_one_at_a_time():
    from infopt.cluster.workloads import LONG_PROMPTS, long_prompt_traffic
    from infopt.specs.workload import fixed_levels

    base = fixed_levels(input_tokens=64, output_tokens=32, levels=[4], target=4,
                        requests=8).traffic
    short_ctx, long_ctx = long_prompt_traffic(base, 1024), long_prompt_traffic(base, 65536)
    assert short_ctx.input_lengths.tokens == 512 and long_ctx.input_lengths.tokens == 2048
    assert short_ctx.output_lengths.tokens == 2 and short_ctx.measured_requests == LONG_PROMPTS
    assert short_ctx.arrival.concurrency == 1 and short_ctx.name == "long-prompts"
