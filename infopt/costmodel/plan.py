"""`infopt plan`: memory fit of the requested candidate plus a ceiling table across the feasible
weight x KV combinations and batch sizes, for one device and layout."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from infopt.costmodel.attainable import estimate
from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.layouts import fitting_layouts
from infopt.costmodel.roofline import decode_row, prefill_row
from infopt.costmodel.weights import hypothetical_paths, path_from_quantization
from infopt.specs.base import InputError
from infopt.specs.fit import (
    CeilingRow,
    CeilingTable,
    DeviceBudget,
    Envelope,
    Layout,
    MemoryFit,
)


class PlanResult(MemoryFit):
    """The fit (top-level keys, the `plan --json` contract) plus the ceiling table."""

    model: str
    device: DeviceBudget
    ceilings: CeilingTable
    # What the fit and ceilings were costed over: token mixers and feed-forward kinds by
    # layer count, and DeciLM blocks skipped or replaced by one linear layer.
    layer_kinds: dict[str, int] = Field(default_factory=dict)
    mlp_kinds: dict[str, int] = Field(default_factory=dict)
    skipped_blocks: int = 0
    linear_replaced_blocks: int = 0
    # The GPUs a run of this model at this context and concurrency needs: the asked layout's
    # when it fits, else the smallest TP/PP layout that does on one node of up to
    # NODE_GPUS (the optimize-gpu deployment's gpu_count job variable); None: none fits.
    gpus_to_request: int | None = None
    gpus_to_request_layout: str | None = None


def batch_sizes(concurrency: int, max_concurrency: float) -> list[int]:
    sizes = {1, concurrency}
    b = 8
    while b < max(concurrency, min(max_concurrency, 256)):
        sizes.add(b)
        b *= 4
    return sorted(s for s in sizes if s >= 1)


def ceiling_table(r: FitRequest, batches: list[int], prompt_tokens: int,
                  tokens_per_step: float = 1.0, output_tokens: int | None = None,
                  lengths_source: str = "requests as given") -> CeilingTable:
    dev = r.device
    own = path_from_quantization(r.model.quantization, dev.compute_capability)
    paths = [r.weight_path] + [p for p in hypothetical_paths(dev.compute_capability)
                               if p.label != r.weight_path.label]
    if own.label not in {p.label for p in paths}:
        paths.insert(1, own)
    # The engine's native and 8-bit KV types, less what this device cannot run (said why).
    kvs = [k for k in (r.kv.native, r.kv.eight_bit) if k not in r.kv.refused]
    left_out = [f"KV {k}: {r.kv.refused[k]}" for k in (r.kv.native, r.kv.eight_bit)
                if k in r.kv.refused]
    rows: list[CeilingRow] = []
    unavailable: list[str] = []
    for env in (Envelope.THEORETICAL, Envelope.CALIBRATED):
        produced = False
        for path in paths:
            exact = r.exact_weights_bytes if path.label == r.weight_path.label else None
            for kv in kvs:
                pre = prefill_row(r.model, path, kv, prompt_tokens, dev, env, r.tp,
                                  exact_weights_bytes=exact)
                for b in batches:
                    row = decode_row(r.model, path, kv, b, r.context_tokens, dev, env, r.tp,
                                     tokens_per_step=tokens_per_step,
                                     exact_weights_bytes=exact, pp=r.pp)
                    if row:
                        rows.append(_with_estimate(r, row, pre, output_tokens or max(
                            1, r.context_tokens - prompt_tokens)))
                        produced = True
                if pre:
                    rows.append(pre)
        if not produced:
            unavailable.append(
                f"{env.value}: no {'vendor peak' if env is Envelope.THEORETICAL else 'measured'}"
                f" bandwidth/compute for {dev.name}"
                + (" (run on the machine, or give measured figures)" if env is
                   Envelope.CALIBRATED else " (not in the sourced catalog)"))
    return CeilingTable(device=dev, rows=rows, unavailable=unavailable, left_out=left_out,
                        assumptions=[
        "decode: executed weights read once per step (ideal batch reuse); MoE: expected union "
        "of experts for uniform routing; KV read at the full context for every sequence",
        "FLOPs: 2 per multiply-add; W4A16/W8A16 paths at 16-bit rates; FP8/FP4 rates only "
        "where the device executes them",
        "TP all-reduce not overlapped with compute; launch, scheduler and HTTP overheads "
        "ignored: these are upper bounds, not predictions",
        "attainable estimates (GPU decode rows): the same terms plus per-layer, per-sequence "
        "and per-all-reduce fixed costs and achieved bandwidth/compute fractions, fitted per "
        "engine and GPU family on published measured results (infopt/costmodel/data/"
        "published_results.csv, each with its source); each says its held-out error",
        f"prefill: one prompt of {prompt_tokens} tokens, causal attention",
        f"lengths: {lengths_source}; each sequence's prefill is spread over its "
        f"{output_tokens or max(1, r.context_tokens - prompt_tokens):,} decode steps in the "
        "estimates",
        f"decode advances {tokens_per_step:g} verified token(s) per sequence per step"
        + (" (speculative decoding: verification work scales with it; the draft model's own "
           "cost is not included)" if tokens_per_step != 1 else "")])


def _with_estimate(r: FitRequest, row: CeilingRow, pre: CeilingRow | None,
                   output_tokens: int) -> CeilingRow:
    """A theoretical GPU decode row with its attainable estimate: a closed loop admitting one
    prompt per `output_tokens` decode steps of each sequence."""
    if row.envelope is not Envelope.THEORETICAL:
        return row
    est = estimate(row, r.model, r.engine, r.device.compute_capability, r.tp,
                   pre.t_compute_s if pre else 0.0, output_tokens)
    return row.model_copy(update={"estimate": est}) if est else row


NODE_GPUS = 8  # the most GPUs one node of the Kubernetes work pool is assumed to have


def gpus_to_request(r: FitRequest, fit: MemoryFit) -> tuple[int | None, str | None]:
    """(GPUs, layout label): `r`'s own layout when it fits, else the first of
    costmodel.layouts.fitting_layouts that fits (the same order a run starts in)."""
    if fit.fits:
        asked = Layout(tp=r.tp, pp=r.pp, dp=r.dp)
        return asked.gpus, asked.label
    for layout in fitting_layouts(r.model, max(r.gpu_count, NODE_GPUS)):
        trial = replace(r, tp=layout.tp, pp=layout.pp, dp=1,
                        gpu_count=max(r.gpu_count, layout.gpus))
        try:
            if plan_fit(trial, with_alternatives=False).fits:
                return layout.gpus, layout.label
        except InputError:  # a layout this model's heads or layers cannot take
            continue
    return None, None


# What a plan assumes of each request when the user gives no lengths (said in the output).
DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS = 1024, 256


def request_lengths(context_tokens: int, input_tokens: int | None,
                    output_tokens: int | None, given_by: str = "requests as given"
                    ) -> tuple[int, int, str]:
    """(prompt tokens, output tokens per request, where they come from) for the estimate:
    each sequence's one prefill is spread over its decode steps. Given lengths must fit the
    context; missing ones are assumed and said so."""
    if input_tokens and output_tokens:
        if input_tokens + output_tokens > context_tokens:
            raise InputError(
                f"--input-tokens {input_tokens:,} + --output-tokens {output_tokens:,} is more "
                f"than the {context_tokens:,}-token context per sequence; shorten them or "
                "raise --context")
        return input_tokens, output_tokens, (
            f"{given_by}: {input_tokens:,} prompt + {output_tokens:,} output tokens")
    prompt = input_tokens or min(DEFAULT_INPUT_TOKENS, max(1, context_tokens * 3 // 4))
    output = output_tokens or max(1, min(DEFAULT_OUTPUT_TOKENS, context_tokens - prompt))
    return prompt, output, (
        f"ASSUMED requests of {prompt:,} prompt + {output:,} output tokens (no workload given: "
        "pass --input-tokens/--output-tokens or --workload FILE)")


def make_plan(r: FitRequest, prompt_tokens: int | None = None,
              tokens_per_step: float = 1.0, output_tokens: int | None = None,
              lengths_from: str = "requests as given") -> PlanResult:
    fit = plan_fit(r)
    gpus, layout = gpus_to_request(r, fit)
    batches = batch_sizes(r.concurrency, fit.max_concurrency_at_context)
    prompt, output, source = request_lengths(r.context_tokens, prompt_tokens, output_tokens,
                                             lengths_from)
    table = ceiling_table(r, batches, prompt, tokens_per_step, output, source)
    m = r.model
    return PlanResult(**fit.model_dump(), model=m.model, device=r.device, ceilings=table,
                      layer_kinds={str(k): n for k, n in m.layer_kinds.items()},
                      mlp_kinds={str(k): n for k, n in m.mlp_kinds.items()},
                      skipped_blocks=m.skipped_blocks,
                      linear_replaced_blocks=m.linear_replaced_blocks,
                      gpus_to_request=gpus, gpus_to_request_layout=layout)


def with_path(r: FitRequest, label_or_dtype: str | None) -> FitRequest:
    """Resolve --weight-dtype to a WeightPath (None: the checkpoint's own quantization)."""
    from infopt.costmodel.weights import BF16, named_path

    if label_or_dtype is None:
        return replace(r, weight_path=path_from_quantization(r.model.quantization,
                                                             r.device.compute_capability))
    path = BF16 if label_or_dtype.lower() in ("bf16", "fp16", "auto") else named_path(
        label_or_dtype, r.device.compute_capability)
    # A hypothetical precision: the checkpoint's exact bytes no longer apply.
    return replace(r, weight_path=path, exact_weights_bytes=None)
