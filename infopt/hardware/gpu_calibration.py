"""The GPU envelope calibrated once per run (issue 50): infopt/hardware/gpu_calibrate.py run
with an engine environment's python (vLLM's or SGLang's: their torch and CUDA build are what
the engine's kernels get), its JSON line checked and read into a GpuCalibration. The ceilings'
calibrated envelope then uses its copy rate and GEMM rates (costmodel.device); the catalog's
vendor peaks stay the theoretical one. A calibration that cannot run is reported, never
guessed: the calibrated envelope is then unavailable, as before."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

from infopt.environ import scrubbed
from infopt.specs.base import InfoptError
from infopt.specs.gpu import GpuCalibration, MeasuredRate

SCRIPT = Path(__file__).with_name("gpu_calibrate.py")
TIMEOUT_S = 300.0


class CalibrationError(InfoptError):
    """The calibration did not run, or printed something other than its result."""


def run_calibration(python: str, device: str = "cuda", *, copy_mib: int = 1024,
                    gemm_n: int = 8192, repeats: int = 10,
                    timeout_s: float = TIMEOUT_S) -> GpuCalibration:
    # -P: the script's folder is not put ahead of the engine environment's packages.
    cmd = [python, "-P", str(SCRIPT), "--device", device, "--copy-mib", str(copy_mib), "--gemm",
           str(gemm_n), "--repeats", str(repeats)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env=scrubbed())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CalibrationError(f"the GPU calibration could not run with {python} ({exc})") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise CalibrationError(f"the GPU calibration with {python} printed no result (status "
                               f"{proc.returncode}): {tail[-400:]}")
    return parse_calibration(lines[-1], python)


def _rate(raw: object, what: str) -> MeasuredRate:
    if not isinstance(raw, dict):
        raise CalibrationError(f"the calibration's {what} is not a measured rate: {raw!r}")
    rate = MeasuredRate.model_validate(raw)
    if not all(math.isfinite(v) and v > 0 for v in (rate.median, rate.min, rate.max)) \
            or not rate.min <= rate.median <= rate.max:
        raise CalibrationError(f"the calibration's {what} is not a positive rate in order "
                               f"(min {rate.min}, median {rate.median}, max {rate.max})")
    return rate


def parse_calibration(line: str, python: str) -> GpuCalibration:
    """The script's JSON line, checked: every rate positive, finite and inside its range."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"the calibration printed no JSON ({exc}): {line[:200]}") from None
    if "error" in raw:
        raise CalibrationError(f"the GPU calibration refused: {raw['error']}")
    try:
        return GpuCalibration(
            device_name=str(raw["device"]), compute_capability=raw.get("capability"),
            torch_version=str(raw["torch"]), cuda_version=raw.get("cuda"), python=python,
            copy_mib=int(raw["copy_mib"]),
            copy_bytes_per_s=_rate(raw["copy_bytes_per_s"], "copy rate"),
            gemm_n=int(raw["gemm_n"]),
            gemm_flops_per_s={k: _rate(v, f"{k} GEMM rate")
                              for k, v in (raw.get("gemm") or {}).items()},
            skipped={str(k): str(v) for k, v in (raw.get("skipped") or {}).items()},
            simulated=raw.get("simulated"))
    except KeyError as exc:
        raise CalibrationError(f"the calibration's result lacks {exc}: {line[:200]}") from None


def torch_python(engines: list[str]) -> str | None:
    """The python of the first of `engines` that runs as `python -m` in its own environment
    (vLLM, SGLang: their torch is what their kernels get), when it is installed; None when
    none is (llama.cpp has no torch; TensorRT-LLM is located by its console script)."""
    from infopt.engines import adapter_for
    from infopt.specs.base import EngineUnavailableError, InputError

    for name in engines:
        a = adapter_for(name)
        if a.venv_executable != "bin/python":
            continue
        try:
            return a.locate()
        except (EngineUnavailableError, InputError):
            continue
    return None
