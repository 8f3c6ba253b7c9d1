"""One measured benchmark level as a decode step the cost model can price: the batch the engine
really ran (the level's concurrency capped by its max sequences), the measured step time (ITL
p50: one step advances every running sequence by one token), and the theoretical ceiling row
and one prompt's prefill at the benchmark's mean lengths. Shared by the report's ceiling ratios
(candidates.level_ceilings) and the attainable fit's own-trial cases."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from infopt.costmodel.roofline import decode_row, layout_decode_row, prefill_row
from infopt.costmodel.weights import path_from_quantization
from infopt.engines import adapter_for
from infopt.engines.config_layout import config_layout
from infopt.engines.layout import running_sequences
from infopt.specs.fit import CeilingRow, DeviceBudget, Envelope, Layout, WeightPath
from infopt.specs.inspection import ModelInspection
from infopt.specs.results import BenchmarkResult
from infopt.specs.serving import AnyServingConfig as Config


def _means(bench: BenchmarkResult) -> tuple[float, float]:
    prompts = [s.level.prompt_tokens_mean or s.input_tokens_mean or 0 for s in bench.scenarios]
    outputs = [s.output_tokens_mean or 0 for s in bench.scenarios]
    if not prompts:
        return 0.0, 0.0
    return sum(prompts) / len(prompts), sum(outputs) / len(outputs)


def mean_lengths(bench: BenchmarkResult) -> tuple[int, int]:
    """(mean prompt tokens as measured, mean scheduled output tokens) over the scenarios."""
    prompt, output = _means(bench)
    return int(prompt), int(output)


def mean_context(bench: BenchmarkResult) -> int:
    """Mean tokens in context while decoding: the measured prompt plus half the scheduled
    output, over the workload's scenarios."""
    prompt, output = _means(bench)
    return int(prompt + output / 2)


@dataclass(frozen=True)
class LevelStep:
    concurrency: int
    batch: int  # sequences the whole server ran at once
    measured_step_s: float  # ITL p50; TPOT p50 under speculative decoding (see level_steps)
    path: WeightPath
    kv_dtype: str
    layout: Layout  # the config's TP, PP, DP and EP

    @property
    def tp(self) -> int:
        return self.layout.tp

    @property
    def replica_batch(self) -> int:
        """The sequences one DP replica steps at once (its share of the batch)."""
        return -(-self.batch // self.layout.dp)


def level_steps(inspection: ModelInspection, device: DeviceBudget, is_cpu: bool, config: Config,
                bench: BenchmarkResult, native_context_tokens: int) -> Iterator[LevelStep]:
    """Each measured level (with an ITL) as the batch the engine ran (its concurrency under
    the config's running-sequence cap, per DP replica) and its step time."""
    adapter = adapter_for(config.engine)
    layout = config_layout(config)
    path = path_from_quantization(inspection.quantization, device.compute_capability)
    # Speculative decoding streams a verified draft's tokens together: the median gap is ~0
    # and says nothing of the step; the time per token (TPOT) is what it delivers.
    spec = config.speculates
    for lvl in bench.levels:
        step_s = (lvl.tpot_s.p50 if spec and lvl.tpot_s is not None else None) or lvl.itl_s.p50
        if step_s:
            shape = adapter.memory_shape(config, lvl.concurrency, is_cpu, native_context_tokens)
            batch = running_sequences(shape.max_sequences, lvl.concurrency, layout.dp)
            yield LevelStep(lvl.concurrency, batch, step_s, path, shape.kv_dtype, layout)


def decode_ceiling(inspection: ModelInspection, device: DeviceBudget, step: LevelStep, context_tokens: int,
                   envelope: Envelope, exact_weights_bytes: int | None = None
                   ) -> CeilingRow | None:
    """The decode ceiling of the step's whole layout at its batch (pipeline stages, DP
    replicas, EP's all-to-alls), comparable with the level's measured batch / ITL p50."""
    return layout_decode_row(inspection, step.path, step.kv_dtype, step.batch, context_tokens,
                             device, envelope, step.layout,
                             exact_weights_bytes=exact_weights_bytes)


def theoretical_rows(inspection: ModelInspection, device: DeviceBudget, step: LevelStep, context_tokens: int,
                     prompt_tokens: int, exact_weights_bytes: int | None = None
                     ) -> tuple[CeilingRow | None, CeilingRow | None]:
    """(one replica's decode ceiling row at its share of the batch, one prompt's prefill row)
    on the vendor's peaks; (None, None) where the device has none (a CPU). A DP replica steps
    on its own, so its step time is what the level's ITL measured."""
    decode = decode_row(inspection, step.path, step.kv_dtype, step.replica_batch, context_tokens,
                        device, Envelope.THEORETICAL, step.tp,
                        exact_weights_bytes=exact_weights_bytes, ep=step.layout.ep)
    prefill = prefill_row(inspection, step.path, step.kv_dtype, prompt_tokens, device,
                          Envelope.THEORETICAL, step.tp) if prompt_tokens else None
    return decode, prefill
