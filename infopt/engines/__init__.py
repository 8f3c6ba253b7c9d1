"""Engine adapters, one per engine, in an explicit registry.

llama.cpp and vLLM run here for real; SGLang, TensorRT-LLM and MLX-LM are rendered and parsed
against their documented CLIs (each adapter's `locate()` says how to install it where it runs).
"""

from __future__ import annotations

import httpx

from infopt.engines.base import EngineAdapter
from infopt.engines.launch import Launch
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.mlx import adapter as mlx
from infopt.engines.sglang import adapter as sglang
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.vllm import adapter as vllm
from infopt.specs.base import EngineUnavailableError
from infopt.specs.endpoint import Endpoint, TokenizeRoute
from infopt.specs.model import ModelFormat
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


def serves(name: EngineName | str, fmt: ModelFormat) -> str | None:
    """None when engine `name` loads checkpoints of format `fmt` (a ModelFormat), else why not
    (routing skips it, and picks a comparator's format by it)."""
    formats = adapter_for(name).model_formats
    return None if fmt.value in formats else (
        f"serves {'/'.join(f.upper() for f in formats)} checkpoints, not {fmt.value.upper()}")


def endpoint_for(engine: EngineName | str, base_url: str, model: str,
                 pid: int | None = None) -> Endpoint:
    """The Endpoint of a server run by `engine`: its wire facts as data, for code that must
    not know engines (load generator, contract probes)."""
    a = adapter_for(engine)
    tokenize = (TokenizeRoute(a.tokenize_path, a.tokenize_body, a.tokenize_count)
                if a.tokenize_path and a.tokenize_body and a.tokenize_count else None)
    return Endpoint(base_url=base_url, model=model, forced_fields=a.forced_length_fields,
                    stream_counting=a.stream_counting, keepalive=a.stream_keepalive,
                    tokenize=tokenize, scoring=a.token_scoring,
                    chat_template=a.chat_template_route, pid=pid, engine=str(a.name),
                    spec_counters=a.spec_counters,
                    spec_accept_length_route=a.spec_accept_length_route)


def identify_engine(base_url: str, timeout_s: float = 5.0) -> EngineName | None:
    """The engine serving `base_url`, by each adapter's identity probe (None: none matched).
    An unreachable URL is not an error here: the caller's first real request reports it."""
    # A bare /version is the most generic route (other servers may answer it too): tried last.
    for name, a in sorted(ENGINES.items(), key=lambda kv: kv[1].identity_probe is not None
                          and kv[1].identity_probe[0] == "/version"):
        if a.identity_probe is None:
            continue
        path, key = a.identity_probe
        try:
            r = httpx.get(base_url.rstrip("/") + path, timeout=timeout_s)
            if r.status_code == 200 and isinstance(js := r.json(), dict) and key in js:
                return name
        except (httpx.HTTPError, ValueError):
            continue
    return None


__all__ = ["ENGINES", "EngineAdapter", "Launch", "adapter_for", "endpoint_for", "identify_engine"]
