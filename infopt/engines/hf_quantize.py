"""Calibrated local quantization of an HF checkpoint (issue 50): llm-compressor's W8A8
(SmoothQuant + GPTQ), W4A16 (GPTQ) and FP8-dynamic recipes (infopt/engines/llmc_quantize.py,
run with the python of `make engines-quantize`), behind the quantize gate with a time budget.
The output is a compressed-tensors folder vLLM loads as it loads a downloaded one; the variant
then passes the gates like any other weight candidate. Only ever called behind the quantize
gate or in tests on models they made themselves.

Which schemes vLLM's CPU build serves, measured with vLLM 0.32.0 on SmolLM2-135M (AVX-512
EPYC without AMX, 2026-12-07): W8A8 ("Selected CPUInt8ScaledMMLinearKernel for
CompressedTensorsW8A8Int8"); see CPU_SCHEMES for the others.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infopt.environ import scrubbed
from infopt.specs.approval import GateKind, GateRequest
from infopt.specs.base import InfoptError
from infopt.specs.request import QuantizeSettings

SCRIPT = Path(__file__).with_name("llmc_quantize.py")


@dataclass(frozen=True)
class HfScheme:
    name: str
    bits_per_weight: float  # storage incl. scales (int4 in groups of 128: 4 + 16/128)
    calibrated: bool  # needs calibration data (GPTQ / SmoothQuant)
    recipe: str  # what it runs, for the gate and the report


SCHEMES = {s.name: s for s in (
    HfScheme("W8A8", 8.0, True, "SmoothQuant (strength 0.8) then GPTQ: int8 weights per "
             "channel, int8 activations per token"),
    HfScheme("W4A16", 4.125, True, "GPTQ: int4 weights in groups of 128 (64 or 32 where 128 "
             "does not tile a row), 16-bit activations"),
    HfScheme("FP8_DYNAMIC", 8.0, False, "fp8 e4m3 weights per channel, activations per token "
             "at run time (no calibration data)"),
)}

# Measured: SmolLM2-135M, W8A8 with 32 samples of 256 tokens, 454 s on 2 busy CPU cores
# (2026-12-07). The estimate scales it by parameters and calibration tokens: labelled so.
_MEASURED_S, _MEASURED_PARAMS, _MEASURED_TOKENS = 454.0, 135e6, 32 * 256


def estimate_s(params: int | None, samples: int, max_seq_len: int, scheme: str) -> float:
    if not SCHEMES[scheme].calibrated:
        return 60.0 + (params or _MEASURED_PARAMS) / _MEASURED_PARAMS * 30.0
    return (_MEASURED_S * (params or _MEASURED_PARAMS) / _MEASURED_PARAMS
            * samples * max_seq_len / _MEASURED_TOKENS)


def hf_quantize_gate(source: Path, source_bytes: int, params: int | None, scheme: str,
                     tool: str, out_dir: Path, settings: QuantizeSettings,
                     calibration: str) -> GateRequest:
    """The quantize gate of one scheme; `calibration`: the sample's name, for the person."""
    s = SCHEMES[scheme]
    samples, max_seq_len, budget_s = settings.samples, settings.max_seq_len, settings.budget_s
    est = (params * s.bits_per_weight / 8) if params else source_bytes / 2
    secs = estimate_s(params, samples, max_seq_len, scheme)
    data = (f"{calibration}, {samples} samples of up to {max_seq_len} tokens"
            if s.calibrated else "none (this scheme needs none)")
    return GateRequest(
        kind=GateKind.QUANTIZE, key=f"quantize-{scheme.lower().replace('_', '-')}",
        title=f"quantize {source.name} to {scheme} with llm-compressor",
        description=(
            f"### Local quantization: {source.name} -> {scheme}\n\n"
            f"- **Input:** `{source}` (HF checkpoint, {source_bytes / 1e9:.2f} GB)\n"
            f"- **Output:** compressed-tensors {scheme} in `{out_dir}` (estimate: "
            f"~{est / 1e9:.2f} GB at {s.bits_per_weight} bits per weight)\n"
            f"- **Recipe:** {s.recipe}; lm_head unquantized\n"
            f"- **Tool:** {tool}\n"
            f"- **Calibration data:** {data}\n"
            f"- **Estimated time:** ~{secs:.0f} s (estimate, scaled from a measured run); "
            f"stopped after {budget_s:.0f} s (the request's quantize_budget_s)\n\n"
            "The variant then runs as a weight candidate: the quality gate judges it against "
            "the reference before it is measured. Deny to skip it."),
        details={"input": str(source), "output_type": scheme, "tool": tool,
                 "estimated_bytes": int(est), "estimated_s": round(secs, 1),
                 "calibration": calibration if s.calibrated else None,
                 "budget_s": budget_s})


def quantize_hf(python: str, source: Path, out: Path, scheme: str, texts: list[str], *,
                max_seq_len: int = 512, budget_s: float = 3600.0) -> dict:
    """Run the recipe; the folder appears at `out` only when complete. Returns the script's
    summary (seconds, samples, llmcompressor's version)."""
    if scheme not in SCHEMES:
        raise InfoptError(f"quantization scheme {scheme!r} is not one infopt runs with "
                          f"llm-compressor; choose from {', '.join(SCHEMES)}")
    with tempfile.TemporaryDirectory(prefix="infopt-calib-") as tmp:
        calib = Path(tmp) / "calibration.json"
        calib.write_text(json.dumps(texts), encoding="utf-8")
        # -P: the script's folder (infopt/engines, which holds a package named mlx) must not
        # shadow the environment's packages: transformers probes `import mlx.core`.
        cmd = [python, "-P", str(SCRIPT), "--model", str(source), "--out", str(out), "--scheme",
               scheme, "--calibration", str(calib), "--samples", str(len(texts)),
               "--max-seq-len", str(max_seq_len)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s,
                                  env=scrubbed())
        except subprocess.TimeoutExpired:
            shutil.rmtree(out.with_name(out.name + ".partial"), ignore_errors=True)
            raise InfoptError(f"llm-compressor {scheme} of {source.name} did not finish within "
                              f"{budget_s:.0f} s (the request's quantize_budget_s): raise it or "
                              "quantize on a GPU host") from None
        except OSError as exc:
            raise InfoptError(f"llm-compressor could not run ({exc}); run `make "
                              "engines-quantize`") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines or not out.is_dir():
        shutil.rmtree(out.with_name(out.name + ".partial"), ignore_errors=True)
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise InfoptError(f"llm-compressor {scheme} of {source.name} failed (status "
                          f"{proc.returncode}): {tail[-400:]}")
    return json.loads(lines[-1])
