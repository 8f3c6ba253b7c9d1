"""Published measured serving results as cases for the attainable-estimate fit: each row of
data/published_results.csv (engine, GPU, model, weight dtype, tp, input/output tokens,
concurrency, measured TPOT, its source) becomes the ceiling's step terms for that case, from the
model's real config.json, and its measured step time (TPOT: one step advances each request by
one token)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from infopt.costmodel.attainable import StepTerms, gpu_family, terms
from infopt.costmodel.device import device_from_catalog
from infopt.costmodel.roofline import decode_row, prefill_row
from infopt.costmodel.weights import BF16, named_path, path_from_quantization
from infopt.hardware.catalog import lookup_gpu
from infopt.model.classify import classify_config
from infopt.specs.fit import DeviceBudget, Envelope, WeightPath
from infopt.specs.inspection import ModelInspection

T = TypeVar("T")
DATA = Path(__file__).parent / "data"
CSV_FILE = DATA / "published_results.csv"

# Published model id -> the config.json (tests/fixtures/model_configs) of its architecture.
ARCHITECTURES = {
    "meta-llama/Llama-3.1-70B": "meta-llama__Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama__Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama__Llama-3.1-8B-Instruct",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama__Llama-3.1-8B-Instruct",
    "openai/gpt-oss-120b": "openai__gpt-oss-120b",
    "openai/gpt-oss-20b": "openai__gpt-oss-20b",
    "Qwen/Qwen3-32B": "Qwen__Qwen3-32B",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen__Qwen3-235B-A22B",
    "Qwen/Qwen3-235B-A22B-Instruct-2507": "Qwen__Qwen3-235B-A22B",
    "deepseek-ai/DeepSeek-R1": "deepseek-ai__DeepSeek-R1",
}
_GPUS = {"H100 SXM": "H100 SXM", "H200 SXM": "H200 SXM", "B200": "B200",
         "A100 SXM 80GB": "A100 80GB SXM"}
# Per PARAMS: times >= 0 (a layer's fixed cost under 10 ms), fractions of peak in (0.02, 1].


@dataclass(frozen=True)
class Case:
    id: str
    group: tuple[str, str]  # (engine, GPU family)
    config: str  # the configuration a concurrency sweep shares
    batch: int
    terms: StepTerms
    measured_step_s: float
    ceiling_tokens_per_s: float


def _path(dtype: str, m: ModelInspection, cc: str | None) -> WeightPath:
    if dtype in ("bf16", "fp16"):
        return BF16
    if dtype == "mxfp4" and m.quantization is not None and m.quantization.method.value == "mxfp4":
        return path_from_quantization(m.quantization, cc)  # its bf16 attention included
    return named_path({"int4-awq": "int4", "int4-gptq": "int4"}.get(dtype, dtype), cc)


def row_target(row: dict[str, str], configs: Path, models: dict[str, Any]
               ) -> tuple[ModelInspection, DeviceBudget, WeightPath] | str:
    """(the row's model from its real config.json, its catalog GPU, its weights' path), or
    why the row has none; `models` keeps each config classified once."""
    arch = ARCHITECTURES.get(row["model"])
    gpu = _GPUS.get(row["gpu"])
    if arch is None or gpu is None:
        return f"{row['id']}: no config for {row['model']} or no catalog GPU {row['gpu']}"
    if arch not in models:
        models[arch] = classify_config(json.loads((configs / f"{arch}.json").read_text()))
    m = models[arch]
    dev = device_from_catalog(lookup_gpu(gpu))
    return m, dev, _path(row["weight_dtype"], m, dev.compute_capability)


def _case(row: dict[str, str], configs: Path, models: dict[str, Any]) -> Case | str:
    """One published row as step terms and a measured step time, or why it is left out."""
    if not row["tpot_ms"]:
        return f"{row['id']}: no TPOT"
    decode_s = float(row["output_tokens"]) * float(row["tpot_ms"]) / 1000
    if row["ttft_ms"] and float(row["ttft_ms"]) / 1000 > decode_s:
        # Requests waited longer for their first token than their whole decode took: the
        # server was queueing, so fewer than `concurrency` sequences decoded together and the
        # batch is unknown (such rows sit above the ceiling at batch = concurrency).
        return (f"{row['id']}: queued (TTFT {float(row['ttft_ms']) / 1000:.1f} s > the whole "
                f"decode {decode_s:.1f} s): decode batch unknown")
    found = row_target(row, configs, models)
    if isinstance(found, str):
        return found
    m, dev, path = found
    gpu = dev.name
    tp, batch = int(row["tp"]), int(row["concurrency"])
    isl, osl = int(float(row["input_tokens"])), int(float(row["output_tokens"]))
    kv = "fp8" if row["kv_dtype"] == "fp8" else "auto"
    d = decode_row(m, path, kv, batch, isl + osl // 2, dev, Envelope.THEORETICAL, tp)
    p = prefill_row(m, path, kv, isl, dev, Envelope.THEORETICAL, tp)
    if d is None or p is None:
        return f"{row['id']}: no theoretical rates for {path.label} on {gpu}"
    config = "|".join(row[k] for k in ("engine", "gpu", "model", "weight_dtype", "tp",
                                       "input_tokens", "output_tokens"))
    return Case(row["id"], (row["engine"], gpu_family(dev.compute_capability) or "?"), config,
                batch, terms(d, m, tp, p.t_compute_s, osl),
                float(row["tpot_ms"]) / 1000, d.tokens_per_s)


def load_cases(configs: Path, csv_file: Path = CSV_FILE) -> tuple[list[Case], list[str]]:
    return read_rows(_case, configs, csv_file)


def read_rows(make: Callable[[dict[str, str], Path, dict[str, Any]], T | str], configs: Path,
              csv_file: Path = CSV_FILE) -> tuple[list[T], list[str]]:
    """Every published row made into a case by `make` (the row, the configs folder, the
    models classified so far), or left out with its reason (a string)."""
    cases: list[T] = []
    skipped: list[str] = []
    models: dict[str, Any] = {}
    with csv_file.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            got = make(row, configs, models)
            if isinstance(got, str):
                skipped.append(got)
            else:
                cases.append(got)
    return cases, skipped
