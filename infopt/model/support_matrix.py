"""Which engine runs which checkpoint format on which device, with what kernel and arithmetic.

One row per (engine, format, device, compute-capability range). A row states whether the engine
supports the combination, the kernel that runs the linear layers, the arithmetic of the multiply,
and the engine documentation it was read from. Compute capability is a number with a one-digit
minor (7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0); ranges are inclusive.

Reading the "math" column: W4A16 formats (AWQ, GPTQ, compressed-tensors WNA16, NF4, MLX) store
4-bit weights but dequantize them inside the kernel and multiply in 16-bit; FP8 W8A8 multiplies
in FP8 only on CC >= 8.9; NVFP4 multiplies in FP4 only on Blackwell (CC 10.x/12.x) and elsewhere
falls back to weight-only Marlin. A row is a starting hypothesis for a release: confirm the
kernel the engine actually selected in its startup log.
"""

from __future__ import annotations

from infopt.specs.base import Spec
from infopt.specs.checkpoint import (
    CheckpointFormat as F,
)
from infopt.specs.checkpoint import (
    DeviceKind as D,
)
from infopt.specs.checkpoint import (
    DeviceTarget,
    KernelPath,
)
from infopt.specs.checkpoint import (
    KernelTier as T,
)
from infopt.specs.serving import EngineName as E

# Engine documentation the rows were read from (checked 2025; see each row's note for caveats).
VLLM_QUANT = "https://docs.vllm.ai/en/latest/features/quantization/index.html"  # hardware table
VLLM_FP8 = "https://docs.vllm.ai/en/latest/features/quantization/fp8.html"
VLLM_INT4 = "https://docs.vllm.ai/en/latest/features/quantization/int4.html"
VLLM_MODELOPT = "https://docs.vllm.ai/en/latest/features/quantization/modelopt.html"
VLLM_BNB = "https://docs.vllm.ai/en/latest/features/quantization/bnb.html"
VLLM_GGUF = "https://docs.vllm.ai/en/latest/features/quantization/gguf.html"
VLLM_GPU = "https://docs.vllm.ai/en/latest/getting_started/installation/gpu.html"
VLLM_CPU = "https://docs.vllm.ai/en/latest/getting_started/installation/cpu.html"
VLLM_GPT_OSS = "https://docs.vllm.ai/projects/recipes/en/latest/OpenAI/GPT-OSS.html"
SGLANG_QUANT = "https://docs.sglang.ai/advanced_features/quantization.html"  # compatibility table
SGLANG_ARGS = "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py"
TRTLLM_QUANT = "https://nvidia.github.io/TensorRT-LLM/features/quantization.html"
TRTLLM_MATRIX = "https://nvidia.github.io/TensorRT-LLM/reference/support-matrix.html"
MODELOPT_MATRIX = "https://nvidia.github.io/Model-Optimizer/guides/0_support_matrix.html"
LLAMACPP_BUILD = "https://github.com/ggml-org/llama.cpp/blob/master/docs/build.md"
LLAMACPP_CUDA = ("https://github.com/ggml-org/llama.cpp/blob/master/ggml/src/ggml-cuda/"
                 "CMakeLists.txt")
MLX_LM = "https://github.com/ml-explore/mlx-lm"


class SupportRow(Spec):
    engine: E
    format: F
    device: D
    min_compute_capability: float | None = None  # CUDA only; None: no lower bound stated
    max_compute_capability: float | None = None  # inclusive; None: no upper bound
    supported: bool = True
    kernel: str
    math: str
    low_precision_math: bool
    tier: T
    source_url: str
    note: str = ""


def _r(engine: E, fmt: F, device: D, lo: float | None, hi: float | None, kernel: str,  # noqa: PLR0913
       math: str, low: bool, tier: T, url: str, note: str = "", supported: bool = True
       ) -> SupportRow:
    # One table row per call, positional like the table it transcribes.
    return SupportRow(engine=engine, format=fmt, device=device, min_compute_capability=lo,
                      max_compute_capability=hi, supported=supported, kernel=kernel, math=math,
                      low_precision_math=low, tier=tier, source_url=url, note=note)


