"""The run's plan, decided before any engine starts and asked by the CLI's pre-flight and the
optimize flow alike (so on a GPU host both pick the same engines): the routed engine, its
comparator when the model is here in a format another allowed engine serves, the request's
overrides checked against them, and each engine's start (its control and baseline, in the
layout and context it fits; an engine whose baseline fits nowhere is dropped, said in the
notes). Pure but for `locate`, which looks for the engines' executables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infopt.bootstrap import default_paths
from infopt.engines import adapter_for, serves
from infopt.engines.routing import (
    RouteChoice,
    checkpoint_format_of,
    comparator_for,
    device_of,
    device_refusal,
    route,
    select_available,
)
from infopt.engines.rules import WeightVariant
from infopt.engines.support import architecture_refusal, locate_for_host
from infopt.model.digest import model_digest
from infopt.model.profile import weights_profile
from infopt.specs.base import InfoptError
from infopt.specs.fit import MemoryFit
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import EngineFit
from infopt.specs.serving import AnyServingConfig, EngineName, engine_knobs, with_knob, with_knobs
from infopt.specs.workload import Workload, longest_request
from infopt.tuning.candidates import fit_config
from infopt.tuning.control import baseline_config, control_config, serving_target
from infopt.tuning.hub_weights import reference_weights, served_precision
from infopt.tuning.nofit import binding
from infopt.tuning.start_shape import ShapeKnobs, StartShape, start_shape, widest_shape

Locate = Callable[[str], str]


@dataclass(frozen=True)
class EnginePlan:
    """One engine the run tunes: the routed one or its comparator, on which local copy of the
    model, why, and the shape it starts in (layout axes, a shortened context)."""

    engine: EngineName
    model: ModelProfile
    role: str  # "routed" or "comparator"
    why: str
    shape: StartShape

    @property
    def id_prefix(self) -> str:
        """Keeps a comparator's trial ids apart from the routed engine's."""
        return "" if self.role == "routed" else f"{self.engine.value}-"


@dataclass(frozen=True)
class RunPlan:
    routes: tuple[RouteChoice, ...]
    engines: tuple[EngineName, ...]  # planned, routed first, before the fit check
    viable: tuple[EnginePlan, ...]  # those whose baseline fits somewhere on this host
    skipped: tuple[str, ...]  # engines passed over, and why
    comparator_why: str  # why this comparator, or why there is none
    fits: tuple[EngineFit, ...]  # each planned engine's baseline fit (a no-fit report's)
    notes: tuple[str, ...]  # engines not tuned, starts not one device at the native context

    @property
    def has_comparator(self) -> bool:
        return len(self.engines) > 1


def host_locate(hw: HardwareInventory) -> Locate:
    """The one rule for finding an engine on this host: a CPU build is refused beside GPUs."""
    return lambda name: locate_for_host(name, len(hw.gpus))


def plan_run(request: OptimizeRequest, hw: HardwareInventory, model: ModelProfile,
             others: list[ModelProfile], workload: Workload,
             locate: Locate | None = None) -> RunPlan:
    """The plan for `model` (and its `others` local formats) on `hw`; `locate` defaults to
    host_locate(hw). Raises InfoptError for an override no planned engine has."""
    locate = locate or host_locate(hw)
    routes = route(hw, model, workload.target_concurrency)
    here = _serves_here(hw, [model, *others], locate)
    chosen, skipped = select_available(routes, request.engines, locate,
                                       lambda n: here(n, model.format))
    comp, comp_why = comparator_for(
        chosen, [(model.format, routes)] + [(o.format, route(hw, o, workload.target_concurrency))
                                           for o in others],
        request.engines, locate, here)
    planned = [(chosen, model, "routed", "; ".join(r.reason for r in routes
                                                   if r.engine == chosen) or "request.engines")]
    if comp is not None:
        planned.append((comp[0], next(o for o in [model, *others] if o.format is comp[1]),
                        "comparator", comp_why))
    check_overrides(request, [e for e, *_ in planned])
    viable, fits, notes = [], [], []
    for engine, m, role, why in planned:
        shape = _start_shape(request, engine, m, hw, workload)
        # Nothing fits: its numbers on the host's widest layout, where it comes closest.
        _, baseline = start_configs(request, engine, m, hw, shape or _widest(request, engine, m, hw))
        fits.append(EngineFit(engine=engine.value, config=baseline,
                              fit=fit_of(m, hw, baseline, workload.target_concurrency)))
        if shape is None:
            notes.append(f"{engine.value} not tuned: its baseline does not fit "
                         f"({binding(fits[-1])})")
            continue
        viable.append(EnginePlan(engine, m, role, why, shape))
        if shape.note:
            notes.append(f"{engine.value}: {shape.note}")
    return RunPlan(tuple(routes), tuple(e for e, *_ in planned), tuple(viable), tuple(skipped),
                   comp_why, tuple(fits), tuple(notes))


def other_formats(request: OptimizeRequest, model: ModelProfile,
                  profile: Callable[[str], ModelProfile]) -> list[ModelProfile]:
    """The model's other local formats, each profiled with `profile`: the request's, or with no
    path the bundled HF copy (`make engines` converts it beside the bundled GGUF)."""
    paths = list(request.model.other_formats)
    if not paths and request.model.path is None and not request.model.download:
        hf = default_paths().hf_model
        paths = [str(hf)] if (hf / "config.json").is_file() else []
    return [p for p in map(profile, paths) if p.format is not model.format]


def fit_of(model: ModelProfile, hw: HardwareInventory, config: AnyServingConfig,
           target_concurrency: int) -> MemoryFit:
    """The fit of `config`, with its own weights' size and quantization when it changes them."""
    return fit_config(weights_profile(model, config.model_path), hw, config, target_concurrency)


