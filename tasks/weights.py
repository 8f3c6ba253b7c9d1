"""The quantize gate's action: one llama-quantize run (a GGUF type) or one llm-compressor
recipe (an HF scheme), kept per machine under $INFOPT_CACHE_DIR/models/requantized/ by the
input's digest, the tool's version, the type and (calibrated) the calibration sample's digest
and size (a later run, or another clone, reuses the variant instead of quantizing again)."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.bootstrap import LLMC_VERSION, cache_root, default_paths
from infopt.engines.calibration_texts import sample_digest
from infopt.engines.hf_quantize import SCHEMES, quantize_hf
from infopt.engines.quantize import importance_matrix, requantize
from infopt.specs.request import QuantizeSettings


def variant_path(model_digest: str, tool_version: str, gguf_type: str,
                 imatrix_sample: str | None = None) -> Path:
    """`imatrix_sample`: the calibration sample's digest, when made with an importance
    matrix (a variant of its own: the same type without one is another file)."""
    weighted = f"-imatrix{imatrix_sample}" if imatrix_sample else ""
    return (cache_root() / "models" / "requantized"
            / f"{model_digest[:16]}-llamacpp{tool_version}-{gguf_type}{weighted}.gguf")


def imatrix_path(model_digest: str, tool_version: str, sample: str) -> Path:
    return (cache_root() / "models" / "requantized"
            / f"{model_digest[:16]}-llamacpp{tool_version}-imatrix{sample}.gguf")


@task(name="importance-matrix", cache_policy=NO_CACHE)
def importance_matrix_task(source: str, model_digest: str, tool_version: str,
                           texts: list[str]) -> str:
    """The importance matrix of `source` over the calibration sample (once per model, build
    and sample: every type quantized with it reads the same file)."""
    out = imatrix_path(model_digest, tool_version, sample_digest(texts))
    if out.is_file():
        get_run_logger().info("importance matrix kept from an earlier run: %s", out)
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    importance_matrix(default_paths().llama_imatrix, Path(source), texts, out)
    get_run_logger().info("importance matrix of %s over %d calibration samples: %s (%.0f s)",
                          Path(source).name, len(texts), out, time.monotonic() - started)
    return str(out)


@task(name="requantize", cache_policy=NO_CACHE)
def requantize_task(source: str, model_digest: str, tool_version: str, gguf_type: str,
                    imatrix: str | None = None, imatrix_sample: str | None = None) -> str:
    """`imatrix`: the importance matrix file, made over the sample `imatrix_sample` names."""
    out = variant_path(model_digest, tool_version, gguf_type, imatrix_sample)
    if out.is_file():
        get_run_logger().info("%s variant kept from an earlier run: %s", gguf_type, out)
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    requantize(default_paths().llama_quantize, Path(source), out, gguf_type,
               imatrix=Path(imatrix) if imatrix else None)
    get_run_logger().info("requantized %s -> %s (%.2f GB%s)", Path(source).name, out,
                          out.stat().st_size / 1e9, ", with the importance matrix"
                          if imatrix else "")
    return str(out)


def hf_variant_path(model_digest: str, scheme: str, calibration: str,
                    settings: QuantizeSettings) -> Path:
    """A folder per input, llm-compressor version, scheme and (calibrated) sample."""
    calib = (f"-{calibration}-{settings.samples}x{settings.max_seq_len}"
             if SCHEMES[scheme].calibrated else "")
    return (cache_root() / "models" / "requantized"
            / f"{model_digest[:16]}-llmcompressor{LLMC_VERSION}-{scheme}{calib}")


@task(name="quantize-hf", cache_policy=NO_CACHE)
def quantize_hf_task(source: str, out: str, scheme: str, texts: list[str],
                     settings: QuantizeSettings) -> str:
    path = Path(out)
    if path.is_dir():
        get_run_logger().info("%s variant kept from an earlier run: %s", scheme, path)
        return out
    path.parent.mkdir(parents=True, exist_ok=True)
    done = quantize_hf(str(default_paths().llmc_python), Path(source), path, scheme,
                       texts[:settings.samples], max_seq_len=settings.max_seq_len,
                       budget_s=settings.budget_s)
    get_run_logger().info("quantized %s -> %s with llm-compressor %s in %.0f s (%d calibration "
                          "samples)", Path(source).name, path, done.get("llmcompressor"),
                          done.get("seconds", 0), done.get("samples", 0))
    return out
