"""What SGLang's startup log says of its kernels (read from the installed sglang 0.5.23's
source; its lines carry no level field, `[time TP0] msg`, so they are told apart by their
text). It never names the dense FP8 GEMM backend nor an `auto` MoE runner (both resolve
silently): what it does name is the Marlin conversion of AWQ/GPTQ, DeepGEMM's JIT kernels, a
forced MoE runner, the attention backend, and its own untuned-config and fallback warnings."""

from __future__ import annotations

from infopt.engines.kernel_log import KernelLog

_FP8_FAST = r"GEMM_NT_F8F8BF16|gemm_fp8_fp8_bf16_nt|\w*F8F8BF16\w*|flashinfer_trtllm|deep_gemm"

KERNEL_LOG = KernelLog(patterns=(
    # srt/layers/quantization/awq/awq.py:344, gptq/gptq.py:428
    ("weights GEMM", r"The model is convertible to \w+ during runtime\. Using "
                     r"(?P<kernel>\w+) kernel\."),
    # srt/layers/deep_gemm_wrapper/compile_utils.py:179
    ("weights GEMM", r"Try DeepGEMM JIT Compiling for <(?P<kernel>\w+)>.*"),
    # srt/arg_groups/overrides.py:825-1519, model_overrides/*.py
    ("MoE backend", r"Use (?P<kernel>\w+) as MoE runner backend.*"),
    ("quantization", r"Detected \w+ (?:checkpoint|quantization format)\b.*|"
                     r"Load weight end\..*quant=\S+.*"),
    # model_runner / arg_groups/overrides.py:1136 (older: "not set")
    ("attention backend", r"Attention backend not (?:specified|set)\. Use \S+ backend by "
                          r"default\.|Use \S+ as attention backend.*|Using hybrid attention "
                          r"backend for decode and prefill.*"),
    # srt/layers/quantization/marlin_utils_fp8.py:105; kernels/ops/gemm/fp8_kernel.py:608;
    # srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py:136/162/170;
    # awq.py:348, gptq.py:432 (the slow kernel forced by an explicit --quantization)
    ("fallback warning", r"Your GPU does not have native support for FP\d computation.*|"
                         r"Using default (?:W8A8 Block FP8 kernel|MoE(?: kernel)?) config\. "
                         r"Performance might be sub-optimal!.*|Fallback to triton version .*|"
                         r"so forcing (?:awq|gptq)\b.*"),
    ("NCCL", r"sglang is using nccl==\S+"),
), kernel_names={
    "awq_marlin": r"awq_marlin", "gptq_marlin": r"gptq_marlin",
    "fp8 scaled_mm (sgl-kernel/DeepGEMM)": _FP8_FAST,
    "modelopt_fp8": _FP8_FAST,
    "modelopt_fp4 (FlashInfer/CUTLASS FP4)": r"flashinfer_\w+|cutlass\w*",
    "mxfp4 MoE (Triton/FlashInfer)": r"flashinfer_\w+|triton\w*",
}, unlogged={"weights GEMM": (
    "SGLang 0.5.23 resolves the dense FP8 GEMM backend (fp8_gemm_runner_backend='auto') and an "
    "'auto' MoE runner without a log line (srt/layers/quantization/fp8_utils.py, "
    "_dispatch_auto_backend)")})
