"""What `infopt plan` and the `plan` deployment compute from: the model, the device (a catalog
GPU or the detected hardware) and the load. The deployment's parameter schema, so the Prefect UI
shows a typed form."""

from __future__ import annotations

from pydantic import Field

from .base import Spec
from .serving import EngineName


class PlanRequest(Spec):
    model: str = Field(..., min_length=1, description="hub id ORG/NAME, HF directory or GGUF")
    revision: str | None = None
    endpoint: str | None = None  # a hub mirror; default $HF_ENDPOINT or huggingface.co
    gpu: str | None = Field(None, description="catalog GPU name or alias, e.g. 'H100 SXM'; "
                                              "None: the detected hardware")
    gpu_count: int | None = Field(None, ge=1, le=1024)
    engine: EngineName | None = None  # None: the routed engine for the device and load
    context_tokens: int | None = Field(None, ge=1, le=10_000_000,
                                       description="per sequence; None: the native context")
    concurrency: int = Field(1, ge=1, le=1_000_000, description="simultaneous sequences")
    kv_dtype: str = Field("auto", min_length=1, max_length=16)
    weight_dtype: str | None = Field(None, max_length=16, description="None: the checkpoint's")
    tp: int = Field(1, ge=1, le=64)
    pp: int = Field(1, ge=1, le=64)
    gpu_memory_utilization: float = Field(0.9, ge=0.05, le=1.0)
    # None: SGLang's own default for the GPU and shape (infopt.engines.sglang.adapter)
    mem_fraction_static: float | None = Field(None, ge=0.05, le=1.0)
    spec_tokens_per_step: float = Field(1.0, ge=1.0, le=64.0)
    # Each request's lengths: the decode ceilings and attainable estimates read each
    # sequence's KV at prompt + half the output (the fit stays at context_tokens), and the
    # estimate spreads one prefill per request over its decode steps. Both None: assumed
    # (1,024 + 256), the ceilings at the full context, and said so in the plan.
    input_tokens: int | None = Field(None, ge=1, le=10_000_000)
    output_tokens: int | None = Field(None, ge=1, le=10_000_000)
