"""An attainable decode estimate beside the theoretical ceiling, for GPUs (an estimate, never a
measurement; its error on published results is stated with it).

The ceiling assumes every byte moves at the vendor's peak bandwidth and nothing else costs time.
Measured serving results sit at 0.07-0.60 of it: a decode step also pays fixed costs (kernel
launches, the scheduler, sampling, CUDA-graph replay), one latency per tensor-parallel
all-reduce, achieves a fraction of peak bandwidth, and in closed-loop serving shares its steps
with other requests' prefills. The estimate models exactly those, per engine and GPU family:

    t_step = dense_layers x t_dense_layer + moe_layers x t_moe_layer
             + n_allreduce x t_allreduce + batch x t_per_sequence
             + max(t_memory / bandwidth_fraction, t_compute / compute_fraction)
             + t_prefill / compute_fraction + t_comm

where t_memory, t_compute and t_comm are the ceiling row's own terms (roofline.py),
n_allreduce = 2 per layer when tp > 1, and t_prefill is the compute of the prompts admitted per
step in a closed loop: batch / output_tokens prompts of input_tokens each (chunked prefill runs
beside the decode tokens, not overlapped with their weight reads). Per-layer fixed costs are
kernel launches and their gaps, an MoE layer's (router, top-k, grouped GEMM, combine) apart from
a dense one's: with one constant instead, MoE models were under-estimated and dense ones
over-estimated (leave-one-configuration-out median 15% against 10%). The six parameters are
fitted (attainable_fit.py) on published measured results (data/published_results.csv, each
row with its source) and shipped in data/attainable_fit.json with the leave-one-out and
leave-one-configuration-out errors of the fit. A group with too few results falls back to the
GPU family over all engines, then to all results; the estimate says which it used.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from infopt.specs.fit import AttainableEstimate, CeilingRow
from infopt.specs.inspection import LayerKind, ModelInspection

FIT_FILE = "attainable_fit.json"
MIN_GROUP_ROWS = 10  # fewer results than this: the family (then global) parameters


def gpu_family(compute_capability: str | None) -> str | None:
    """NVIDIA architecture from the compute capability (the catalog's sourced field)."""
    if not compute_capability:
        return None
    major, _, minor = compute_capability.partition(".")
    return {"8": "Ada" if minor == "9" else "Ampere", "9": "Hopper",
            "10": "Blackwell", "12": "Blackwell"}.get(major)


PARAMS = ("t_dense_layer_s", "t_moe_layer_s", "t_allreduce_s", "t_per_sequence_s",
          "bandwidth_fraction", "compute_fraction")


@dataclass(frozen=True)
class Params:
    t_dense_layer_s: float
    t_moe_layer_s: float
    t_allreduce_s: float
    t_per_sequence_s: float
    bandwidth_fraction: float
    compute_fraction: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Params:
        return cls(*(d[k] for k in PARAMS))


@dataclass(frozen=True)
class StepTerms:
    """What the ceiling says one decode step costs, per rank, in seconds, and its counts."""

    t_memory_s: float
    t_compute_s: float
    t_comm_s: float
    t_prefill_s: float  # compute of the prompts admitted per step (closed loop)
    dense_layers: int
    moe_layers: int
    allreduces: int  # 2 per layer with tp > 1, else 0
    batch: int


def terms(row: CeilingRow, m: ModelInspection, tp: int, prefill_t_compute_s: float,
          output_tokens: int | None) -> StepTerms:
    """The step's terms from a decode ceiling row and the prefill row of one prompt."""
    per_step = row.batch / output_tokens * prefill_t_compute_s if output_tokens else 0.0
    moe = m.moe.num_moe_layers if m.moe else 0
    return StepTerms(row.t_memory_s, row.t_compute_s, row.t_comm_s, per_step,
                     m.num_layers - moe, moe, 2 * m.num_layers if tp > 1 else 0, row.batch)


def step_time_s(t: StepTerms, p: Params) -> float:
    return (t.dense_layers * p.t_dense_layer_s + t.moe_layers * p.t_moe_layer_s
            + t.allreduces * p.t_allreduce_s + t.batch * p.t_per_sequence_s
            + max(t.t_memory_s / p.bandwidth_fraction, t.t_compute_s / p.compute_fraction)
            + t.t_prefill_s / p.compute_fraction + t.t_comm_s)


@functools.lru_cache(maxsize=1)
def load_fit() -> dict[str, Any]:
    return json.loads(resources.files("infopt.costmodel").joinpath("data", FIT_FILE)
                      .read_text(encoding="utf-8"))


def group_for(fit: dict[str, Any], engine: str, family: str | None) -> str | None:
    """The fitted group that answers for this engine and GPU family, most specific first."""
    for key in (f"{engine}/{family}", f"any/{family}", "any/any"):
        if key in fit["groups"]:
            return key
    return None


def estimate(row: CeilingRow, m: ModelInspection, engine: str, compute_capability: str | None,
             tp: int, prefill_t_compute_s: float = 0.0,
             output_tokens: int | None = None) -> AttainableEstimate | None:
    """The attainable decode tokens/s for a theoretical decode ceiling row; None off GPUs."""
    family = gpu_family(compute_capability)
    if row.phase != "decode" or family is None:
        return None
    fit = load_fit()
    key = group_for(fit, engine, family)
    if key is None:
        return None
    g = fit["groups"][key]
    t = step_time_s(terms(row, m, tp, prefill_t_compute_s, output_tokens),
                    Params.from_dict(g))
    # The error of the kind of prediction made: a sweep the group has not seen, or (a fallback
    # group) an engine or GPU family it has not seen.
    kind, err = _held_out(fit, key)
    return AttainableEstimate(
        tokens_per_s=row.tokens_per_step / t, t_step_s=t, group=key,
        median_abs_error=err["median_abs_error"], p90_abs_error=err["p90_abs_error"],
        label=(f"estimate ({key} fit on {_fitted_on(g)}; {kind} error "
               f"median {err['median_abs_error']:.0%}, p90 {err['p90_abs_error']:.0%}"
               f"{_unfitted(m)})"))


# The token mixers the published results cover (Llama, Qwen3, gpt-oss, DeepSeek MLA); a
# model with others is priced by the same per-layer costs, which no result has tested.
_FITTED_KINDS = {LayerKind.FULL_ATTENTION, LayerKind.SLIDING_ATTENTION}


def _unfitted(m: ModelInspection) -> str:
    kinds = sorted(str(k) for k, n in m.layer_kinds.items() if n and k not in _FITTED_KINDS)
    parts = [f"{' or '.join(kinds)} layers"] if kinds else []
    if m.linear_replaced_blocks or m.skipped_blocks:
        parts.append("skipped or linear-replaced blocks")
    return f"; extrapolated: no fitted result has {' or '.join(parts)}" if parts else ""


def _fitted_on(g: dict[str, Any]) -> str:
    own = g.get("own_trial_rows", 0)
    parts = [f"{g['rows'] - own} published results" if g["rows"] > own else "",
             f"{own} measured levels of infopt's own GPU trials" if own else ""]
    return " and ".join(p for p in parts if p)


def _held_out(fit: dict[str, Any], key: str) -> tuple[str, dict[str, float]]:
    g = fit["groups"][key]
    for field in ("leave_one_engine_out", "leave_one_family_out"):
        if g.get(field):
            return field.replace("_", "-"), g[field]
    return "leave-one-configuration-out", (g["leave_one_configuration_out"]
                                           or fit["leave_one_configuration_out"])
