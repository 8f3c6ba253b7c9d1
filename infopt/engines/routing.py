"""Route a (hardware, model) pair to an ordered list of engine candidates, with reasons.

Rules from the shared reference notes (inference-optimizer/backend-routing.md) and the
specification's "Select candidates": no usable GPU / GGUF -> llama.cpp first; NVIDIA with many
users -> vLLM; one user -> SGLang with vLLM as comparator; Apple -> MLX-LM; never Ollama.
Issue 3 deepens this (legacy GPUs, compute capability, checkpoint formats).

An HF directory on a CPU-only host goes to vLLM's CPU build alone: llama.cpp loads GGUF only,
and infopt has no HF -> GGUF conversion (llama-quantize, in infopt.engines.quantize, only
requantizes a GGUF). llama.cpp is tuned beside it when a GGUF of the model is given too
(model.other_formats), through that GGUF's own route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from infopt.engines import ENGINES, adapter_for
from infopt.hardware.catalog import lowest_compute_capability
from infopt.model.quantization import format_of
from infopt.model.support_matrix import cuda_refusal
from infopt.specs.base import Spec
from infopt.specs.checkpoint import CheckpointFormat, DeviceKind, DeviceTarget
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.serving import EngineName


class RouteChoice(Spec):
    engine: EngineName
    reason: str


class DeviceFacts(Spec):
    """What routing needs of the accelerator: its vendor, the lowest compute capability among
    its NVIDIA GPUs (and where that figure comes from) and a name to show."""

    vendor: Literal["nvidia", "amd", "apple", "none"]
    name: str | None = None
    compute_capability: str | None = None  # "7.5"; NVIDIA only
    cc_source: str | None = None  # "NVML", or the catalog row it was read from

    def label(self) -> str:
        cc = (f", compute capability {self.compute_capability} ({self.cc_source})"
              if self.compute_capability else "")
        return f"{self.name or self.vendor}{cc}"


def device_of(hw: HardwareInventory) -> DeviceFacts:
    """The inventory's accelerator as routing reads it: an NVIDIA GPU's compute capability from
    NVML, else from its catalog row (a recorded nvidia-smi may not state it); an AMD GPU from
    the probe's notes (amdgpu in /sys: no NVML, no CUDA capability)."""
    if hw.gpus:
        cc, src = lowest_compute_capability(hw.gpus) or (None, None)
        return DeviceFacts(vendor="nvidia", name=hw.gpus[0].name, compute_capability=cc,
                           cc_source=src)
    if hw.accelerator == "amd":
        found = [n for n in hw.gpu_notes if n.startswith("AMD GPU")]
        return DeviceFacts(vendor="amd", name=found[0] if found else "AMD GPU")
    apple = hw.host.architecture in ("arm64",) and hw.host.os.startswith("Darwin")
    return DeviceFacts(vendor="apple" if apple else "none")


def checkpoint_format_of(model: ModelProfile) -> CheckpointFormat:
    """The format family the support matrix is keyed by: GGUF, else from its quantization."""
    if model.format is ModelFormat.GGUF:
        return CheckpointFormat.GGUF
    return format_of(model.inspection.quantization)


def device_refusal(engine: EngineName | str, device: DeviceFacts,
                   fmt: CheckpointFormat) -> str | None:
    """Why `engine` cannot serve `fmt` on this accelerator (None: nothing known against it).
    An NVIDIA GPU is judged by the support matrix's minimum compute capability, each row with
    its source; on an AMD GPU only llama.cpp (a Vulkan or ROCm/HIP build) is routed: the other
    engines' builds infopt runs are CUDA or CPU builds."""
    engine = EngineName(engine)
    builds = dict(adapter_for(engine).gpu_builds)
    if device.vendor == "amd" and device.vendor not in builds:
        return (f"{device.label()}: {engine.value}'s builds here are "
                f"{' or '.join(builds.values()) or 'no GPU'} or CPU builds; an AMD GPU is "
                f"served by {_serving(device.vendor)}")
    if device.vendor != "nvidia" or device.compute_capability is None:
        return None
    return cuda_refusal(engine, fmt, device.compute_capability)


