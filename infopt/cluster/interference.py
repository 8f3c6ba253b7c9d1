"""Whether separate prefill and decode pools are worth it: on one replica, the decode ITL p95
of the target load alone against the same load with long prompts sent beside it. Separate
pools are recommended only above a stated ratio, sized from the measured prefill and decode
rates for the plan's peak; the runs here cannot disaggregate (llama.cpp has no P/D transfer,
vLLM's needs a KV connector between GPUs), so a recommendation is an untested suggestion."""

from __future__ import annotations

import math
from typing import Any

from infopt.specs.cluster import Interference

# Decode ITL p95 with long prompts mixed in over alone. DistServe and Splitwise motivate
# disaggregation with prefill stalls that multiply decode step times; 1.5x is this rule's own
# line, an assumption stated beside every verdict.
THRESHOLD = 1.5


def judge_interference(*, itl_alone_s: float | None, itl_mixed_s: float | None,
                       long_prompt_tokens: int, prefill_tokens_per_s: float | None,
                       decode_tokens_per_s: float | None, peak_rate_per_s: float | None,
                       mean_prompt_tokens: float, mean_output_tokens: float,
                       threshold: float = THRESHOLD) -> Interference | None:
    """None when either ITL was not measured (no streamed tokens)."""
    if not itl_alone_s or itl_mixed_s is None:
        return None
    ratio = itl_mixed_s / itl_alone_s
    common: dict[str, Any] = dict(itl_p95_alone_s=itl_alone_s, itl_p95_mixed_s=itl_mixed_s,
                  long_prompt_tokens=long_prompt_tokens, threshold=threshold,
                  prefill_tokens_per_s=prefill_tokens_per_s,
                  decode_tokens_per_s=decode_tokens_per_s)
    if ratio <= threshold:
        return Interference(**common, recommend_pools=False, why=(
            f"decode ITL p95 {itl_mixed_s:.3g} s with {long_prompt_tokens:,}-token prompts "
            f"beside it against {itl_alone_s:.3g} s alone: x{ratio:.2f}, under the x"
            f"{threshold:g} line: one pool serves both phases"))
    sized = ""
    pre = dec = None
    if peak_rate_per_s and prefill_tokens_per_s and decode_tokens_per_s:
        pre = max(1, math.ceil(peak_rate_per_s * mean_prompt_tokens / prefill_tokens_per_s))
        dec = max(1, math.ceil(peak_rate_per_s * mean_output_tokens / decode_tokens_per_s))
        sized = (f"; for {peak_rate_per_s:.3g} requests/s: {pre} prefill replica(s) "
                 f"({mean_prompt_tokens:.0f} prompt tokens each at {prefill_tokens_per_s:.4g} "
                 f"tokens/s a replica) and {dec} decode replica(s) ({mean_output_tokens:.0f} "
                 f"output tokens each at {decode_tokens_per_s:.4g} tokens/s a replica)")
    return Interference(**common, recommend_pools=True, prefill_replicas=pre,
                        decode_replicas=dec, why=(
                            f"decode ITL p95 x{ratio:.2f} with {long_prompt_tokens:,}-token "
                            f"prompts beside it ({itl_mixed_s:.3g} s against {itl_alone_s:.3g} "
                            f"s), over the x{threshold:g} line: separate prefill and decode "
                            f"pools are suggested{sized}. An untested suggestion: no "
                            "disaggregated serving ran here"))