def _serves_here(hw: HardwareInventory, models: list[ModelProfile], locate: Locate
                 ) -> Callable[[EngineName | str, ModelFormat], str | None]:
    """Whether an engine serves a local format of the model on this accelerator: it loads the
    format (its adapter), the support matrix gives it a path for the checkpoint on this GPU
    (engines.routing.device_refusal), and the installed build's own registry lists the
    architecture (engines.support.architecture_refusal); None, or why not."""
    device = device_of(hw)

    def here(name: EngineName | str, fmt: ModelFormat) -> str | None:
        m = next(o for o in models if o.format is fmt)
        return (serves(name, fmt) or device_refusal(name, device, checkpoint_format_of(m))
                or architecture_refusal(name, m, locate))
    return here


def served_name(model: ModelProfile) -> str:
    # Clients address the model by its file/directory name, e.g. "smollm2-135m-instruct.q4_1".
    return Path(model.path).name.removesuffix(".gguf").lower()


def start_configs(request: OptimizeRequest, engine: EngineName, model: ModelProfile,
                  hw: HardwareInventory, shape: StartShape | None = None
                  ) -> tuple[AnyServingConfig, AnyServingConfig]:
    """(the control: the engine's defaults, the baseline plus the request's base_overrides),
    both in `shape` when the run starts on a layout or a shortened context."""
    target = serving_target(model, hw, served_name=served_name(model), port=request.port,
                            kv_prefix_ram_bytes=request.kv_prefix_budget.ram_bytes)
    if shape is not None and shape.context_tokens:
        target = replace(target, native_context_tokens=shape.context_tokens)
    control, baseline = control_config(engine, target), baseline_config(engine, target)
    for knob, v in base_overrides(request).items():
        if knob in type(baseline).model_fields:  # checked against every engine: check_overrides
            baseline = with_knob(baseline, knob, v)
    if shape is None:
        return control, baseline
    baseline = with_knobs(baseline, shape.changes)
    return (baseline if shape.control_is_baseline else with_knobs(control, shape.changes),
            baseline)


def base_overrides(request: OptimizeRequest) -> dict[str, Any]:
    return {**request.base_overrides, **(request.tune.base_overrides if request.tune else {})}


def check_overrides(request: OptimizeRequest, engines: list[EngineName]) -> None:
    """Every base override must be a knob of at least one engine this run tunes (each engine
    takes the ones it has: a vLLM-only knob does not stop llama.cpp's tuning)."""
    known = engine_knobs(engines)
    names = " or ".join(e.value for e in engines)
    if unknown := sorted(set(base_overrides(request)) - known):
        raise InfoptError(f"base_overrides {unknown}: not a knob of {names}; their knobs: "
                          + ", ".join(sorted(known)))
    if request.tune and request.tune.knob not in known:
        raise InfoptError(f"tune.knob {request.tune.knob!r}: not a knob of {names}; its knobs: "
                          + ", ".join(sorted(known)))


def reference_config(control: AnyServingConfig, model: ModelProfile, hw: HardwareInventory,
                     workload: Workload, variants: tuple[WeightVariant, ...], digest: str
                     ) -> tuple[AnyServingConfig, str, str | None]:
    """(the quality reference's configuration, its weights' digest, why when it is not the
    control): the control, or the control on a downloaded checkpoint of higher precision that
    fits (infopt.tuning.hub_weights.reference_weights)."""
    # GGUF types and HF checkpoints alike: an FP8 or 4-bit HF folder's reference may be a
    # downloaded 16-bit checkpoint of the same model.
    served_fmt, served = served_precision(model) or (None, None)

    def fits(path: str) -> bool:
        return fit_of(model, hw, with_knob(control, "model_path", path),
                      workload.target_concurrency).fits

    better = reference_weights(served, variants, fits)
    if better is None:
        return control, digest, None
    return (with_knob(control, "model_path", better.path), model_digest(better.path),
            f"the shortlisted {better.fmt} from {better.source} ({better.bits_per_weight} bits "
            f"per weight, more than the served {served_fmt}'s {served}, and it fits)")


def _widest(request: OptimizeRequest, engine: EngineName, model: ModelProfile,
            hw: HardwareInventory) -> StartShape | None:
    if not hw.gpus:
        return None
    native = start_configs(request, engine, model, hw)[1]
    return widest_shape(model.inspection, len(hw.gpus), adapter_for(engine).layout_knobs,
                        native)


def _start_shape(request: OptimizeRequest, engine: EngineName, model: ModelProfile,
                 hw: HardwareInventory, workload: Workload) -> StartShape | None:
    """The shape `engine` starts in (infopt.tuning.start_shape), with the control's own fit
    checked in it; None when nothing fits."""
    def baseline_at(context: int) -> AnyServingConfig:
        return start_configs(request, engine, model, hw, StartShape(context_tokens=context))[1]

    def fits(config: AnyServingConfig) -> MemoryFit:
        return fit_of(model, hw, config, workload.target_concurrency)

    prompt, output, *_ = longest_request(workload.traffic)
    adapter = adapter_for(engine)
    shaping = (ShapeKnobs(adapter.layout_knobs, adapter.offload_knob) if hw.gpus else
               ShapeKnobs())
    shape = start_shape(model.inspection, len(hw.gpus), shaping, model.native_context_tokens,
                        request.min_context_tokens, prompt + output, baseline_at, fits)
    if shape is None or not shape.note:
        return shape
    control, _ = start_configs(request, engine, model, hw, shape)
    if fits(control).fits:
        return shape
    return replace(shape, control_is_baseline=True, note=(
        f"{shape.note}; the engine's defaults do not fit even there: the baseline stands in "
        "for the control"))
