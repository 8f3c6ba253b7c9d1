"""Whether separate prefill and decode pools are worth it: on one replica, the decode ITL p95
of the target load alone against the same load with long prompts sent beside it. Separate
pools are recommended only above a stated ratio, sized from the measured prefill and decode
rates for the plan's peak; the runs here cannot disaggregate (llama.cpp has no P/D transfer,
vLLM's needs a KV connector between GPUs), so a recommendation is an untested suggestion."""

from __future__ import annotations

import math
from typing import Any

from infopt.specs.cluster import Interference, InterferenceSample
from infopt.specs.results import ScenarioResult

# Decode ITL p95 with long prompts mixed in over alone. DistServe and Splitwise motivate
# disaggregation with prefill stalls that multiply decode step times; 1.5x is this rule's own
# line, an assumption stated beside every verdict.
THRESHOLD = 1.5


def judge_interference(m: InterferenceSample, peak_rate_per_s: float | None,
                       threshold: float = THRESHOLD) -> Interference | None:
    """None when either ITL was not measured (no streamed tokens)."""
    if not m.itl_alone_s or m.itl_mixed_s is None:
        return None
    alone, mixed, long = m.itl_alone_s, m.itl_mixed_s, m.long_prompt_tokens
    ratio = mixed / alone
    common: dict[str, Any] = dict(itl_p95_alone_s=alone, itl_p95_mixed_s=mixed,
                                  long_prompt_tokens=long, threshold=threshold,
                                  prefill_tokens_per_s=m.prefill_tokens_per_s,
                                  decode_tokens_per_s=m.decode_tokens_per_s)
    if ratio <= threshold:
        return Interference(**common, recommend_pools=False, why=(
            f"decode ITL p95 {mixed:.3g} s with {long:,}-token prompts beside it against "
            f"{alone:.3g} s alone: x{ratio:.2f}, under the x{threshold:g} line: one pool "
            "serves both phases"))
    sized = ""
    pre = dec = None
    if peak_rate_per_s and m.prefill_tokens_per_s and m.decode_tokens_per_s:
        pre = max(1, math.ceil(peak_rate_per_s * m.mean_prompt_tokens / m.prefill_tokens_per_s))
        dec = max(1, math.ceil(peak_rate_per_s * m.mean_output_tokens / m.decode_tokens_per_s))
        sized = (f"; for {peak_rate_per_s:.3g} requests/s: {pre} prefill replica(s) "
                 f"({m.mean_prompt_tokens:.0f} prompt tokens each at {m.prefill_tokens_per_s:.4g} "
                 f"tokens/s a replica) and {dec} decode replica(s) ({m.mean_output_tokens:.0f} "
                 f"output tokens each at {m.decode_tokens_per_s:.4g} tokens/s a replica)")
    return Interference(**common, recommend_pools=True, prefill_replicas=pre,
                        decode_replicas=dec, why=(
                            f"decode ITL p95 x{ratio:.2f} with {long:,}-token "
                            f"prompts beside it ({mixed:.3g} s against {alone:.3g} "
                            f"s), over the x{threshold:g} line: separate prefill and decode "
                            f"pools are suggested{sized}. An untested suggestion: no "
                            "disaggregated serving ran here"))


def interference_sample(alone: ScenarioResult, mixed: ScenarioResult,
                        long_prompts: ScenarioResult, long_tokens: int) -> InterferenceSample:
    """judge_interference's inputs from the three measurements: the decode load alone, the
    same load with the long prompts beside it, and the long prompts themselves (their prefill
    rate: prompt tokens over time to first token)."""
    lvl, a = long_prompts.level, alone.level
    prefill = (lvl.prompt_tokens_mean / lvl.ttft_s.mean
               if lvl.prompt_tokens_mean and lvl.ttft_s.mean else None)
    return InterferenceSample(
        itl_alone_s=a.itl_s.p95, itl_mixed_s=mixed.level.itl_s.p95,
        long_prompt_tokens=long_tokens, prefill_tokens_per_s=prefill,
        decode_tokens_per_s=a.output_tokens_per_s or None,
        mean_prompt_tokens=a.prompt_tokens_mean or 0.0,
        mean_output_tokens=a.output_tokens_total / a.requests if a.requests else 0.0)
