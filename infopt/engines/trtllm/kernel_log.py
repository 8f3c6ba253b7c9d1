"""What TensorRT-LLM's startup log says of its kernels (trtllm-serve, PyTorch backend; lines
`[TRT-LLM] [I|W] msg`). At the default info level it names the version, the checkpoint's
quantization and FlashInfer's version; the MoE backend only when it degrades to CUTLASS
(tensorrt_llm/_torch/modules/fused_moe/create_moe.py); the attention backend and the dense
GEMM kernel never (they surface only in errors)."""

from __future__ import annotations

from infopt.engines.kernel_log import KernelLog

KERNEL_LOG = KernelLog(patterns=(
    ("version", r"TensorRT[- ]LLM version: .*"),
    ("quantization", r"Setting (?:kv_cache_)?quant_algo=\S+.*|Found \S*hf_quant_config\.json, "
                     r"pre-quantized checkpoint is used\.|Use quantization_config from .*"),
    ("FlashInfer", r"flashinfer is available: \S+"),
    # create_moe.py:42/51/60/75, and the newer resolver's "cannot serve this layer"
    ("fallback warning", r"\w+FusedMoE only supports .* Using CutlassFusedMoE instead\.?|"
                         r"MoE backend \w+ cannot serve this layer.*"),
), unlogged={"weights GEMM": (
    "TensorRT-LLM's PyTorch backend picks its dense GEMM (fp8_block_scaling_gemm, the NVFP4 "
    "autotuner's cutlass/cublaslt/cuda_core) without a log line"), "attention backend": (
    "TensorRT-LLM's PyTorch backend logs no attention backend; its default is TRTLLM")})
