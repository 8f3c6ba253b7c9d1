"""`infopt plan`: memory fit of the requested candidate plus a ceiling table across the feasible
weight x KV combinations and batch sizes, for one device and layout.

Two contexts, on purpose: the fit is at the requested context (default the native one: the
engine must be able to serve it), while the decode ceilings and attainable estimates read each
sequence's KV at the workload's mean context while decoding (prompt + half the output) whenever
request lengths are given, since that is what a sequence holds on average over its decode
steps and what the estimate was fitted at (attainable_data.py). Without lengths they stay at
the full context, the worst case, and say so."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import Field

from infopt.costmodel.attainable import estimate
from infopt.costmodel.fit import FitRequest, plan_fit
from infopt.costmodel.layouts import fitting_layouts
from infopt.costmodel.roofline import decode_row, prefill_row
from infopt.costmodel.ttft import ttft_estimate
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
    # The tokens of context per sequence the decode ceilings and attainable estimates read KV
    # at (the fit's own is `context_tokens`), and why that many.
    decode_context_tokens: int
    decode_context_source: str


def batch_sizes(concurrency: int, max_concurrency: float) -> list[int]:
    sizes = {1, concurrency}
    b = 8
    while b < max(concurrency, min(max_concurrency, 256)):
        sizes.add(b)
        b *= 4
    return sorted(s for s in sizes if s >= 1)


def ceiling_table(r: FitRequest, batches: list[int], lengths: RequestLengths,
                  tokens_per_step: float = 1.0) -> CeilingTable:
    """Decode rows at `lengths`' decode context (decode_context), prefill rows of one prompt
    of its prompt length, across the weight paths and KV types the device can run."""
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
    context, context_source = decode_context(r.context_tokens, lengths)
    prompt, output = lengths.prompt_tokens, lengths.output_tokens
    rows: list[CeilingRow] = []
    unavailable: list[str] = []
    for env in (Envelope.THEORETICAL, Envelope.CALIBRATED):
        produced = False
        for path in paths:
            exact = r.exact_weights_bytes if path.label == r.weight_path.label else None
            for kv in kvs:
                pre = prefill_row(r.model, path, kv, prompt, dev, env, r.tp,
                                  exact_weights_bytes=exact)
                for b in batches:
                    row = decode_row(r.model, path, kv, b, context, dev, env, r.tp,
                                     tokens_per_step=tokens_per_step,
                                     exact_weights_bytes=exact, pp=r.pp)
                    if row:
                        rows.append(_with_estimate(r, row, pre, output))
                        produced = True
                if pre:
                    rows.append(_with_ttft(pre) if dev.compute_capability else pre)
        if not produced:
            unavailable.append(
                f"{env.value}: no {'vendor peak' if env is Envelope.THEORETICAL else 'measured'}"
                f" bandwidth/compute for {dev.name}"
                + (" (run on the machine, or give measured figures)" if env is
                   Envelope.CALIBRATED else " (not in the sourced catalog)"))
    return CeilingTable(device=dev, rows=rows, unavailable=unavailable, left_out=left_out,
                        assumptions=[
        "decode: executed weights read once per step (ideal batch reuse); MoE: expected union "
        f"of experts for uniform routing; KV read at {context:,} tokens per sequence "
        f"({context_source})",
        "FLOPs: 2 per multiply-add; W4A16/W8A16 paths at 16-bit rates; FP8/FP4 rates only "
        "where the device executes them",
        "TP all-reduce not overlapped with compute; launch, scheduler and HTTP overheads "
        "ignored: these are upper bounds, not predictions",
        "attainable estimates (GPU decode rows): the same terms plus per-layer, per-sequence "
        "and per-all-reduce fixed costs and achieved bandwidth/compute fractions, fitted per "
        "engine and GPU family on published measured results (infopt/costmodel/data/"
        "published_results.csv, each with its source); each says its held-out error",
        f"prefill: one prompt of {prompt:,} tokens, causal attention; its TTFT estimate (GPU "
        "rows): overhead + floor / achieved compute fraction, fitted on published "
        "single-stream TTFTs (infopt/costmodel/data/ttft_fit.json), with its held-out error",
        f"lengths: {lengths.source}; each sequence's prefill is spread over its "
        f"{output:,} decode steps in the estimates",
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


def _with_ttft(pre: CeilingRow) -> CeilingRow:
    """A theoretical GPU prefill row with its TTFT estimate (infopt.costmodel.ttft)."""
    est = ttft_estimate(pre)
    return pre.model_copy(update={"estimate": est}) if est else pre


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


@dataclass(frozen=True)
class RequestLengths:
    """Each request's lengths for the ceilings and the estimate, and where they come from."""

    prompt_tokens: int
    output_tokens: int
    source: str
    given: bool  # the user gave at least one of them (flags or a workload file)

    @property
    def mean_context_tokens(self) -> int:
        """Tokens a sequence holds on average over its decode steps: the prompt plus half the
        output (as attainable_data.py costs each published result, so the estimate is read
        where it was fitted, and as tuning.level_steps.mean_context reads a benchmark)."""
        return self.prompt_tokens + self.output_tokens // 2


