"""Prefill beside decode in each trial: the single-stream prompt rate (the mean prompt /
TTFT p50 at concurrency 1) as a fraction of each envelope's prefill ceiling at that prompt
(costmodel.roofline.prefill_row: the configuration's weights, KV type and tensor parallelism),
its bound (compute or memory) the predicted bottleneck; on a GPU the theoretical entry carries
the TTFT estimate (costmodel.ttft) as the prompt rate it implies. TTFT also holds the request's
scheduling, its HTTP round trip and the first token's sampling, so the measured rate is a lower
bound on the prefill's own. Only a concurrency-1 level is used: above it a first token also
waits for the other requests' work."""

from __future__ import annotations

from infopt.costmodel.roofline import ceiling_ratio, prefill_row
from infopt.costmodel.ttft import ttft_estimate
from infopt.costmodel.weights import path_from_quantization
from infopt.engines import adapter_for
from infopt.engines.config_layout import config_layout
from infopt.specs.fit import CeilingRatio, Envelope
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.results import BenchmarkResult
from infopt.specs.serving import AnyServingConfig as Config
from infopt.tuning.candidates import run_device
from infopt.tuning.level_steps import mean_lengths

_NOTE = ("TTFT also holds scheduling, the HTTP round trip and the first token's sampling: a "
         "lower bound on the prefill's own rate")


def prefill_ceilings(model: ModelProfile, hw: HardwareInventory, config: Config,
                     bench: BenchmarkResult) -> list[CeilingRatio]:
    ttft = next((lvl.ttft_s.p50 for lvl in bench.levels
                 if lvl.concurrency == 1 and lvl.ttft_s.p50), None)
    prompt = mean_lengths(bench)[0]
    if ttft is None or prompt < 1:
        return []
    device, is_cpu = run_device(hw)
    path = path_from_quantization(model.inspection.quantization, device.compute_capability)
    kv = adapter_for(config.engine).memory_shape(config, 1, is_cpu,
                                                 model.native_context_tokens).kv_dtype
    tp = config_layout(config).tp
    measured = prompt / ttft
    out = []
    for env in (Envelope.THEORETICAL, Envelope.CALIBRATED):
        row = prefill_row(model.inspection, path, kv, prompt, device, env, tp,
                          exact_weights_bytes=model.file_bytes or None)
        if row is None:
            continue
        r = ceiling_ratio(f"prefill tokens/s at concurrency 1 ({prompt:,}-token mean prompt "
                          "/ TTFT p50)", measured, row)
        if not r.flagged:
            r = r.model_copy(update={"note": f"{r.note}; {_NOTE}"})
        est = ttft_estimate(row) if not is_cpu else None
        if est is not None:
            r = r.model_copy(update={"attainable": est.tokens_per_s,
                                     "attainable_note": est.label})
        out.append(r)
    return out
