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
               threads: int = 2, timeout_s: float = 1800.0) -> Path:
    """`llama-quantize --allow-requantize SOURCE OUT TYPE`, written to a temporary name and
    renamed when complete, so a crash never leaves a half-written model under `out`."""
    if gguf_type not in GGUF_TYPES:
        raise InfoptError(f"GGUF type {gguf_type!r} is not one infopt uses; choose from "
                          f"{', '.join(GGUF_TYPES)}")
    tmp = out.with_name(out.name + ".partial")
    cmd = [str(binary), "--allow-requantize", str(source), str(tmp), gguf_type, str(threads)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=scrubbed())
    except (OSError, subprocess.TimeoutExpired) as exc:
        tmp.unlink(missing_ok=True)
        raise InfoptError(f"llama-quantize could not run ({exc}); run `make engines`") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise InfoptError(f"llama-quantize {gguf_type} of {source.name} failed (status "
                          f"{proc.returncode}): {tail[-400:]}")
    tmp.replace(out)
    return out
