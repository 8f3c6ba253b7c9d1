"""Memory fit and roofline ceilings: what a candidate needs, what it can hold, how fast it could go.

Bytes and seconds inside; `_gib` only where an engine's own knob is in GiB. Every estimate names
its assumptions; measured inputs (bandwidth, FLOP/s) are marked as such where they are used.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from .base import Spec


class Bound(StrEnum):
    MEMORY = "memory"
    COMPUTE = "compute"
    COMMUNICATION = "communication"


class Envelope(StrEnum):
    THEORETICAL = "theoretical"  # vendor peaks, idealized traffic
    CALIBRATED = "calibrated"  # measured sustained bandwidth / GEMM rate of this machine


class DeviceBudget(Spec):
    """One device's resources, with where each figure came from."""

    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: float | None  # vendor peak (theoretical) for GPUs
    dense_flops_per_s: dict[str, float]  # math path ("bf16", "fp8", "fp4", "int8") -> rate
    compute_capability: str | None = None
    interconnect_bytes_per_s: float | None = None  # per direction, between TP ranks
    calibrated_bandwidth_bytes_per_s: float | None = None  # measured
    calibrated_flops_per_s: dict[str, float] = Field(default_factory=dict)  # measured
    # The host's engine-relevant ISA flags when the device is this CPU (what kernels it can
    # run: infopt.engines.support); None for a GPU.
    cpu_isa_features: list[str] | None = None
    source: str


class WeightPath(Spec):
    """How the weights are stored and which arithmetic the linear layers execute."""

    label: str  # "BF16", "FP8 W8A8", "AWQ W4A16", "GGUF Q4_1", ...
    bits_per_weight: float  # storage incl. scales/zeros for quantized linear layers
    math: Literal["bf16", "fp16", "fp8", "fp4", "int8", "fp32"]
    unquantized_bits: float = 16.0  # embeddings, norms, routers
    source: str
    # The checkpoint's own path: the modules its quantization config left unconverted stay at
    # 16 bits and run 16-bit math (ModelInspection.quantization.params_not_converted).
    honours_not_converted: bool = False


class MemoryFit(Spec):
    engine: str
    gpu: str
    gpu_count: int
    tp: int
    pp: int
    context_tokens: int
    concurrency: int  # per replica
    dp: int = 1  # replicas, each sized as this fit (engines' DP: one scheduler and pool each)
    kv_dtype: str
    weight_path: str
    memory_per_gpu_bytes: int
    budget_bytes_per_gpu: int  # what the engine lets itself use (utilization/fraction applied)
    weights_bytes_per_gpu: int
    runtime_overhead_bytes_per_gpu: int  # CUDA context, activations, graphs (estimate)
    kv_budget_bytes_per_gpu: int
    kv_bytes_per_token_per_gpu: float  # growing layers + a DSA indexer (sliding/recurrent apart)
    # recurrent/Mamba state + the sliding-window or attention-chunk cap at context
    state_bytes_per_sequence_per_gpu: int
    required_kv_bytes_per_gpu: int  # context x concurrency needs this much
    kv_capacity_tokens: int  # what the engine would allocate (block-rounded)
    max_concurrency_at_context: float  # kv_capacity / (context incl. state), unrounded
    fits: bool
    gap_bytes: int  # per GPU; 0 when it fits
    headroom_bytes: int  # per GPU; kv budget left after the requested load (negative = gap)
    alternatives: list[str]  # options to put to the user; never applied silently
    assumptions: list[str]


class AttainableEstimate(Spec):
    """What a decode step is likely to take on this GPU and engine: the ceiling's own terms
    with fixed costs and achieved fractions fitted on published measured results (an
    estimate, with its held-out error; infopt.costmodel.attainable)."""

    tokens_per_s: float
    t_step_s: float
    group: str  # the fitted group that answered: "vllm/Hopper", "any/Hopper", "any/any"
    median_abs_error: float  # held-out |estimate / measured - 1| on the published results
    p90_abs_error: float
    label: str  # "estimate (vllm/Hopper fit on 99 published results; ... error median 12%)"


class CeilingRow(Spec):
    phase: Literal["decode", "prefill"]
    envelope: Envelope
    weight_path: str
    kv_dtype: str
    batch: int  # decode: active sequences; prefill: 1 prompt of `context_tokens`
    context_tokens: int
    bytes_per_step: float
    flops_per_step: float
    comm_bytes_per_step: float
    t_memory_s: float
    t_compute_s: float
    t_comm_s: float
    t_step_s: float
    bound: Bound
    tokens_per_step: float  # decode: batch x verified tokens per step; prefill: prompt tokens
    tokens_per_s: float  # decode: aggregate output tokens/s; prefill: input tokens/s
    # Theoretical decode rows on a GPU: the attainable estimate beside the ceiling.
    estimate: AttainableEstimate | None = None


