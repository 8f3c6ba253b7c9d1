"""The quantize gate's action: one llama-quantize run, kept per machine under
$INFOPT_CACHE_DIR/models/requantized/ by the input's digest, the tool's version and the type
(a later run, or another clone, reuses the file instead of requantizing again)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.bootstrap import cache_root, default_paths
from infopt.engines.quantize import requantize


def variant_path(model_digest: str, tool_version: str, gguf_type: str) -> Path:
    return (cache_root() / "models" / "requantized"
            / f"{model_digest[:16]}-llamacpp{tool_version}-{gguf_type}.gguf")


@task(name="requantize", cache_policy=NO_CACHE)
def requantize_task(source: str, model_digest: str, tool_version: str, gguf_type: str) -> str:
    out = variant_path(model_digest, tool_version, gguf_type)
    if out.is_file():
        get_run_logger().info("%s variant kept from an earlier run: %s", gguf_type, out)
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    requantize(default_paths().llama_quantize, Path(source), out, gguf_type)
    get_run_logger().info("requantized %s -> %s (%.2f GB)", Path(source).name, out,
                          out.stat().st_size / 1e9)
    return str(out)