def _serving(vendor: str) -> str:
    """The engines with a build for `vendor`'s GPUs, and which builds (the adapters' data)."""
    return "; ".join(f"{a.display_name} with a {dict(a.gpu_builds)[vendor]} build"
                     for a in ENGINES.values() if vendor in dict(a.gpu_builds))


def _legacy(device: DeviceFacts, fmt: CheckpointFormat) -> str | None:
    """Why this GPU takes the compatibility route (llama.cpp first): an AMD GPU (the engines
    with a build for it, from the adapters), or an NVIDIA GPU that an engine of the workload
    defaults (vLLM, SGLang) cannot run the checkpoint on."""
    if device.vendor == "amd":
        return (f"{device.label()}: {_serving('amd')} first, the specification's route for "
                "AMD GPUs (a GGUF of the model is needed)")
    refused = [why for e in (EngineName.VLLM, EngineName.SGLANG)
               if (why := device_refusal(e, device, fmt)) is not None]
    if not refused:
        return None
    return (f"legacy GPU ({device.label()}): llama.cpp first, before the workload defaults "
            f"({'; '.join(refused)})")


def route(hw: HardwareInventory, model: ModelProfile, target_concurrency: int) -> list[RouteChoice]:
    """The routed engines for this machine and checkpoint (the flow's view): the compatibility
    route first on a legacy NVIDIA or an AMD GPU, then the workload defaults."""
    device = device_of(hw)
    routes = route_for(gpu=hw.has_gpu or device.vendor == "amd", apple=device.vendor == "apple",
                       fmt=model.format, target_concurrency=target_concurrency,
                       no_gpu=hw.gpu_probe)
    legacy = _legacy(device, checkpoint_format_of(model))
    if legacy is None:
        return routes
    return [RouteChoice(engine=EngineName.LLAMACPP, reason=legacy),
            *[r for r in routes if r.engine is not EngineName.LLAMACPP]]


def route_for(*, gpu: bool, apple: bool, fmt: ModelFormat, target_concurrency: int,
              no_gpu: str = "no GPU detected") -> list[RouteChoice]:
    """The one routing rule, from the facts it needs: the flow (via route()) and `infopt plan`
    (a catalog GPU, or this host) both ask it."""
    if not gpu and apple:
        return [RouteChoice(engine=EngineName.MLX, reason="Apple Silicon: MLX-LM first"),
                RouteChoice(engine=EngineName.LLAMACPP, reason="Apple Silicon: llama.cpp/GGUF "
                            "for API coverage or model support")]
    if not gpu and fmt is ModelFormat.HF:
        return [RouteChoice(engine=EngineName.VLLM, reason=(
            f"no GPU ({no_gpu}), HF checkpoint: vLLM CPU build (the comparator when a GGUF "
            "copy of the model routes llama.cpp first); not llama.cpp on this directory, "
            "which loads GGUF only and infopt does not convert HF to GGUF"))]
    if not gpu:
        return [RouteChoice(engine=EngineName.LLAMACPP,
                            reason=f"no GPU ({no_gpu}): CPU route, llama.cpp first")]
    if fmt is ModelFormat.GGUF:
        return [RouteChoice(engine=EngineName.LLAMACPP, reason="GGUF checkpoint: llama.cpp "
                            "serves it natively (vLLM/SGLang need an HF checkpoint)")]
    # TensorRT-LLM last: trtllm-serve's PyTorch backend loads the HF checkpoint with no
    # engine build, so it is a comparator without that cost; it is tuned beside the first
    # engine when the second is not installed, or when request.engines names it.
    trt = RouteChoice(engine=EngineName.TRTLLM, reason="NVIDIA GPU: TensorRT-LLM (PyTorch "
                      "backend, no engine build) as the comparator when the other route is "
                      "not installed, or when request.engines names it")
    if target_concurrency > 1:
        return [RouteChoice(engine=EngineName.VLLM, reason=f"NVIDIA GPU, {target_concurrency} "
                            "concurrent users: vLLM first"),
                RouteChoice(engine=EngineName.SGLANG, reason="comparator"), trt]
    return [RouteChoice(engine=EngineName.SGLANG, reason="NVIDIA GPU, one active user: SGLang "
                        "first"),
            RouteChoice(engine=EngineName.VLLM, reason="comparator for a single user"), trt]