def request_lengths(context_tokens: int, input_tokens: int | None,
                    output_tokens: int | None, given_by: str = "requests as given"
                    ) -> RequestLengths:
    """Each request's prompt and output tokens for the ceilings and the estimate: each
    sequence's one prefill is spread over its decode steps. Given lengths must fit the
    context; missing ones are assumed and said so."""
    prompt = input_tokens or min(DEFAULT_INPUT_TOKENS, max(1, context_tokens * 3 // 4))
    output = output_tokens or max(1, min(DEFAULT_OUTPUT_TOKENS, context_tokens - prompt))
    if output_tokens and not input_tokens:  # an assumed prompt leaves the given output room
        prompt = max(1, min(prompt, context_tokens - output))
    # Assumed lengths shrink to the context (down to 1 + 1 tokens); given ones are refused.
    if (input_tokens or output_tokens) and prompt + output > context_tokens:
        given = " + ".join(f"--{name}-tokens {n:,}" for name, n in
                           (("input", input_tokens), ("output", output_tokens)) if n)
        raise InputError(
            f"{given}: {prompt:,} prompt + {output:,} output tokens is more than the "
            f"{context_tokens:,}-token context per sequence; shorten them or raise --context")
    if input_tokens and output_tokens:
        return RequestLengths(prompt, output, (
            f"{given_by}: {input_tokens:,} prompt + {output_tokens:,} output tokens"), True)
    if input_tokens or output_tokens:
        return RequestLengths(prompt, output, (
            f"{prompt:,} prompt{'' if input_tokens else ' (ASSUMED)'} + {output:,} output "
            f"tokens{'' if output_tokens else ' (ASSUMED)'} (pass both --input-tokens and "
            "--output-tokens, or --workload FILE)"), True)
    return RequestLengths(prompt, output, (
        f"ASSUMED requests of {prompt:,} prompt + {output:,} output tokens (no workload given: "
        "pass --input-tokens/--output-tokens or --workload FILE)"), False)


def decode_context(context_tokens: int, lengths: RequestLengths) -> tuple[int, str]:
    """(tokens of context per sequence the decode ceilings and estimates read KV at, why).

    With lengths given, the workload's mean context while decoding: reading every sequence's
    KV at the full context instead put Llama-3.1-8B BF16 on one H100 at batch 8 at 118
    attainable tok/s for 729 + 323-token chat requests, where the same model at 1,024 + 512
    tokens is published at ~1,080 (data/published_results.csv aic-0043, TensorRT-LLM): ceilings
    below measured throughput. Without lengths, the full context (an upper bound on the KV read,
    so a lower bound on the ceilings), said so."""
    if not lengths.given:
        return context_tokens, (
            f"the full {context_tokens:,}-token context: no request lengths given; pass "
            "--input-tokens/--output-tokens or --workload FILE to read it at the workload's "
            "mean context")
    mean = min(context_tokens, lengths.mean_context_tokens)
    return mean, (
        f"the workload's mean context while decoding: {lengths.prompt_tokens:,} prompt + half "
        f"of {lengths.output_tokens:,} output tokens; the fit stays at the "
        f"{context_tokens:,}-token context")


def make_plan(r: FitRequest, prompt_tokens: int | None = None,
              tokens_per_step: float = 1.0, output_tokens: int | None = None,
              lengths_from: str = "requests as given") -> PlanResult:
    """The fit at `r`'s context x concurrency; ceilings and estimates at the request lengths'
    decode context when any length is given (decode_context), else at `r`'s context."""
    fit = plan_fit(r)
    gpus, layout = gpus_to_request(r, fit)
    batches = batch_sizes(r.concurrency, fit.max_concurrency_at_context)
    lengths = request_lengths(r.context_tokens, prompt_tokens, output_tokens, lengths_from)
    table = ceiling_table(r, batches, lengths, tokens_per_step)
    context, context_source = decode_context(r.context_tokens, lengths)
    m = r.model
    return PlanResult(**fit.model_dump(), model=m.model, device=r.device, ceilings=table,
                      layer_kinds={str(k): n for k, n in m.layer_kinds.items()},
                      mlp_kinds={str(k): n for k, n in m.mlp_kinds.items()},
                      skipped_blocks=m.skipped_blocks,
                      linear_replaced_blocks=m.linear_replaced_blocks,
                      gpus_to_request=gpus, gpus_to_request_layout=layout,
                      decode_context_tokens=context, decode_context_source=context_source)


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