class CeilingTable(Spec):
    device: DeviceBudget
    rows: list[CeilingRow]
    unavailable: list[str]  # envelopes that could not be computed, and why
    assumptions: list[str]
    left_out: list[str] = Field(default_factory=list)  # rows the device cannot run, and why


class CeilingRatio(Spec):
    """Measured / ceiling, never clamped: above 1 means the model's assumptions are wrong."""

    metric: str
    measured: float
    ceiling: float
    envelope: Envelope
    ratio: float
    flagged: bool  # ratio > 1: the estimate is not an upper bound for this case
    note: str
    # What bounds the ceiling's step ("compute", "memory", ...): the predicted bottleneck.
    bound: str | None = None
    # GPU theoretical rows: the attainable estimate at the same batch, and what it is.
    attainable: float | None = None
    attainable_note: str | None = None


class OffloadObservation(Spec):
    """How much of the model the engine put in device memory, as its own load log says
    (llama.cpp: "load_tensors: offloaded 33/33 layers to GPU" and a model buffer line per
    device): the offload achieved, not the one asked for."""

    layers_offloaded: int
    layers_total: int  # the repeating layers + 1 (the output layer)
    model_buffer_bytes: dict[str, int] = Field(default_factory=dict)  # buffer name -> bytes
    line: str  # the log line it was read from

    @property
    def full(self) -> bool:
        return self.layers_offloaded >= self.layers_total


class KvObservation(Spec):
    """What an engine's startup log says it allocated for the KV cache."""

    tokens: int | None = None  # vLLM "KV cache size: N tokens", SGLang "#tokens: N"
    bytes: int | None = None  # llama.cpp "KV buffer size = X MiB" (summed over buffers)
    line: str  # the log line(s) it came from


class KvCheck(Spec):
    """The KV capacity the engine's startup log reports against the fit's estimate for the
    same configuration (infopt.costmodel.kv_check): tokens where the engine logs tokens (vLLM,
    SGLang, TensorRT-LLM), bytes where it logs buffers (llama.cpp at -lv 4)."""

    unit: Literal["tokens", "bytes"]
    observed: int  # per replica, as the engine logged it
    predicted: int  # the fit's, per replica
    error: float  # observed / predicted - 1
    line: str  # the log line(s)
    stops_ladder: bool  # |error| beyond KV_STOP_ERROR: the fit's overhead terms are wrong here


# The parallel-layout families, in the order the ladder climbs them (the specification's step
# 5): each family's layouts are screened against the best configuration the families before it
# left, so a PP layout competes with the TP winner, not with TP=1.
LayoutFamily = Literal["TP", "PP", "DP", "EP"]
LAYOUT_FAMILIES: tuple[LayoutFamily, ...] = ("TP", "PP", "DP", "EP")


class Layout(Spec):
    """A multi-GPU layout: TP x PP ranks per replica, DP replicas; `ep`: MoE experts split
    whole over the TP (x DP) ranks."""

    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    ep: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def family(self) -> LayoutFamily:
        """The ladder's family: EP and DP layouts by their outermost axis, then PP, else TP
        (the TP=1 control included)."""
        return "EP" if self.ep else "DP" if self.dp > 1 else "PP" if self.pp > 1 else "TP"

    @property
    def label(self) -> str:
        parts = [f"TP={self.tp}"] + [f"{a}={n}" for a, n in (("PP", self.pp), ("DP", self.dp))
                                     if n > 1]
        return " ".join(parts + ([f"EP={self.tp * self.dp}"] if self.ep else []))


class LayoutCeiling(Spec):
    envelope: Envelope
    tokens_per_s: float  # aggregate decode output tokens/s over all replicas (upper bound)
    bound: Bound
    comm_share: float  # t_comm / t_step of one rank's step


class LayoutRow(Spec):
    """One row of the experiment matrix: the layout, why it is tried, its memory fit per
    replica, its decode ceilings at the target load, and the command that runs it."""

    layout: Layout
    label: str
    why: str
    fits: bool
    refused: str | None = None  # why it cannot run (heads, memory, the engine has no axis)
    concurrency_per_replica: int
    kv_capacity_tokens_per_replica: int | None = None
    max_concurrency_at_context: float | None = None  # over all replicas
    weights_bytes_per_gpu: int | None = None
    ceilings: list[LayoutCeiling] = Field(default_factory=list)
    command: str | None = None
    command_note: str | None = None


class LayoutMatrix(Spec):
    model: str
    device: DeviceBudget
    gpu_count: int
    concurrency: int
    context_tokens: int
    engine: str
    interconnect: str  # the link figure the communication terms use, and its source
    rows: list[LayoutRow]
    assumptions: list[str]
