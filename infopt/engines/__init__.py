"""Engine adapters, one per engine, in an explicit registry.

SGLang, TensorRT-LLM and MLX-LM adapters arrive with issue 5; until then they are routed but
reported as unavailable.
"""

from __future__ import annotations

from infopt.engines import llamacpp, vllm
from infopt.engines.base import EngineAdapter, Launch
from infopt.specs.base import EngineUnavailableError
from infopt.specs.serving import EngineName

ENGINES: dict[EngineName, EngineAdapter] = {
    EngineName.LLAMACPP: llamacpp.ADAPTER,
    EngineName.VLLM: vllm.ADAPTER,
}


def adapter_for(name: EngineName | str) -> EngineAdapter:
    try:
        return ENGINES[EngineName(name)]
    except (ValueError, KeyError):
        raise EngineUnavailableError(
            f"engine '{name}' has no adapter yet; available: {', '.join(ENGINES)}") from None


__all__ = ["ENGINES", "EngineAdapter", "Launch", "adapter_for"]
