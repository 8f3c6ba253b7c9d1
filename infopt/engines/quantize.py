"""Local requantization of a GGUF with llama.cpp's own `llama-quantize` (built with the server
by `make engines`): the weight variants the quality gate judges and the weights dimension tries.
Under a second for SmolLM2-135M on 2 cores. Only ever called behind the quantize gate or in
tests on files they made themselves."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import get_args

from infopt.environ import scrubbed
from infopt.specs.base import InfoptError
from infopt.specs.request import GgufType

GGUF_TYPES = get_args(GgufType)  # llama-quantize's type names infopt uses


def requantize(binary: Path, source: Path, out: Path, gguf_type: str,
               threads: int = 2, timeout_s: float = 1800.0, imatrix: Path | None = None
               ) -> Path:
    """`llama-quantize --allow-requantize [--imatrix FILE] SOURCE OUT TYPE`, written to a
    temporary name and renamed when complete, so a crash never leaves a half-written model
    under `out`. `imatrix`: an importance matrix (importance_matrix) weighting each
    weight's rounding error by how much the calibration text's activations use it."""
    if gguf_type not in GGUF_TYPES:
        raise InfoptError(f"GGUF type {gguf_type!r} is not one infopt uses; choose from "
                          f"{', '.join(GGUF_TYPES)}")
    tmp = out.with_name(out.name + ".partial")
    weighted = ["--imatrix", str(imatrix)] if imatrix is not None else []
    cmd = [str(binary), "--allow-requantize", *weighted, str(source), str(tmp), gguf_type,
           str(threads)]
    return _atomic_run(cmd, tmp, out, timeout_s, f"llama-quantize {gguf_type} of {source.name}",
                       "make engines")


def _atomic_run(cmd: list[str], tmp: Path, out: Path, timeout_s: float, what: str,
                install: str) -> Path:
    """Run a tool that writes `tmp`; rename it to `out` only when the tool succeeded, else
    remove it and raise with the tool's last lines (`install`: the make target that builds
    the tool, for when it cannot run at all)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=scrubbed())
    except (OSError, subprocess.TimeoutExpired) as exc:
        tmp.unlink(missing_ok=True)
        raise InfoptError(f"{what} could not run ({exc}); run `{install}`") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise InfoptError(f"{what} failed (status {proc.returncode}): {tail[-400:]}")
    tmp.replace(out)
    return out


# llama-imatrix's chunk: the activations are collected over windows of this many tokens
# (its own default, -c 512); the sample must hold at least one.
IMATRIX_CHUNK_TOKENS = 512


def importance_matrix(binary: Path, model: Path, texts: list[str], out: Path, *,
                      chunk_tokens: int = IMATRIX_CHUNK_TOKENS, threads: int = 2,
                      timeout_s: float = 1800.0) -> Path:
    """`llama-imatrix -m MODEL -f SAMPLE -o OUT -c CHUNK --no-ppl`: the mean squared
    activation of each weight column over the calibration sample (`texts`, one per
    paragraph), which llama-quantize --imatrix uses to spend its precision where the
    sample's activations are. Written to a temporary name and renamed when complete."""
    if not texts:
        raise InfoptError("the importance matrix needs a calibration sample; none was given")
    sample = out.with_name(out.name + ".sample.txt")
    tmp = out.with_name(out.name + ".partial.gguf")  # the GGUF format, by its extension
    sample.write_text("\n\n".join(texts), encoding="utf-8")
    cmd = [str(binary), "-m", str(model), "-f", str(sample), "-o", str(tmp),
           "-c", str(chunk_tokens), "--no-ppl", "-t", str(threads)]
    try:
        return _atomic_run(cmd, tmp, out, timeout_s, f"llama-imatrix on {model.name}",
                           "make engines-quantize")
    finally:
        sample.unlink(missing_ok=True)
