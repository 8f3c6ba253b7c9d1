"""How a run starts when the engine's baseline does not fit one device at the model's native
context (issue 32, items 4 and 10): the smallest layout over the host's GPUs that fits at the
full native context (tensor parallel first, then pipeline stages of it: the specification's
order), and only when no layout fits, a context shorter than native down to the request's
`min_context_tokens`, never below what the workload sends. The control takes the same shape:
the engine's defaults on a layout and context it can load (a TP=1 control only where it fits).
Pure: the fit and the configs come in as functions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infopt.analysis.monotone import last_true
from infopt.costmodel.layouts import fitting_layouts
from infopt.engines.layout import LayoutKnobs
from infopt.specs.fit import Layout, MemoryFit
from infopt.specs.inspection import ModelInspection
from infopt.specs.serving import with_knobs

CONTEXT_STEP_TOKENS = 256  # a shortened context is a multiple of this (engines' block sizes)


@dataclass(frozen=True)
class StartShape:
    """The knob changes the control and the baseline start with (the layout's axes, and the
    knobs that carry a shortened context), the context they serve (None: the native one), and
    what changed and why, for the report."""

    changes: dict[str, Any] = field(default_factory=dict)
    layout: Layout = field(default_factory=Layout)
    context_tokens: int | None = None
    note: str = ""
    # The engine's defaults do not fit even in this shape: the baseline stands in for them.
    control_is_baseline: bool = False


@dataclass(frozen=True)
class ShapeKnobs:
    """How an engine can reshape its start: its layout knobs (None: no multi-GPU layout
    here), and the knob that keeps only the first N layers on the GPU (None: it has none)."""

    layout: LayoutKnobs | None = None
    offload: str | None = None


def start_shape(m: ModelInspection, gpu_count: int, shaping: ShapeKnobs,
                native_context_tokens: int, min_context_tokens: int | None,
                workload_tokens: int, baseline_at: Callable[[int], Any],
                fits: Callable[[Any], MemoryFit]) -> StartShape | None:
    """The shape to start from (an empty one when the baseline fits as it is), or None when
    nothing fits: no layout at the native context, no partial offload (on a GPU), and no
    context the request accepts. `baseline_at(context)` builds the baseline
    serving `context` tokens; `workload_tokens` is the longest prompt plus output the workload
    sends."""
    native = baseline_at(native_context_tokens)
    if fits(native).fits:
        return StartShape()
    layouts: list[tuple[Layout, dict[str, Any]]] = []
    knobs = shaping.layout
    for lay in fitting_layouts(m, gpu_count):
        if knobs is not None and isinstance(ch := knobs.changes_from(native, lay), dict):
            layouts.append((lay, ch))
    for layout, changes in layouts:
        if fits(with_knobs(native, changes)).fits:
            return StartShape(changes, layout, None, (
                f"the baseline does not fit one GPU at the native {native_context_tokens:,}-"
                f"token context: the control and the baseline start on {layout.label} "
                f"({layout.gpus} GPUs), the smallest layout that fits"))
    if (knob := shaping.offload) is not None and gpu_count and (
            n := most_device_layers(m.num_layers, native, knob, fits)) is not None:
        return StartShape({knob: n}, Layout(), None, (
            f"the model does not fit the GPU at the native {native_context_tokens:,}-token "
            f"context: the control and the baseline start with {n} of its {m.num_layers} "
            f"layers on the GPU ({knob}={n}, the most that fit by infopt's estimate) and the "
            "rest in host RAM"))
    floor = max(min_context_tokens or native_context_tokens, workload_tokens, 1)
    if floor >= native_context_tokens:
        return None
    best: tuple[int, Layout, dict[str, Any]] | None = None
    for layout, changes in [(Layout(), {}), *layouts]:
        def fits_at(context: int, ch: dict[str, Any] = changes) -> bool:
            return fits(with_knobs(baseline_at(context), ch)).fits

        ctx = _longest_context(floor, native_context_tokens, fits_at)
        if ctx is not None and (best is None or ctx > best[0]):
            best = (ctx, layout, changes)
    if best is None:
        return None
    ctx, layout, changes = best
    # The knobs that carry the context (vLLM's max_model_len, llama.cpp's -c per slot...):
    # the control takes them too, where its defaults would load the native context.
    short = baseline_at(ctx).model_dump()
    context_knobs = {k: v for k, v in short.items() if native.model_dump()[k] != v}
    return StartShape({**context_knobs, **changes}, layout, ctx, (
        f"the native {native_context_tokens:,}-token context does not fit on any layout of "
        f"this host: serving {ctx:,} tokens on {layout.label}, the longest that fits, at or "
        f"above the request's min_context_tokens {min_context_tokens:,} and the workload's "
        f"longest request ({workload_tokens:,} tokens)"))


def most_device_layers(num_layers: int, config: Any, knob: str,
                       fits: Callable[[Any], MemoryFit]) -> int | None:
    """The most offloaded layers that fit on the device with the rest in host RAM: 1 to
    `num_layers` (llama.cpp counts the output layer too, so `num_layers` + 1 is the whole
    model), the fit shrinking with each layer offloaded. None when not even one fits."""
    return last_true(1, num_layers,
                     lambda n: fits(with_knobs(config, {knob: n})).fits)


def widest_shape(m: ModelInspection, gpu_count: int, knobs: LayoutKnobs | None,
                 native: Any) -> StartShape | None:
    """Where a model that fits nowhere comes closest: the layout over the most GPUs the engine
    can express (TP first among the widest: its weights split the most ways), for the no-fit
    report's numbers. None on one GPU or for an engine without layouts."""
    widest: tuple[Layout, dict[str, Any]] | None = None
    for lay in fitting_layouts(m, gpu_count):
        if knobs is not None and isinstance(ch := knobs.changes_from(native, lay), dict) and (
                widest is None or lay.gpus > widest[0].gpus):
            widest = (lay, ch)
    if widest is None:
        return None
    layout, changes = widest
    return StartShape(changes, layout, None, f"nothing fits: sized on {layout.label} "
                      f"({layout.gpus} GPUs), the widest layout of this host")


def _longest_context(floor: int, native: int, fits: Callable[[int], bool]) -> int | None:
    """The longest context in [floor, native) that fits, a multiple of CONTEXT_STEP_TOKENS
    (or the floor itself); None when the floor does not. The fit shrinks with the context."""
    if not fits(floor):
        return None
    step = CONTEXT_STEP_TOKENS  # native does not fit (checked by the caller)
    k = last_true(-(-floor // step), (native - 1) // step, lambda k: fits(k * step))
    return max(k * step if k is not None else floor, floor)