_W4A16 = "int4 weights dequantized in-kernel; fp16/bf16 tensor-core math"
_FP8 = "fp8 e4m3 tensor-core GEMM (weights and activations)"
_FP4 = "fp4 e2m1 tensor-core GEMM (weights and activations)"
_MARLIN_NOTE = ("vLLM's table lists Marlin (GPTQ/AWQ/FP8/FP4) for Ampere and later; recent "
                "releases footnote Turing")
_SGL_NOTE = "SGLang supports SM80 and newer; check the installed build's architectures"
_MXFP4_W16 = "mxfp4 weights dequantized; bf16 math"
_GGML_INT8 = "int8 dot products (activations re-quantized to 8-bit blocks)"

ROWS: tuple[SupportRow, ...] = (
    # --- vLLM ------------------------------------------------------------------------------
    _r(E.VLLM, F.UNQUANTIZED, D.CUDA, 7.0, None, "dense GEMM (cuBLAS/CUTLASS)",
       "bf16/fp16 tensor cores (fp16 below CC 8.0)", False, T.NATIVE, VLLM_GPU,
       "vLLM needs compute capability 7.0 or higher"),
    _r(E.VLLM, F.UNQUANTIZED, D.CPU, None, None, "CPU backend GEMM (oneDNN/torch)",
       "bf16/fp32", False, T.NATIVE, VLLM_CPU),
    _r(E.VLLM, F.AWQ, D.CUDA, 8.0, None, "awq_marlin", _W4A16, False, T.OPTIMIZED, VLLM_QUANT,
       _MARLIN_NOTE),
    _r(E.VLLM, F.AWQ, D.CUDA, 7.5, 7.5, "awq (AutoAWQ GEMM/GEMV)", _W4A16, False, T.FALLBACK,
       VLLM_QUANT, "AWQ is marked unsupported on Volta (7.0)"),
    _r(E.VLLM, F.AWQ, D.CPU, None, None, "CPU W4A16 (dequantize to bf16)", "bf16", False,
       T.FALLBACK, VLLM_QUANT, "x86 CPU column of the hardware table"),
    _r(E.VLLM, F.GPTQ, D.CUDA, 8.0, None, "gptq_marlin", _W4A16, False, T.OPTIMIZED, VLLM_QUANT,
       _MARLIN_NOTE),
    _r(E.VLLM, F.GPTQ, D.CUDA, 7.0, 7.5, "gptq (ExLlamaV2 kernels)", _W4A16, False, T.FALLBACK,
       VLLM_QUANT),
    _r(E.VLLM, F.GPTQ, D.CPU, None, None, "CPU W4A16 (dequantize to bf16)", "bf16", False,
       T.FALLBACK, VLLM_QUANT, "x86 CPU column of the hardware table"),
    _r(E.VLLM, F.CT_WNA16, D.CUDA, 8.0, None, "Marlin (Machete on CC 9.0)", _W4A16, False,
       T.OPTIMIZED, VLLM_INT4),
    _r(E.VLLM, F.CT_INT8, D.CUDA, 7.5, None, "CUTLASS int8 scaled_mm (W8A8)",
       "int8 tensor-core GEMM", True, T.NATIVE, VLLM_QUANT),
    _r(E.VLLM, F.CT_INT8, D.CPU, None, None, "oneDNN int8 GEMM (W8A8)", "int8", True,
       T.OPTIMIZED, VLLM_QUANT, "x86 CPU column of the hardware table"),
    *(_r(E.VLLM, fmt, D.CUDA, 8.9, None, "CUTLASS/DeepGEMM fp8 scaled_mm (W8A8)", _FP8, True,
         T.NATIVE, url) for fmt, url in ((F.FP8, VLLM_FP8), (F.CT_FP8, VLLM_FP8),
                                         (F.MODELOPT_FP8, VLLM_MODELOPT))),
    *(_r(E.VLLM, fmt, D.CUDA, 7.5, 8.7, "FP8 Marlin weight-only (W8A16)",
         "fp8 weights dequantized in-kernel; fp16/bf16 math", False, T.FALLBACK, VLLM_FP8,
         "FP8 models run on CC >= 7.5 as weight-only W8A16; FP8 MoE needs CC >= 8.9")
      for fmt in (F.FP8, F.CT_FP8, F.MODELOPT_FP8)),
    *(_r(E.VLLM, fmt, D.CUDA, 10.0, None, "CUTLASS/FlashInfer NVFP4 GEMM (W4A4)", _FP4, True,
         T.NATIVE, url, "native FP4 tensor cores are Blackwell only; SM120 backends vary by "
         "release (see vllm-project/vllm#47749), confirm in the startup log")
      for fmt, url in ((F.MODELOPT_NVFP4, VLLM_MODELOPT), (F.CT_NVFP4, VLLM_QUANT))),
    *(_r(E.VLLM, fmt, D.CUDA, 8.0, 9.0, "Marlin FP4 weight-only (W4A16)",
         "fp4 weights dequantized in-kernel; bf16 math", False, T.FALLBACK, VLLM_QUANT,
         "vLLM warns 'Your GPU does not have native support for FP4 computation'; not native "
         "NVFP4") for fmt in (F.MODELOPT_NVFP4, F.CT_NVFP4)),
    _r(E.VLLM, F.MXFP4, D.CUDA, 10.0, None, "FlashInfer MXFP4 MoE", "mxfp4 x mxfp8 tensor cores",
       True, T.NATIVE, VLLM_GPT_OSS, "gpt-oss recipe; confirm the backend in the log"),
    _r(E.VLLM, F.MXFP4, D.CUDA, 9.0, 9.0, "triton_kernels MXFP4 MoE", _MXFP4_W16, False,
       T.OPTIMIZED, VLLM_GPT_OSS, "gpt-oss recipe: Hopper runs weight-only MXFP4"),
    _r(E.VLLM, F.MXFP4, D.CUDA, 8.0, 8.9, "Marlin MXFP4 weight-only", _MXFP4_W16, False,
       T.FALLBACK, VLLM_GPT_OSS),
    *(_r(E.VLLM, fmt, D.CUDA, 7.0, None, "bitsandbytes (dequantize, then 16-bit GEMM)",
         "fp16/bf16 after dequantization", False, T.FALLBACK, VLLM_BNB,
         "NF4 saves memory, not time: not interchangeable with AWQ/GPTQ")
      for fmt in (F.BNB_NF4, F.BNB_INT8)),
    _r(E.VLLM, F.GGUF, D.CUDA, 7.0, None, "vLLM GGUF kernels (ported ggml MMQ/MMVQ)", _GGML_INT8,
       True, T.FALLBACK, VLLM_GGUF, "vLLM calls GGUF support highly experimental and "
       "under-optimized; single-file GGUF only"),
    # --- SGLang (every CUDA row >= 8.0: SM75 was deprecated, sgl-project/sglang#6006, and
    # current sgl-kernel builds fail on SM75 with "no kernel image", sgl-project/sglang#24302) --
    _r(E.SGLANG, F.UNQUANTIZED, D.CUDA, 8.0, None, "dense GEMM (cuBLAS/FlashInfer)",
       "bf16 tensor cores", False, T.NATIVE, SGLANG_QUANT, _SGL_NOTE),
    _r(E.SGLANG, F.AWQ, D.CUDA, 8.0, None, "awq_marlin", _W4A16, False, T.OPTIMIZED, SGLANG_QUANT,
       "Marlin kernels are CUDA-only"),
    _r(E.SGLANG, F.GPTQ, D.CUDA, 8.0, None, "gptq_marlin", _W4A16, False, T.OPTIMIZED,
       SGLANG_QUANT, "Marlin kernels are CUDA-only"),
    _r(E.SGLANG, F.CT_WNA16, D.CUDA, 8.0, None, "compressed-tensors WNA16 (Marlin)", _W4A16,
       False, T.OPTIMIZED, SGLANG_QUANT),
    _r(E.SGLANG, F.CT_INT8, D.CUDA, 8.0, None, "w8a8_int8 (sgl-kernel int8 GEMM)",
       "int8 tensor-core GEMM", True, T.NATIVE, SGLANG_QUANT),
    *(_r(E.SGLANG, fmt, D.CUDA, 8.9, None, "fp8 scaled_mm (sgl-kernel/DeepGEMM)", _FP8, True,
         T.NATIVE, SGLANG_QUANT) for fmt in (F.FP8, F.CT_FP8)),
    _r(E.SGLANG, F.MODELOPT_FP8, D.CUDA, 9.0, None, "modelopt_fp8", _FP8, True, T.NATIVE,
       SGLANG_QUANT, "table: Hopper/SM90+"),
    *(_r(E.SGLANG, fmt, D.CUDA, 10.0, None, "modelopt_fp4 (FlashInfer/CUTLASS FP4)", _FP4, True,
         T.NATIVE, SGLANG_QUANT, "table: Blackwell/SM100+; SM120 kernels vary by release "
         "(sgl-project/sglang#12178)") for fmt in (F.MODELOPT_NVFP4, F.CT_NVFP4)),
    _r(E.SGLANG, F.MXFP4, D.CUDA, 9.0, None, "mxfp4 MoE (Triton/FlashInfer)",
       "mxfp4 weights; bf16 math below Blackwell", False, T.OPTIMIZED, SGLANG_QUANT),
    _r(E.SGLANG, F.GGUF, D.CUDA, 8.0, None, "gguf (sgl-kernel CUDA kernels)",
       "dequantized GGUF blocks", False, T.FALLBACK, SGLANG_QUANT, "CUDA-only kernels"),
    _r(E.SGLANG, F.BNB_NF4, D.CUDA, 8.0, None, "bitsandbytes (dequantize, then 16-bit GEMM)",
       "fp16/bf16 after dequantization", False, T.FALLBACK, SGLANG_ARGS,
       "listed among --quantization choices, not in the compatibility table"),
    # --- TensorRT-LLM ----------------------------------------------------------------------
    _r(E.TRTLLM, F.UNQUANTIZED, D.CUDA, 8.0, None, "TRT-LLM GEMM plugins / PyTorch backend",
       "bf16 tensor cores", False, T.NATIVE, TRTLLM_MATRIX, "BF16 needs Ampere (SM80) or later"),
    _r(E.TRTLLM, F.MODELOPT_FP8, D.CUDA, 8.9, None, "FP8 per-tensor GEMM", _FP8, True, T.NATIVE,
       TRTLLM_QUANT, "ModelOpt FP8: Ada and later (" + MODELOPT_MATRIX + ")"),
    _r(E.TRTLLM, F.MODELOPT_NVFP4, D.CUDA, 10.0, None, "NVFP4 GEMM", _FP4, True, T.NATIVE,
       TRTLLM_QUANT, "ModelOpt FP4: Blackwell and later (" + MODELOPT_MATRIX + ")"),
    _r(E.TRTLLM, F.FP8, D.CUDA, 9.0, None, "FP8 block-scaling GEMM", _FP8, True, T.NATIVE,
       TRTLLM_QUANT, "the PyTorch backend's FP8 support is for Hopper and Blackwell"),
    *(_r(E.TRTLLM, fmt, D.CUDA, 7.5, None, "weight-only int4 GEMM (W4A16)", _W4A16, False,
         T.OPTIMIZED, TRTLLM_MATRIX, "INT4 AWQ/GPTQ not supported below SM75; the loader "
         "expects ModelOpt/converted checkpoints, verify this one loads")
      for fmt in (F.AWQ, F.GPTQ)),
    _r(E.TRTLLM, F.MXFP4, D.CUDA, 9.0, None, "MXFP4 MoE kernels", "mxfp4 weights", False,
       T.OPTIMIZED, TRTLLM_QUANT, "native FP4 math only on Blackwell"),
    # --- llama.cpp -------------------------------------------------------------------------
    _r(E.LLAMACPP, F.GGUF, D.CPU, None, None, "ggml CPU quantized dot products "
       "(AVX2/AVX-512/AMX/NEON)", _GGML_INT8, True, T.OPTIMIZED, LLAMACPP_BUILD),
    _r(E.LLAMACPP, F.GGUF, D.CUDA, 5.0, None, "ggml-cuda MMQ/MMVQ (or dequantize + cuBLAS)",
       _GGML_INT8, True, T.OPTIMIZED, LLAMACPP_CUDA,
       "CC 5.0 is the lowest CUDA 12 target; dp4a from 6.1, int8 tensor cores from 7.5"),
    _r(E.LLAMACPP, F.GGUF, D.METAL, None, None, "ggml-metal quantized matmul",
       "blocks dequantized in-kernel; fp16/fp32 math", False, T.OPTIMIZED, LLAMACPP_BUILD),
    *(_r(E.LLAMACPP, F.UNQUANTIZED, dev, None, None, "-", "-", False, T.FALLBACK,
         LLAMACPP_BUILD, "llama.cpp serves GGUF only: convert with convert_hf_to_gguf.py",
         supported=False) for dev in (D.CPU, D.CUDA, D.METAL)),
    # --- MLX-LM ----------------------------------------------------------------------------
    _r(E.MLX, F.MLX, D.METAL, None, None, "mlx quantized_matmul (affine groups)",
       "weights dequantized in-kernel; fp16/bf16 math", False, T.OPTIMIZED, MLX_LM),
    _r(E.MLX, F.UNQUANTIZED, D.METAL, None, None, "mlx matmul", "bf16/fp16", False, T.NATIVE,
       MLX_LM, "loads Hugging Face safetensors directly"),
)


