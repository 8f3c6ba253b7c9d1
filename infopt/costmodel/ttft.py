"""The single-stream TTFT estimate: one prompt's theoretical prefill floor (roofline.prefill_row)
turned into what an engine is likely to take, with two parameters fitted on published measured
single-stream TTFTs (infopt.costmodel.ttft_fit, data/ttft_fit.json):

    TTFT = overhead_s + prefill floor / prefill_fraction

The overhead stands for what the floor leaves out (scheduling, launches, each layer's fixed
cost, the HTTP round trip); the fraction for the achieved share of peak compute. Few results
state a single-stream TTFT, so the estimate is rough and says its leave-one-out error."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from infopt.specs.fit import AttainableEstimate, CeilingRow, Envelope

FIT_FILE = "ttft_fit.json"


@functools.lru_cache(maxsize=1)
def load_ttft_fit() -> dict[str, Any]:
    return json.loads(resources.files("infopt.costmodel").joinpath("data", FIT_FILE)
                      .read_text(encoding="utf-8"))


def ttft_estimate(row: CeilingRow) -> AttainableEstimate | None:
    """The estimated TTFT of a theoretical prefill row (one prompt, single stream) as the
    prompt's tokens/s and seconds; None for another row."""
    if row.phase != "prefill" or row.envelope is not Envelope.THEORETICAL:
        return None
    fit = load_ttft_fit()
    ttft_s = fit["overhead_s"] + row.t_step_s / fit["prefill_fraction"]
    err = fit["leave_one_out"]
    return AttainableEstimate(
        tokens_per_s=row.context_tokens / ttft_s, t_step_s=ttft_s, group="ttft/any",
        median_abs_error=err["median_abs_error"], p90_abs_error=err["p90_abs_error"],
        label=(f"TTFT estimate (overhead {fit['overhead_s'] * 1000:.0f} ms + floor / "
               f"{fit['prefill_fraction']:.2f}, fit on {err['rows']} published single-stream "
               f"TTFTs; leave-one-out error median {err['median_abs_error']:.0%}, p90 "
               f"{err['p90_abs_error']:.0%}: rough)"))
