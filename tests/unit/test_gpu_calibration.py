"""The GPU envelope calibration's reading and use, pure: the script's JSON line is checked
(a refusal, a rate out of order or a missing field is an error, never a number), and a
calibrated inventory gives the ceilings a calibrated envelope beside the catalog's peaks."""

from __future__ import annotations

import json

import pytest

from infopt.costmodel.device import device_of_gpus
from infopt.hardware.catalog import lookup_gpu
from infopt.hardware.gpu_calibration import CalibrationError, parse_calibration
from infopt.specs.fit import Envelope
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import MODEL_CONFIGS


def _rate(x: float) -> dict:
    return {"median": x, "min": 0.98 * x, "max": 1.01 * x, "repeats": 10}


def _line(**over) -> str:
    raw = {"torch": "2.9.0+cu128", "cuda": "12.8", "device": "NVIDIA H100 80GB HBM3",
           "capability": "9.0", "copy_mib": 1024, "gemm_n": 8192,
           "copy_bytes_per_s": _rate(2.8e12),
           "gemm": {"bf16": _rate(7.0e14), "fp16": _rate(7.1e14), "fp8": _rate(1.3e15)},
           "skipped": {"int8": "RuntimeError: no kernel"}}
    raw.update(over)
    return json.dumps(raw)


def test_the_scripts_line_is_read_with_what_it_skipped_and_its_source():
    cal = parse_calibration(_line(), "/envs/vllm/bin/python")
    assert cal.copy_bytes_per_s.median == 2.8e12
    assert set(cal.gemm_flops_per_s) == {"bf16", "fp16", "fp8"}
    assert cal.skipped == {"int8": "RuntimeError: no kernel"}
    assert cal.simulated is None
    assert "calibrated on NVIDIA H100 80GB HBM3 with torch 2.9.0+cu128 of " \
           "/envs/vllm/bin/python" in cal.source and "SIMULATED" not in cal.source
    sim = parse_calibration(_line(simulated="vLLM stand-in"), "python")
    assert sim.source.startswith("SIMULATED (vLLM stand-in): ")


@pytest.mark.parametrize("line, match", [
    (json.dumps({"error": "torch sees no CUDA device (torch 2.9.0, CUDA None)"}),
     "refused: torch sees no CUDA device"),
    (_line(copy_bytes_per_s={"median": 5.0, "min": 6.0, "max": 7.0, "repeats": 3}),
     "copy rate is not a positive rate in order"),
    (_line(gemm={"bf16": _rate(-1.0)}), "bf16 GEMM rate is not a positive rate"),
    (_line(gemm={"bf16": 3.0}), "bf16 GEMM rate is not a measured rate"),
    (json.dumps({"torch": "2.9"}), "lacks 'device'"),
    ("Traceback (most recent call last):", "printed no JSON"),
])
def test_a_result_that_is_not_a_measurement_is_refused(line, match):
    with pytest.raises(CalibrationError, match=match):
        parse_calibration(line, "python")


def test_a_calibrated_inventory_gives_the_device_a_calibrated_envelope():
    hw = recorded_inventory("h100_sxm_8x")
    spec = lookup_gpu("h100_sxm5_80gb")
    plain = device_of_gpus(spec, hw)
    assert plain.calibrated_bandwidth_bytes_per_s is None and not plain.calibrated_flops_per_s
    cal = parse_calibration(_line(), "/envs/vllm/bin/python")
    dev = device_of_gpus(spec, hw.model_copy(update={"gpu_calibration": cal}))
    assert dev.calibrated_bandwidth_bytes_per_s == 2.8e12
    assert dev.calibrated_flops_per_s == {"bf16": 7.0e14, "fp16": 7.1e14, "fp8": 1.3e15}
    assert dev.bandwidth_bytes_per_s == plain.bandwidth_bytes_per_s  # the peaks stay
    assert "calibrated on NVIDIA H100" in dev.source


def test_the_ceilings_of_a_calibrated_gpu_have_both_envelopes():
    """The calibrated row is the same step at the measured rates: a copy at 84% of the HBM
    peak gives a memory-bound decode ceiling ~84% of the theoretical one."""
    from infopt.costmodel.roofline import decode_row
    from infopt.costmodel.weights import named_path
    from infopt.model.classify import classify_config

    m = classify_config(json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text()))
    hw = recorded_inventory("h100_sxm_8x")
    spec = lookup_gpu("h100_sxm5_80gb")
    path = named_path("bf16", "9.0")
    assert decode_row(m, path, "auto", 1, 4096, device_of_gpus(spec, hw),
                      Envelope.CALIBRATED) is None  # uncalibrated: unavailable, not guessed
    dev = device_of_gpus(spec, hw.model_copy(update={
        "gpu_calibration": parse_calibration(_line(), "python")}))
    theory = decode_row(m, path, "auto", 1, 4096, dev, Envelope.THEORETICAL)
    calibrated = decode_row(m, path, "auto", 1, 4096, dev, Envelope.CALIBRATED)
    assert theory is not None and calibrated is not None
    assert calibrated.tokens_per_s == pytest.approx(
        theory.tokens_per_s * 2.8e12 / spec.bandwidth_bytes_per_s, rel=0.02)