def matches(row: SupportRow, fmt: F, device: DeviceTarget) -> bool:
    if row.format is not fmt or row.device is not device.kind:
        return False
    if device.kind is not D.CUDA:
        return True
    cc = device.cc
    if cc is None:  # a CUDA device of unknown capability: only unbounded rows apply
        return row.min_compute_capability is None and row.max_compute_capability is None
    return ((row.min_compute_capability is None or cc >= row.min_compute_capability)
            and (row.max_compute_capability is None or cc <= row.max_compute_capability))


def kernel_paths(fmt: F, device: DeviceTarget) -> list[KernelPath]:
    """Every engine path that runs `fmt` on `device`, in ROWS order."""
    return [KernelPath(engine=r.engine, kernel=r.kernel, math=r.math,
                       low_precision_math=r.low_precision_math, tier=r.tier,
                       source_url=r.source_url, note=r.note)
            for r in ROWS if r.supported and matches(r, fmt, device)]


def where(row: SupportRow) -> str:
    if row.device is not D.CUDA:
        return row.device.value
    lo, hi = row.min_compute_capability, row.max_compute_capability
    if lo and hi:
        return f"CUDA CC {lo}-{hi}" if lo != hi else f"CUDA CC {lo}"
    return f"CUDA CC >= {lo}" if lo else (f"CUDA CC <= {hi}" if hi else "CUDA")


