"""A PlanRequest turned into the cost model's FitRequest (the CLI's `infopt plan` and the `plan`
flow share it): the model read locally or from hub metadata (no weights fetched), the device
from the catalog or this host, the engine routed when not named. Reads files and the hub."""

from __future__ import annotations

from pathlib import Path

from infopt.costmodel.allocation import EngineKnobs
from infopt.costmodel.fit import FitRequest
from infopt.costmodel.inputs import resolve_device
from infopt.costmodel.plan import with_path
from infopt.costmodel.weights import BF16
from infopt.engines.routing import route_for
from infopt.engines.support import kv_options
from infopt.specs.hardware import HardwareInventory
from infopt.specs.inspection import ModelInspection
from infopt.specs.model import ModelFormat
from infopt.specs.plan_request import PlanRequest


def is_local(model: str) -> bool:
    return Path(model).expanduser().exists() or model.startswith((".", "/", "~"))


def load_model(model: str, revision: str | None, endpoint: str | None, token: str | None
               ) -> tuple[ModelInspection, int | None]:
    """(ModelInspection, exact weight bytes or None) from a local path or the hub's metadata."""
    if is_local(model):
        from infopt.model.profile import profile_model

        prof = profile_model(model)
        return prof.inspection, prof.file_bytes if Path(model).suffix == ".gguf" else (
            prof.file_bytes or None)
    from infopt.model.hub import default_cache_dir, fetch_model_facts, to_inspection

    facts = fetch_model_facts(model, cache_dir=default_cache_dir(), revision=revision,
                              endpoint=endpoint, token=token)
    return to_inspection(facts), facts.safetensors.total_bytes if facts.safetensors else None


def fit_request(p: PlanRequest, insp: ModelInspection, exact: int | None,
                hw: HardwareInventory | None) -> FitRequest:
    """`hw`: a HardwareInventory (detected or recorded), or None with a catalog `p.gpu`."""
    device, detected, is_cpu = resolve_device(p.gpu, hw)
    count = p.gpu_count if p.gpu_count is not None else (
        detected or p.tp * p.pp if not is_cpu else 1)
    q = insp.quantization
    fmt = ModelFormat.GGUF if q is not None and q.method.value == "gguf" else ModelFormat.HF
    eng = p.engine.value if p.engine else route_for(
        gpu=not is_cpu, apple=False, fmt=fmt, target_concurrency=p.concurrency)[0].engine.value
    req = FitRequest(
        model=insp, device=device, gpu_count=count, engine=eng,
        context_tokens=p.context_tokens or insp.native_context_tokens,
        concurrency=p.concurrency, kv_dtype=p.kv_dtype, weight_path=BF16, tp=p.tp, pp=p.pp,
        exact_weights_bytes=exact, kv=kv_options(eng, device.cpu_isa_features),
        knobs=EngineKnobs(gpu_memory_utilization=p.gpu_memory_utilization,
                          mem_fraction_static=p.mem_fraction_static, device_is_cpu=is_cpu))
    return with_path(req, p.weight_dtype)
