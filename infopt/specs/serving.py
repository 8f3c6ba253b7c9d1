"""A serving configuration: which engine, which model, and that engine's knobs as typed fields.

One class per engine, discriminated by `engine`; an unknown knob is a validation error
(extra="forbid"), never a silent drop. Adapters in `infopt.engines` turn these into argv/env.
Every knob is a flag (or config-file key) of the engine version its adapter pins; the adapter's
module docstring names the source each was checked against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, field_validator, model_validator

from .base import Spec

# A knob's value in a typed change or an override (None: the engine's own default).
KnobValue = int | float | str | bool | None


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
    # Environment variables the engine needs on top of infopt's (a troubleshooting remedy's,
    # e.g. vLLM's VLLM_CPU_KVCACHE_SPACE): part of the configuration, so they are carried into
    # later trials, covered by the trial key and rendered into every deployment artifact.
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _no_secrets(cls, env: dict[str, str]) -> dict[str, str]:
        from infopt.environ import is_secret_name

        if secret := sorted(k for k in env if is_secret_name(k)):
            raise ValueError(f"env {secret}: a configuration is printed in reports and "
                             "manifests; credentials come from Prefect Secret blocks or the "
                             "environment, never from a serving configuration")
        if bad := sorted(k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)):
            raise ValueError(f"env {bad}: not an environment variable name")
        return env


class LlamaCppConfig(_Common):
    engine: Literal[EngineName.LLAMACPP] = EngineName.LLAMACPP

    @property
    def speculates(self) -> bool:
        """Speculative decoding on (several tokens a step possible)."""
        return self.spec_type is not None

    threads: int | None = Field(None, ge=1, description="-t; None = llama.cpp's own default "
                                "(cpu_get_num_math(): the physical cores)")
    # --parallel; None = llama.cpp's own default: "auto", which server.cpp turns into 4 slots
    # sharing one unified KV pool (the engine's out-of-the-box configuration, the control).
    parallel_slots: int | None = Field(1, ge=1, description="--parallel")
    # Each slot gets ctx_tokens / parallel_slots; we size per slot so every slot keeps the
    # model's full native context (never silently shortened when slots are added). None: -c
    # omitted, so llama.cpp allocates the model's trained context, shared by all slots.
    ctx_per_slot_tokens: int | None = Field(..., ge=16)
    flash_attn: Literal["on", "off", "auto"] = "auto"
    batch_tokens: int | None = Field(None, ge=1, description="-b logical batch")
    ubatch_tokens: int | None = Field(None, ge=1, description="-ub physical batch")
    cache_type_k: Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0",
                          "q5_1"] = "f16"
    cache_type_v: Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0",
                          "q5_1"] = "f16"
    # --spec-type: speculative drafting, from the context (n-gram lookup) or a draft model
    # (draft-simple, -md); None = none (llama.cpp's default).
    spec_type: Literal["ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache",
                       "draft-simple"] | None = None
    # -md: the draft model's GGUF (draft-simple only); it must share the target's tokenizer.
    spec_draft_model: str | None = None
    # --spec-draft-n-max: draft-simple's tokens drafted a step (the build's default: 3).
    spec_draft_n_max: int | None = Field(None, ge=1, le=64)
    # --spec-ngram-simple-size-m: ngram-simple's draft length in tokens (the build's default:
    # 48; common/speculative.cpp takes it as the implementation's n_max).
    spec_ngram_simple_size_m: int | None = Field(None, ge=1, le=256)
    # --cache-ram: the host-RAM prompt cache (MiB) that keeps idle slots' prompts for later
    # requests with the same prefix (llama.cpp PR 16391); None = the build's default, 8192;
    # 0 = off; -1 = no limit.
    cache_ram_mib: int | None = Field(None, ge=-1)
    # -lv: 4 makes this build log its KV buffer sizes (checked against the cost model).
    log_verbosity: int | None = Field(None, ge=0, le=5)
    # Beyond device memory (a GPU build): -ngl, the layers kept in VRAM (a number, "auto" or
    # "all"; None: the build's default, "auto" in 0c1e570); -ncmoe, the MoE expert weights of
    # the first N layers kept in host RAM; -sm, how layers or rows split over several GPUs;
    # -ts, each GPU's share. A CPU build accepts them and warns they have no effect.
    n_gpu_layers: Annotated[int, Field(ge=0)] | Literal["auto", "all"] | None = None
    n_cpu_moe: int | None = Field(None, ge=0)
    split_mode: Literal["none", "layer", "row", "tensor"] | None = None
    tensor_split: list[float] | None = None

    @field_validator("tensor_split")
    @classmethod
    def _shares(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and (not v or any(x < 0 for x in v) or sum(v) <= 0):
            raise ValueError("tensor_split: one non-negative share per GPU, at least one above "
                             "0 (e.g. [3, 1]: three quarters of the layers on GPU 0)")
        return v

    @model_validator(mode="after")
    def _speculative(self) -> LlamaCppConfig:
        if (self.spec_type == "draft-simple") != (self.spec_draft_model is not None):
            raise ValueError("spec_type draft-simple and spec_draft_model go together: a "
                             "draft model drafts only under draft-simple, which needs one")
        if self.spec_draft_n_max is not None and self.spec_type != "draft-simple":
            raise ValueError("spec_draft_n_max sets draft-simple's draft length; set "
                             "spec_type: draft-simple or drop it")
        if self.spec_ngram_simple_size_m is not None and self.spec_type != "ngram-simple":
            raise ValueError("spec_ngram_simple_size_m sets ngram-simple's draft length; set "
                             "spec_type: ngram-simple or drop it")
        return self

    @property
    def ctx_total_tokens(self) -> int | None:
        """-c: None when llama.cpp sizes the context itself."""
        if self.ctx_per_slot_tokens is None:
            return None
        return self.ctx_per_slot_tokens * (self.parallel_slots or 1)


class VllmConfig(_Common):
    engine: Literal[EngineName.VLLM] = EngineName.VLLM

    @property
    def speculates(self) -> bool:
        """Speculative decoding on (several tokens a step possible)."""
        return self.speculative_method is not None

    max_model_len: int = Field(..., ge=16)
    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = "auto"
    enforce_eager: bool = False
    # Tool calls: vLLM refuses tool_choice required/named without a parser and "auto" without
    # both (recorded on 0.32: HTTP 400 naming the flags). The parser reads the model family's
    # call format (hermes: <tool_call> JSON, Qwen and others).
    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = Field(None, pattern=r"^[a-z0-9_]+$")
    enable_prefix_caching: bool | None = None
    # --gpu-memory-utilization: the fraction of device memory vLLM allows itself (default 0.9).
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    tensor_parallel_size: int | None = Field(None, ge=1)
    pipeline_parallel_size: int | None = Field(None, ge=1)
    # Replicas of the TP x PP engine behind vLLM's own front end (GPUs = TP x PP x DP).
    data_parallel_size: int | None = Field(None, ge=1)
    # MoE layers split whole experts over the TP (x DP) ranks instead of slicing each expert.
    enable_expert_parallel: bool = False
    # CPU backend only: VLLM_CPU_KVCACHE_SPACE in whole GiB (vLLM 0.32 parses it with int():
    # "0.5" fails at start-up with "invalid literal for int()").
    cpu_kvcache_space_gib: int | None = Field(None, ge=1)
    # Start-up in one process instead of three (API server, engine core, worker): "uni" runs
    # the worker inside the engine core; engine_core_multiprocessing=False
    # (VLLM_ENABLE_V1_MULTIPROCESSING=0) runs the engine core inside the API server. Measured on
    # 2 EPYC cores, SmolLM2-135M eager: ready in 34 s against 49 s with vLLM's defaults (mp,
    # multiprocessing on). None = vLLM's default.
    distributed_executor_backend: Literal["mp", "uni", "ray"] | None = None
    engine_core_multiprocessing: bool | None = None
    # --kv-offloading-size: a host-RAM tier for KV blocks (GiB, summed over TP ranks; the
    # native backend), vllm/config/cache.py 0.32; None = no tier (vLLM's default).
    kv_offloading_size_gib: float | None = Field(None, gt=0)
    # --speculative-config {"method": M, "num_speculative_tokens": N[, "model": D]}
    # (vllm/config/speculative.py, 0.32 and main): "ngram" drafts from the context (vLLM's
    # default 5-token lookup), "mtp" with the model's own MTP layers (no "model"), "eagle3" /
    # "eagle" / "draft_model" with the drafter D (a local folder or a hub id); None: no
    # speculation (vLLM's default).
    speculative_method: Literal["ngram", "mtp", "eagle3", "eagle", "draft_model"] | None = None
    speculative_model: str | None = None
    num_speculative_tokens: int | None = Field(None, ge=1, le=32)

    @model_validator(mode="after")
    def _speculative(self) -> VllmConfig:
        m = self.speculative_method
        if (m is None) != (self.num_speculative_tokens is None):
            raise ValueError("speculative_method and num_speculative_tokens go together: vLLM "
                             "needs the draft length of the method it drafts with")
        if m in ("ngram", "mtp", None) and self.speculative_model is not None:
            raise ValueError(f"speculative_model is the drafter of eagle3/eagle/draft_model; "
                             f"{m or 'no speculation'} takes none")
        if m in ("eagle3", "eagle", "draft_model") and self.speculative_model is None:
            raise ValueError(f"speculative_method {m} needs speculative_model: the drafter's "
                             "folder or hub id")
        return self


class SglangConfig(_Common):
    """SGLang 0.5.23 `python -m sglang.launch_server` (see infopt.engines.sglang.adapter)."""

    engine: Literal[EngineName.SGLANG] = EngineName.SGLANG

    @property
    def speculates(self) -> bool:
        """Speculative decoding on (several tokens a step possible)."""
        return self.speculative_algorithm is not None

    # --context-length; required so the plan sizes the model's full context, never a default.
    context_length: int = Field(..., ge=16)
    # Weights + KV pool as a fraction of device memory; None = SGLang's own per-GPU default.
    mem_fraction_static: float | None = Field(None, gt=0, lt=1)
    max_running_requests: int | None = Field(None, ge=1)
    # --schedule-policy: the waiting queue's order; None = SGLang's default, "fcfs"
    # (python/sglang/srt/server_args.py ServerArgs.schedule_policy).
    schedule_policy: Literal["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"] | None = \
        None
    # Tokens per prefill chunk; -1 disables chunked prefill (SGLang's own convention).
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = Field(None, ge=1)
    kv_cache_dtype: Literal["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16"] = "auto"
    tp_size: int | None = Field(None, ge=1)
    pp_size: int | None = Field(None, ge=1)
    dp_size: int | None = Field(None, ge=1)  # replicas under SGLang's data-parallel controller
    ep_size: int | None = Field(None, ge=1)  # MoE experts split over this many of the TP ranks
    attention_backend: Literal["flashinfer", "fa3", "fa4", "triton", "torch_native",
                               "flex_attention", "flashmla", "trtllm_mla", "trtllm_mha",
                               "cutedsl_mla", "aiter", "wave", "intel_amx", "ascend",
                               "intel_xpu"] | None = None
    # Rendered as the 0.5.23 spelling --cuda-graph-backend-{decode,prefill} disabled
    # (--disable-cuda-graph still parses there but is deprecated).
    disable_cuda_graph: bool = False
    # --cuda-graph-max-bs-decode: the largest decode batch captured as a CUDA graph (larger
    # batches run eagerly); None = SGLang's default by GPU memory and TP. SGLang 0.5.23 has no
    # --cuda-graph-max-bs: the knob is per phase (arg_groups/fields/exec_.py ExecGraph
    # cuda_graph_max_bs_decode / _prefill, folded into cuda_graph_config by
    # arg_groups/cuda_graph_hook.py parse_cuda_graph_config), and argparse refuses the old
    # spelling as an ambiguous abbreviation of the two.
    cuda_graph_max_bs_decode: int | None = Field(None, ge=1)
    enable_torch_compile: bool = False
    disable_radix_cache: bool = False
    # --enable-hierarchical-cache with --hicache-size: the radix cache's host-RAM tier
    # (HiCache); None = no tier (SGLang's default). GB of 10**9 bytes for EACH rank: every
    # TP x PP rank of every DP replica builds its own host pool of that size (0.5.23
    # mem_cache/pool_host/base.py: `host_size * 1e9 // size_per_token` tokens per pool;
    # managers/data_parallel_controller.py launch_tensor_parallel_group: one scheduler per
    # pp_rank x tp_rank of each DP rank), so the host RAM taken is size x tp x pp x dp.
    hicache_size_gb: int | None = Field(None, ge=1)
    speculative_algorithm: Literal["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"] | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = Field(None, ge=1)
    speculative_eagle_topk: int | None = Field(None, ge=1)
    # Tokens verified a step INCLUDING the root (the last accepted token), so n drafted tokens
    # are n + 1 here: NGRAM's tree holds draft_token_num - 1 drafted nodes after the root
    # (0.5.23 kernels/jit/csrc/ngram_corpus/param.h get_draft_token_num; result.cpp fillResult
    # puts last_token first), and an EAGLE chain (top-k 1) verifies num_steps + 1
    # (arg_groups/speculative_hook.py _handle_eagle_family).
    speculative_num_draft_tokens: int | None = Field(None, ge=1)

    @field_validator("chunked_prefill_size")
    @classmethod
    def _chunk(cls, v: int | None) -> int | None:
        if v is not None and v != -1 and v < 1:
            raise ValueError("chunked_prefill_size is a token count >= 1, or -1 to disable "
                             "chunked prefill")
        return v

    @model_validator(mode="after")
    def _speculative(self) -> SglangConfig:
        details = [f for f in ("speculative_draft_model_path", "speculative_num_steps",
                               "speculative_eagle_topk", "speculative_num_draft_tokens")
                   if getattr(self, f) is not None]
        if details and self.speculative_algorithm is None:
            raise ValueError(f"{', '.join(details)} set without speculative_algorithm: choose "
                             "the algorithm (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM) too")
        if self.speculative_algorithm == "NGRAM" and self.speculative_draft_model_path:
            raise ValueError("NGRAM speculation drafts from the prompt; it takes no "
                             "speculative_draft_model_path")
        if (self.speculative_algorithm in ("EAGLE3", "STANDALONE")
                and not self.speculative_draft_model_path):
            raise ValueError(f"{self.speculative_algorithm} needs speculative_draft_model_path "
                             "(a separate draft checkpoint)")
        if (self.speculative_algorithm == "NGRAM"
                and (self.speculative_num_draft_tokens or 2) < 2):
            raise ValueError("speculative_num_draft_tokens counts the root token too: NGRAM "
                             "needs at least 2 (one drafted token)")
        return self


class TrtllmKvCacheOptions(Spec):
    """`kv_cache_config` keys of the LLM API (KvCacheConfig in tensorrt_llm/llmapi/llm_args.py).
    free_gpu_memory_fraction is not here: it is TrtllmConfig.kv_cache_free_gpu_memory_fraction,
    copied into this block when the block is rendered (see infopt.engines.trtllm.adapter)."""

    enable_block_reuse: bool | None = None
    # "only for the PyTorch backend" per llm_args.py; "auto" follows the checkpoint.
    dtype: Literal["auto", "fp8"] | None = None
    # Bytes of host RAM for KV blocks evicted from the GPU, brought back when a later request
    # reuses them (KvCacheConfig.host_cache_size; block reuse must be on); None: no tier.
    host_cache_size: int | None = Field(None, ge=1)


class TrtllmCudaGraphOptions(Spec):
    """`cuda_graph_config` keys (PyTorch backend)."""

    enable_padding: bool | None = None
    max_batch_size: int | None = Field(None, ge=1)


class TrtllmSpeculativeOptions(Spec):
    """`speculative_config` of the LLM API, as TensorRT-LLM 1.2 reads it (facts and lines in
    infopt/engines/data/trtllm-1.2-llm-args.json, tensorrt_llm/llmapi/llm_args.py at v1.2.1):
    DecodingBaseConfig.from_dict dispatches on decoding_type; the tags are the registry's keys
    ("Eagle" runs EAGLE-3 on the PyTorch backend: 1.2 has no "Eagle3" key; "DraftTarget", not
    the internal ClassVar "Draft_Target"). NGram drafts from the context, MTP with the model's
    own layers, Eagle and DraftTarget with a drafter (speculative_model)."""

    decoding_type: Literal["NGram", "MTP", "Eagle", "DraftTarget"]
    # Draft tokens a step for NGram, Eagle and DraftTarget.
    max_draft_len: int | None = Field(None, ge=1, le=32)
    # MTP's draft length: MTPDecodingConfig.from_dict and validate_speculative_config set
    # max_draft_len = num_nextn_predict_layers (default 1), so MTP takes its length here only.
    num_nextn_predict_layers: int | None = Field(None, ge=1, le=32)
    # NGram's longest matched pattern: 1.2 asserts it > 0 and defaults it to 0.
    max_matching_ngram_size: int | None = Field(None, ge=1)
    speculative_model: str | None = None

    @model_validator(mode="after")
    def _drafter(self) -> TrtllmSpeculativeOptions:
        kind = self.decoding_type
        needs = kind in ("Eagle", "DraftTarget")
        if needs != (self.speculative_model is not None):
            raise ValueError(f"speculative_config {kind}: speculative_model is "
                             + ("required (the drafter's folder)" if needs else
                                "not taken (it drafts without a drafter model)"))
        if kind == "MTP":
            if self.num_nextn_predict_layers is None or self.max_draft_len is not None:
                raise ValueError("speculative_config MTP: set its draft length as "
                                 "num_nextn_predict_layers (TensorRT-LLM 1.2 overwrites "
                                 "max_draft_len with it, default 1); leave max_draft_len unset")
        elif self.max_draft_len is None or self.num_nextn_predict_layers is not None:
            raise ValueError(f"speculative_config {kind}: set max_draft_len (num_nextn_predict_"
                             "layers is MTP's)")
        if (kind == "NGram") != (self.max_matching_ngram_size is not None):
            raise ValueError(f"speculative_config {kind}: max_matching_ngram_size is "
                             + ("required (TensorRT-LLM 1.2 asserts it > 0; its default is 0)"
                                if kind == "NGram" else "NGram's only"))
        return self

    @property
    def draft_tokens(self) -> int:
        """Tokens drafted a step, whichever field carries them for this decoding type."""
        return self.num_nextn_predict_layers or self.max_draft_len or 1


class TrtllmExtraOptions(Spec):
    """LLM API options with no trtllm-serve flag, rendered to the YAML file passed with
    --extra_llm_api_options. Only keys set here are written."""

    kv_cache_config: TrtllmKvCacheOptions | None = None
    cuda_graph_config: TrtllmCudaGraphOptions | None = None
    enable_attention_dp: bool | None = None
    disable_overlap_scheduler: bool | None = None
    enable_chunked_prefill: bool | None = None
    print_iter_log: bool | None = None
    # Serves Prometheus text (trtllm_* metrics) at /prometheus/metrics.
    return_perf_metrics: bool | None = None
    speculative_config: TrtllmSpeculativeOptions | None = None

    def pytorch_only_keys(self) -> list[str]:
        keys = [k for k in ("cuda_graph_config", "disable_overlap_scheduler", "print_iter_log")
                if getattr(self, k) is not None]
        if self.kv_cache_config is not None and self.kv_cache_config.dtype is not None:
            keys.append("kv_cache_config.dtype")
        return keys


# BaseLlmArgs.max_num_tokens's default (tensorrt_llm/llmapi/llm_args.py:2068 at v1.2.1), which
# trtllm-serve's --max_num_tokens takes from BuildConfig.
TRTLLM_DEFAULT_MAX_NUM_TOKENS = 8192


class TrtllmConfig(_Common):
    """TensorRT-LLM 1.x `trtllm-serve MODEL` (see infopt.engines.trtllm.adapter)."""

    engine: Literal[EngineName.TRTLLM] = EngineName.TRTLLM

    @property
    def speculates(self) -> bool:
        """Speculative decoding on (several tokens a step possible)."""
        return (self.extra_llm_api_options is not None
                and self.extra_llm_api_options.speculative_config is not None)

    backend: Literal["pytorch", "tensorrt"] = "pytorch"
    # --max_seq_len: prompt + output of one request; required (the full native context).
    max_seq_len: int = Field(..., ge=16)
    max_batch_size: int | None = Field(None, ge=1)
    max_num_tokens: int | None = Field(None, ge=1)
    tp_size: int | None = Field(None, ge=1)
    pp_size: int | None = Field(None, ge=1)
    ep_size: int | None = Field(None, ge=1)  # --ep_size: MoE experts over this many ranks
    # Fraction of the memory left after weights and activations that the KV cache takes (0.9).
    kv_cache_free_gpu_memory_fraction: float | None = Field(None, gt=0, le=1)
    extra_llm_api_options: TrtllmExtraOptions | None = None

    @property
    def chunked_prefill(self) -> bool:
        return bool(self.extra_llm_api_options
                    and self.extra_llm_api_options.enable_chunked_prefill)

    @property
    def prompt_cap_tokens(self) -> int | None:
        """The longest prompt this server accepts when that is below max_seq_len (None: the
        whole context). The PyTorch backend refuses a prompt over max_num_tokens unless chunked
        prefill is on (tensorrt_llm/llmapi/llm.py BaseLLM._check_arguments: "should not exceed
        max_num_tokens", HTTP 400), and both default to refusing: max_num_tokens 8192,
        enable_chunked_prefill False (llm_args.py at v1.2.1, lines 2068 and 2006)."""
        if self.backend != "pytorch" or self.chunked_prefill:
            return None
        cap = self.max_num_tokens or TRTLLM_DEFAULT_MAX_NUM_TOKENS
        return cap if cap < self.max_seq_len else None

    @model_validator(mode="before")
    @classmethod
    def _served_name(cls, data: Any) -> Any:
        # trtllm-serve names the model after the model directory's basename (openai_server.py:
        # `Path(model).name`) and the pinned CLI has no flag to rename it.
        if isinstance(data, dict) and data.get("model_path"):
            name = PurePosixPath(data["model_path"]).name
            given = data.get("served_model_name")
            if given is None:
                data = {**data, "served_model_name": name}
            elif given != name:
                raise ValueError(f"trtllm-serve serves the model as '{name}' (the model "
                                 f"directory's name) and cannot rename it: set "
                                 f"served_model_name='{name}' or leave it unset")
        return data

    @model_validator(mode="after")
    def _backend_options(self) -> TrtllmConfig:
        if self.backend == "tensorrt" and self.extra_llm_api_options is not None:
            bad = self.extra_llm_api_options.pytorch_only_keys()
            if bad:
                raise ValueError(f"{', '.join(bad)} apply to the PyTorch backend only; use "
                                 "backend='pytorch' or drop them")
        return self


class MlxConfig(_Common):
    """mlx-lm 0.31.3 `python -m mlx_lm server` (see infopt.engines.mlx.adapter)."""

    engine: Literal[EngineName.MLX] = EngineName.MLX

    @property
    def speculates(self) -> bool:
        """Speculative decoding on (several tokens a step possible)."""
        return self.draft_model_path is not None

    # Not an mlx_lm flag: the server grows its KV cache on demand and has no context limit.
    # This is the context the plan sizes memory for (the model's full native context).
    context_tokens: int = Field(..., ge=16)
    # --max-tokens: the server's default when a request names none (mlx-lm's own is 512).
    max_tokens: int | None = Field(None, ge=1)
    decode_concurrency: int | None = Field(None, ge=1)
    prompt_concurrency: int | None = Field(None, ge=1)
    prefill_step_size: int | None = Field(None, ge=1)
    prompt_cache_size: int | None = Field(None, ge=0)
    prompt_cache_bytes: int | None = Field(None, ge=1)
    draft_model_path: str | None = None
    num_draft_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _served_name(cls, data: Any) -> Any:
        # mlx_lm.server has no served-name flag; a request's "model" is a path to load, except
        # "default_model" and the --model value itself, which both mean the loaded model.
        if isinstance(data, dict) and data.get("model_path"):
            given = data.get("served_model_name")
            if given is None:
                data = {**data, "served_model_name": data["model_path"]}
            elif given not in (data["model_path"], "default_model"):
                raise ValueError(f"mlx_lm.server loads whatever path a request names as its "
                                 f"model: served_model_name must be the model path "
                                 f"('{data['model_path']}') or 'default_model', not '{given}'")
        return data

    @model_validator(mode="after")
    def _draft(self) -> MlxConfig:
        if self.num_draft_tokens is not None and self.draft_model_path is None:
            raise ValueError("num_draft_tokens needs draft_model_path")
        return self


AnyServingConfig = LlamaCppConfig | VllmConfig | SglangConfig | TrtllmConfig | MlxConfig
ServingConfig = Annotated[AnyServingConfig, Field(discriminator="engine")]


def config_identity(config: AnyServingConfig, exclude: set[str] | frozenset[str] = frozenset({"port"})
                    ) -> dict[str, Any]:
    """The configuration as content keys hash it: JSON, without `exclude` (where it listens),
    and without an empty `env` (keys made before configurations carried one stay valid)."""
    dump = config.model_dump(mode="json", exclude=set(exclude))
    if not dump.get("env"):
        dump.pop("env", None)
    for name in _ADDED_LATER:  # unset: the keys made before these fields existed stay valid
        if name in dump and dump[name] is None:
            del dump[name]
    return dump


# Fields added after trial keys and kept results were first made; left out of a configuration's
# identity while unset.
_ADDED_LATER = ("n_gpu_layers", "n_cpu_moe", "split_mode", "tensor_split")


def same_config(a: AnyServingConfig, b: AnyServingConfig) -> bool:
    """Whether two configurations are the same serving configuration (where they listen
    aside): when the control and the baseline are (vLLM: its defaults already serve the native
    context), the baseline's trials stand for the control and no separate control trial runs."""
    return config_identity(a) == config_identity(b)


def engine_knobs(engines: list[EngineName] | None = None) -> set[str]:
    """The tunable knobs (config fields) of these engines (None: of any engine)."""
    configs = {c.model_fields["engine"].default: c for c in
               (LlamaCppConfig, VllmConfig, SglangConfig, TrtllmConfig, MlxConfig)}
    return {k for e, c in configs.items() if engines is None or e in engines
            for k in c.model_fields} - {"engine", "host", "port"}


# A tagged union is a valid TypeAdapter argument at run time; mypy's stub wants a type.
_SERVING_ADAPTER: TypeAdapter[Any] = TypeAdapter(ServingConfig)  # type: ignore[arg-type]


def with_knob(config: AnyServingConfig, knob: str, value: Any) -> AnyServingConfig:
    """A copy of `config` with one knob changed, re-validated (unknown knob -> ValidationError).
    `env.NAME` sets the environment variable NAME (None: unsets it)."""
    return with_knobs(config, {knob: value})


def _set_knob(data: dict[str, Any], knob: str, value: Any, engine: str) -> dict[str, Any]:
    if knob.startswith("env."):
        name, env = knob.removeprefix("env."), dict(data["env"])
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
        return {**data, "env": env}
    if "." in knob:  # a nested option: "extra_llm_api_options.kv_cache_config.dtype"
        return _set_nested(data, knob, value, engine)
    if knob not in data:
        raise ValueError(f"engine {engine} has no knob '{knob}'; knobs: "
                         f"{sorted(k for k in data if k not in _Common.model_fields)}")
    return {**data, knob: value}


def knob_value(config: AnyServingConfig, knob: str) -> Any:
    """A knob's value, following a dotted path through nested option blocks (an unset block:
    None)."""
    node: Any = config
    for key in knob.split("."):
        if node is None:
            return None
        node = getattr(node, key)
    return node


def _set_nested(data: dict[str, Any], knob: str, value: Any, engine: str) -> dict[str, Any]:
    """`data` with the dotted path set (unset blocks created; validation refuses a key the
    block does not have)."""
    head, *rest = knob.split(".")
    if head not in data:
        raise ValueError(f"engine {engine} has no knob '{head}' (in '{knob}')")
    node = data
    for key in [head, *rest[:-1]]:
        if node.get(key) is None:
            node[key] = {}
        node = node[key]
    node[rest[-1]] = value
    return data


def with_knobs(config: AnyServingConfig, changes: Mapping[str, Any]) -> AnyServingConfig:
    """A copy of `config` with every change set, validated once: knobs that go together
    (a draft model and its speculation type) change together."""
    data = config.model_dump()
    for knob, value in changes.items():
        data = _set_knob(data, knob, value, config.engine)
    return _SERVING_ADAPTER.validate_python(data)
