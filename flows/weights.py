"""Weight candidates made here (the request's `requantize`), each behind the quantize gate:
pre-authorized, approved, or denied/unanswered (skipped, recorded). Only for GGUF models on
llama.cpp, whose own llama-quantize makes them."""

from __future__ import annotations

from pathlib import Path

from flows.gate import ask
from infopt.engines import adapter_for
from infopt.specs.approval import GateAnswer
from infopt.specs.request import OptimizeRequest
from infopt.tuning.weights import quantize_gate
from tasks.weights import requantize_task, variant_path


def weight_variants(request: OptimizeRequest, model, engine: str, tool_version: str,
                    digest: str) -> tuple[dict[str, Path], dict[str, GateAnswer], list[str]]:
    """(type -> variant file for each approved type, type -> its gate's answer, notes)."""
    if not request.requantize:
        return {}, {}, []
    quantizer = adapter_for(engine).local_quantizer
    if quantizer is None or not model.path.endswith(".gguf"):
        return {}, {}, [f"requantize {request.requantize}: not applicable (infopt makes local "
                        f"GGUF variants with llama.cpp's llama-quantize; this run serves "
                        f"{engine} from {Path(model.path).name})"]
    variants, answers = {}, {}
    tool = f"{quantizer} ({engine} {tool_version})"
    for gguf_type in request.requantize:
        out = variant_path(digest, tool_version, gguf_type)
        gate = quantize_gate(Path(model.path), model.file_bytes,
                             getattr(model.inspection, "params_total", None), gguf_type, tool,
                             out.parent)
        answer = ask(gate, request.authorize, request.approval_timeout_s)
        answers[gguf_type] = answer
        if answer.approved:
            variants[gguf_type] = Path(requantize_task(model.path, digest, tool_version,
                                                       gguf_type))
    return variants, answers, []