def cuda_refusal(engine: E, fmt: F, compute_capability: str) -> str | None:
    """Why `engine` has no path for `fmt` checkpoints on a CUDA GPU of this capability, with the
    row's source (None: it has one, or the matrix has no CUDA row of it to judge by)."""
    rows = [r for r in ROWS if r.engine is engine and r.format is fmt and r.device is D.CUDA
            and r.supported]
    dev = DeviceTarget(kind=D.CUDA, compute_capability=compute_capability)
    if not rows or any(matches(r, fmt, dev) for r in rows):
        return None
    places = ", ".join(sorted({where(r) for r in rows}))
    return (f"{engine.value} runs {fmt.value} checkpoints on {places}, not compute capability "
            f"{compute_capability} (support matrix: {rows[0].source_url})")


def unsupported_reason(fmt: F, device: DeviceTarget) -> str:
    """Why no engine runs `fmt` on `device`, naming where the matrix says it does run."""
    here = [r for r in ROWS if not r.supported and matches(r, fmt, device)]
    if here:
        return "; ".join(f"{r.engine.value}: {r.note}" for r in here)
    elsewhere = sorted({f"{r.engine.value} on {where(r)}" for r in ROWS
                        if r.supported and r.format is fmt})
    here_name = (device.kind.value + (f" CC {device.compute_capability}"
                                      if device.compute_capability else ""))
    if not elsewhere:
        return f"no engine in the support matrix runs {fmt.value} checkpoints"
    return f"no engine runs {fmt.value} on {here_name}; supported: {', '.join(elsewhere)}"
