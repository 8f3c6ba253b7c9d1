"""Weight candidates made here (the request's `requantize`), each behind the quantize gate:
pre-authorized, approved, or denied/unanswered (skipped, recorded). Only for GGUF models on
llama.cpp, whose own llama-quantize makes them."""

from __future__ import annotations

from pathlib import Path

from flows.gate import ask
from infopt.engines import adapter_for
from infopt.specs.approval import GateAnswer
from infopt.specs.request import Authorization, OptimizeRequest
from infopt.tuning.weights import quantize_gate
from tasks.weights import requantize_task, variant_path


def requested_types(request: OptimizeRequest, engine: str, current: str | None
                    ) -> tuple[list[str], str | None]:
    """The GGUF types to make: the request's `requantize`, else (quantization pre-authorized)
    the adapter's formats for this device, less the checkpoint's own; and, when none, why."""
    if request.requantize:
        return list(request.requantize), None
    formats = adapter_for(engine).weight_formats
    if not formats:
        return [], None
    if Authorization.QUANTIZE not in request.authorize:
        return [], ("local quantization was not authorized: list the types in `requantize` "
                    "(each asks the quantize gate) or pre-authorize with `authorize: "
                    f"[quantize]` to try {', '.join(formats)}")
    return [t for t in formats if t != current], None


def weight_variants(request: OptimizeRequest, model, engine: str, tool_version: str,
                    digest: str) -> tuple[dict[str, Path], dict[str, GateAnswer], list[str]]:
    """(type -> variant file for each approved type, type -> its gate's answer, notes)."""
    types, why_none = requested_types(request, engine, current_type(model))
    if not types:
        return {}, {}, [why_none] if why_none else []
    quantizer = adapter_for(engine).local_quantizer
    if quantizer is None or not model.path.endswith(".gguf"):
        return {}, {}, [f"requantize {types}: not applicable (infopt makes local "
                        f"GGUF variants with llama.cpp's llama-quantize; this run serves "
                        f"{engine} from {Path(model.path).name})"]
    variants, answers = {}, {}
    tool = f"{quantizer} ({engine} {tool_version})"
    for gguf_type in types:
        out = variant_path(digest, tool_version, gguf_type)
        gate = quantize_gate(Path(model.path), model.file_bytes,
                             getattr(model.inspection, "params_total", None), gguf_type, tool,
                             out.parent)
        answer = ask(gate, request.authorize, request.approval_timeout_s)
        answers[gguf_type] = answer
        if answer.approved:
            variants[gguf_type] = Path(requantize_task(model.path, digest, tool_version,
                                                       gguf_type))
    denied = [t for t, a in answers.items() if not a.approved]
    return variants, answers, ([f"weights {', '.join(denied)}: not made (the quantize gate "
                                "was not approved)"] if denied else [])


def current_type(model) -> str | None:
    """The GGUF type of the checkpoint ("Q4_1" from "Q4_1 (5 bits/weight ...)")."""
    fmt = getattr(model, "weight_format", None) or ""
    return fmt.split(" ")[0] or None if model.path.endswith(".gguf") else None


