"""A serving configuration: which engine, which model, and that engine's knobs as typed fields.

One class per engine, discriminated by `engine`; an unknown knob is a validation error
(extra="forbid"), never a silent drop. Adapters in `infopt.engines` turn these into argv/env.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from .base import Spec


class EngineName(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    LLAMACPP = "llamacpp"
    MLX = "mlx"


class _Common(Spec):
    model_path: str
    served_model_name: str = "model"
    # 127.0.0.1 unless exposure was approved (approval gate comes with a later issue).
    host: str = "127.0.0.1"
    port: int | None = Field(None, ge=1, le=65535, description="None: a free port is picked")


class LlamaCppConfig(_Common):
    engine: Literal[EngineName.LLAMACPP] = EngineName.LLAMACPP
    threads: int | None = Field(None, ge=1, description="-t; None = the usable CPUs")
    parallel_slots: int = Field(1, ge=1, description="--parallel")
    # Each slot gets ctx_tokens / parallel_slots; we size per slot so every slot keeps the
    # model's full native context (never silently shortened when slots are added).
    ctx_per_slot_tokens: int = Field(..., ge=16)
    flash_attn: Literal["on", "off", "auto"] = "auto"
    batch_tokens: int | None = Field(None, ge=1, description="-b logical batch")
    ubatch_tokens: int | None = Field(None, ge=1, description="-ub physical batch")
    cache_type_k: Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0",
                          "q5_1"] = "f16"
    cache_type_v: Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0",
                          "q5_1"] = "f16"
    # -lv: 4 makes this build log its KV buffer sizes (checked against the cost model).
    log_verbosity: int | None = Field(None, ge=0, le=5)

    @property
    def ctx_total_tokens(self) -> int:
        return self.ctx_per_slot_tokens * self.parallel_slots


class VllmConfig(_Common):
    engine: Literal[EngineName.VLLM] = EngineName.VLLM
    max_model_len: int = Field(..., ge=16)
    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = "auto"
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    # CPU backend only: VLLM_CPU_KVCACHE_SPACE in whole GiB (vLLM 0.32 parses it with int():
    # "0.5" fails at start-up with "invalid literal for int()").
    cpu_kvcache_space_gib: int | None = Field(None, ge=1)


ServingConfig = Annotated[LlamaCppConfig | VllmConfig, Field(discriminator="engine")]
_SERVING_ADAPTER: TypeAdapter[Any] = TypeAdapter(ServingConfig)


def with_knob(config: LlamaCppConfig | VllmConfig, knob: str, value: Any) -> LlamaCppConfig | VllmConfig:
    """A copy of `config` with one knob changed, re-validated (unknown knob -> ValidationError)."""
    data = config.model_dump()
    if knob not in data:
        raise ValueError(f"engine {config.engine} has no knob '{knob}'; knobs: "
                         f"{sorted(k for k in data if k not in _Common.model_fields)}")
    data[knob] = value
    return _SERVING_ADAPTER.validate_python(data)
