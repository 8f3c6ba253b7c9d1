"""Engine adapters, one per engine, in an explicit registry.

llama.cpp and vLLM run here for real; SGLang, TensorRT-LLM and MLX-LM are rendered and parsed
against their documented CLIs (each adapter's `locate()` says how to install it where it runs).
"""

from __future__ import annotations

from infopt.engines import llamacpp, mlx, sglang, trtllm, vllm
from infopt.engines.base import EngineAdapter, Launch
from infopt.specs.base import EngineUnavailableError
from infopt.specs.serving import EngineName

ENGINES: dict[EngineName, EngineAdapter] = {
    EngineName.LLAMACPP: llamacpp.ADAPTER,
    EngineName.VLLM: vllm.ADAPTER,
    EngineName.SGLANG: sglang.ADAPTER,
    EngineName.TRTLLM: trtllm.ADAPTER,
    EngineName.MLX: mlx.ADAPTER,
}


def adapter_for(name: EngineName | str) -> EngineAdapter:
    try:
        return ENGINES[EngineName(name)]
    except (ValueError, KeyError):
        raise EngineUnavailableError(
            f"engine '{name}' has no adapter yet; available: {', '.join(ENGINES)}") from None


__all__ = ["ENGINES", "EngineAdapter", "Launch", "adapter_for"]
