"""What this CPU can run: the adapters' CPU kernel requirements checked against the host's ISA.

Pure functions over the adapter tables (`EngineAdapter.cpu_kernel_requirements`); the plan and
the tuning candidates call them to leave out what the engine would refuse here, with the reason.
`cpu_isa` is the host's engine-relevant /proc/cpuinfo flags (HostInfo.isa_features), or None
when the engine runs on a GPU, where none of these CPU limits apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from infopt.costmodel.fit import KvOptions
from infopt.engines import adapter_for
from infopt.engines.base import probe_error
from infopt.specs.base import InfoptError, Spec
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.serving import EngineName


class Unsupported(Spec):
    """One knob value this CPU cannot run on this engine, and why."""

    engine: str
    knob: str
    value: str
    what: str
    needs_one_of: list[list[str]]  # each a set of ISA flags that suffices whole
    cpu_isa: list[str]
    source: str

    @property
    def reason(self) -> str:
        needs = " or ".join("+".join(group) for group in self.needs_one_of)
        return (f"{self.what} ({self.knob}={self.value}) needs a CPU with {needs}; this CPU has "
                f"{', '.join(self.cpu_isa) or 'none of the engine-relevant features'} "
                f"({self.engine}: {self.source})")


def unsupported_values(engine: str, values: Mapping[str, Any],
                       cpu_isa: Sequence[str] | None) -> list[Unsupported]:
    """The knob values in `values` (config field -> value) this CPU cannot run."""
    if cpu_isa is None:
        return []
    have = set(cpu_isa)
    out = []
    for req in adapter_for(engine).cpu_kernel_requirements:
        v = values.get(req.knob)
        if v is None or str(v) not in req.values:
            continue
        if not any(group <= have for group in req.isa_any_of):
            out.append(Unsupported(engine=str(engine), knob=req.knob, value=str(v), what=req.what,
                                   needs_one_of=[sorted(g) for g in req.isa_any_of],
                                   cpu_isa=list(cpu_isa), source=req.source))
    return out


def unsupported_config(config: Any, cpu_isa: Sequence[str] | None) -> list[Unsupported]:
    """What in a ServingConfig this CPU cannot run (empty: all of it can)."""
    return unsupported_values(config.engine, config.model_dump(), cpu_isa)


def unsupported_kv_dtype(engine: str, kv_dtype: str,
                         cpu_isa: Sequence[str] | None) -> list[Unsupported]:
    """Whether the KV cache type `kv_dtype` runs on this CPU for `engine` (the plan's view)."""
    knobs = adapter_for(engine).kv_dtype_knobs
    return unsupported_values(engine, {k: kv_dtype for k in knobs}, cpu_isa)


def kv_options(engine: str, cpu_isa: Sequence[str] | None) -> KvOptions:
    """The adapter's KV facts for the fit: its types, those this CPU cannot run and why, and
    its allocation rules (its CPU backend's own where it has one). `cpu_isa` None: a GPU run."""
    a = adapter_for(engine)
    names = set(a.kv_dtypes) | {v for req in a.cpu_kernel_requirements
                                if req.knob in a.kv_dtype_knobs for v in req.values}
    refused = {k: u[0].reason for k in sorted(names)
               if (u := unsupported_kv_dtype(engine, k, cpu_isa))}
    return KvOptions(native=a.kv_dtypes[0], eight_bit=a.kv_dtypes[1], refused=refused,
                     allocate=a.kv_allocator, allocate_cpu=a.kv_allocator_cpu)


def build_mismatch(engine: str, executable: str, gpu_count: int) -> str | None:
    """Why the build at `executable` must not serve on this host: a CPU build where the host
    has GPUs would load the model into host RAM and run on the CPU, and the run would tune
    the wrong machine without a word. None: it may serve (or its device is not known)."""
    adapter = adapter_for(engine)
    if not gpu_count or adapter.build_device is None:
        return None
    if adapter.build_device(executable) != "cpu":
        return None
    return (f"{executable} is a CPU build of {adapter.display_name}, and this host has "
            f"{gpu_count} GPU(s) it would not use. Run `make engines` on this host (where "
            f"nvidia-smi lists a GPU it installs the CUDA builds), or point "
            f"${adapter.executable_env} at a CUDA build.")


def locate_for_host(engine: str, gpu_count: int) -> str:
    """The engine's executable, refused (like a missing one, or as the user's bad override)
    when it is a CPU build on a host with GPUs."""
    adapter = adapter_for(engine)
    executable = adapter.locate()
    if why := build_mismatch(engine, executable, gpu_count):
        raise probe_error(adapter.executable_env or "")(why)
    return executable


def architecture_refusal(engine: EngineName | str, model: ModelProfile,
                         locate: Callable[[str], str]) -> str | None:
    """Why the installed `engine` cannot run this HF checkpoint's architecture: its own model
    registry (read through its located executable: vLLM's ModelRegistry) does not list it.
    None: it does, or the engine is not installed (its locate says so elsewhere), or infopt
    cannot read its registry, or the checkpoint is a GGUF (llama.cpp reads its own arch key)."""
    a = adapter_for(engine)
    arch = model.inspection.architecture
    if a.architectures is None or model.format is not ModelFormat.HF or not arch:
        return None
    try:
        listed = a.architectures(locate(a.name.value))
    except InfoptError:
        return None
    if listed is None or arch in listed:
        return None
    return (f"{a.display_name}'s own model registry ({len(listed)} architectures, read from the "
            f"installed build) does not list {arch}, the checkpoint's architecture "
            "(config.json `architectures`): this build cannot run it")
