"""The specification's standard scenarios: short, medium and full-context prompts at the target
concurrency, and the default chat lengths at one stream and at the target concurrency."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from .base import InputError, Spec
from .traffic import ClosedLoop, FixedLengths, LognormalLengths, TrafficSpec

# Output headroom reserved in the full-context case: its prompt is the native context minus this.
FULL_CONTEXT_OUTPUT_TOKENS = 256
# 20 measured samples is where infopt.analysis.stats stops flagging p95 as low-sample.
MIN_MEASURED_REQUESTS = 20
# Idle pause after each scenario, so the next one starts on a drained engine.
SCENARIO_COOLDOWN_S = 2.0
# The default chat lengths (examples/workloads/chat.yaml). An assumption, not a measurement:
# a system prompt plus a short history in, a few paragraphs out, with a long right tail.
CHAT_INPUT = LognormalLengths(p50_tokens=512, p95_tokens=2048)
CHAT_OUTPUT = LognormalLengths(p50_tokens=256, p95_tokens=768, max_tokens=4096)


class ScenarioName(StrEnum):
    SHORT = "short"
    MEDIUM = "medium"
    FULL_CONTEXT = "full-context"
    SINGLE_STREAM = "single-stream"
    TARGET_CONCURRENCY = "target-concurrency"


class ScenarioSet(Spec):
    """The cases the specification benchmarks: three fixed-length cases at the target
    concurrency (short, medium, full native context), and the default chat lengths at one
    stream and at the target concurrency."""

    native_context_tokens: int = Field(..., ge=2)
    peak_active_generations: int = Field(..., ge=1)
    scenarios: list[TrafficSpec]

    @field_validator("scenarios")
    @classmethod
    def _unique_names(cls, v: list[TrafficSpec]) -> list[TrafficSpec]:
        names = [s.name for s in v]
        if len(set(names)) != len(names):
            raise ValueError(f"scenario names must be unique, got {names}")
        return v

    def get(self, name: str) -> TrafficSpec:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(f"no scenario {name!r}; have {[s.name for s in self.scenarios]}")

    @classmethod
    def standard(cls, native_context_tokens: int, peak_active_generations: int) -> "ScenarioSet":
        native, peak = native_context_tokens, peak_active_generations
        if native <= FULL_CONTEXT_OUTPUT_TOKENS:
            raise InputError(f"native_context_tokens {native} leaves no room for a prompt and "
                             f"{FULL_CONTEXT_OUTPUT_TOKENS} output tokens")

        def case(name: str, conc: int, inp: Any, out: Any, measured: int) -> TrafficSpec:
            return TrafficSpec(name=name, arrival=ClosedLoop(concurrency=conc),
                               input_lengths=inp, output_lengths=out,
                               peak_active_generations=peak, measured_requests=measured,
                               cooldown_s=SCENARIO_COOLDOWN_S)

        many = max(MIN_MEASURED_REQUESTS, 4 * peak)
        full_in = native - FULL_CONTEXT_OUTPUT_TOKENS
        out = []
        # A fixed case that does not fit the native context is not applicable; full-context is.
        for name, i, o in ((ScenarioName.SHORT, 128, 128), (ScenarioName.MEDIUM, 1024, 256)):
            if i + o <= native and i < full_in:
                out.append(case(name, peak, FixedLengths(tokens=i), FixedLengths(tokens=o), many))
        # Two waves at the target concurrency: each request is a full-context prefill.
        out.append(case(ScenarioName.FULL_CONTEXT, peak, FixedLengths(tokens=full_in),
                        FixedLengths(tokens=FULL_CONTEXT_OUTPUT_TOKENS), max(4, 2 * peak)))
        out.append(case(ScenarioName.SINGLE_STREAM, 1, CHAT_INPUT, CHAT_OUTPUT,
                        MIN_MEASURED_REQUESTS))
        out.append(case(ScenarioName.TARGET_CONCURRENCY, peak, CHAT_INPUT, CHAT_OUTPUT, many))
        return cls(native_context_tokens=native, peak_active_generations=peak, scenarios=out)


def standard_scenarios(native_context_tokens: int,
                       peak_active_generations: int) -> list[TrafficSpec]:
    return ScenarioSet.standard(native_context_tokens, peak_active_generations).scenarios