def engine_order(*, gpu: bool, apple: bool, target_concurrency: int) -> list[EngineName]:
    """Every engine in route_for's order on this kind of device: the routes of the format it
    starts from (a GPU: HF checkpoints; a CPU or Apple: GGUF, llama.cpp first), then the other
    format's, then the engines it never routes to there. The shortlist breaks ranking ties
    with it, so plan, shortlist and the flow share one routing rule."""
    order: list[EngineName] = []
    for fmt in (ModelFormat.HF, ModelFormat.GGUF) if gpu else (ModelFormat.GGUF, ModelFormat.HF):
        for choice in route_for(gpu=gpu, apple=apple, fmt=fmt,
                                target_concurrency=target_concurrency):
            if choice.engine not in order:
                order.append(choice.engine)
    return order + [e for e in EngineName if e not in order]


def engine_order_for(device: DeviceTarget, target_concurrency: int) -> list[EngineName]:
    """engine_order for a shortlist's device target (CUDA: the GPU routes; Metal: Apple's)."""
    return engine_order(gpu=device.kind is DeviceKind.CUDA, apple=device.kind is DeviceKind.METAL,
                        target_concurrency=target_concurrency)


def select_available(routes: list[RouteChoice], allowed: EngineName | list[EngineName] | None,
                     is_available: Callable[[str], object],
                     serves: Callable[[EngineName], str | None] | None = None
                     ) -> tuple[EngineName, list[str]]:
    """The first routed (or allowed, in the user's order) engine that serves the checkpoint
    (`serves(name)`: None, or why not) and that `is_available(name)` accepts, with the reasons
    the others were skipped. `is_available` raises EngineUnavailableError with what to do."""
    from infopt.specs.base import EngineOverrideError, EngineUnavailableError

    if isinstance(allowed, (str, EngineName)):
        allowed = [EngineName(allowed)]
    candidates = list(allowed) if allowed else [r.engine for r in routes]
    skipped: list[str] = []
    for name in candidates:
        if serves is not None and (why := serves(name)):
            skipped.append(f"{name}: {why}")
            continue
        try:
            is_available(name)
            return EngineName(name), skipped
        except EngineOverrideError:
            raise  # the executable the user named: no quiet switch to another engine
        except EngineUnavailableError as exc:
            skipped.append(f"{name}: {exc}")
    raise EngineUnavailableError("no usable engine: " + " ".join(skipped))


def comparator_for(chosen: EngineName, formats: list[tuple[ModelFormat, list[RouteChoice]]],
                   allowed: list[EngineName] | None, is_available: Callable[[str], object],
                   serves: Callable[[EngineName, ModelFormat], str | None]
                   ) -> tuple[tuple[EngineName, ModelFormat] | None, str]:
    """The engine tuned beside the routed one: the first other engine (the user's allowed
    order, else each local format's routes) that serves one of the formats the model is here
    in and is available; with the reason, or why there is none. `serves(name, fmt)`: None, or
    why not."""
    from infopt.specs.base import EngineUnavailableError

    if allowed is not None and len(allowed) == 1:
        return None, f"only {allowed[0].value} is allowed (request.engines)"
    order: list[tuple[EngineName, str]] = []
    for _, routes in formats:
        order += [(r.engine, r.reason) for r in routes]
    if allowed is not None:
        order = [(EngineName(e), "allowed by request.engines") for e in allowed]
    why_not: list[tuple[EngineName, str]] = []  # (engine, "engine: why not")
    for name, reason in order:
        if name == chosen or any(name == n for n, _ in why_not):
            continue
        fmt = next((f for f, _ in formats if serves(name, f) is None), None)
        if fmt is None:
            why_not.append((name, f"{name.value}: serves none of the local formats "
                                  f"({', '.join(f.value for f, _ in formats)})"))
            continue
        try:
            is_available(name)
        except EngineUnavailableError as exc:
            why_not.append((name, f"{name.value}: {str(exc).splitlines()[0]}"))
            continue
        return (name, fmt), reason
    return None, ("no other engine serves this model's local formats here" + (
        ": " + "; ".join(w for _, w in why_not) if why_not else ""))
