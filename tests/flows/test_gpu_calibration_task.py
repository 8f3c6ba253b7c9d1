"""The `calibrate-gpu` task on a simulated GPU host (issue 50): once per run, with the first
planned engine that has a torch environment, read into the inventory the trials take their
ceilings from, which then have a calibrated envelope beside the catalog's peaks (SIMULATED:
the stand-in's planted rates, tests/sim/gpu_host.answer_calibration)."""

from __future__ import annotations

import json

import pytest

from infopt.hardware.gpu_calibration import torch_python
from tests.integration.test_sim_vllm_gpu import sim_gpu
from tests.sim import vllm_gpu as sim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_the_run_calibrates_once_with_the_planned_engines_torch(prefect_api, tmp_path,
                                                                  monkeypatch):
    from prefect import flow

    from infopt.specs.fit import Envelope
    from infopt.tuning.candidates import run_device
    from tasks.target import calibrate_gpu_task
    from tests.fake_nvml import recorded_inventory

    monkeypatch.setenv("INFOPT_SIM_GPU", json.dumps(sim_gpu(count=8)))
    monkeypatch.setenv("INFOPT_VLLM_PYTHON", sim.write_python(tmp_path / "bin"))
    hw = recorded_inventory("h100_sxm_8x")
    assert torch_python(["llamacpp", "vllm"]) == str(tmp_path / "bin" / "python")

    @flow(name="calibrate-only")
    def calibrate():
        return calibrate_gpu_task(hw, ["llamacpp", "vllm"])

    calibrated = calibrate()
    cal = calibrated.gpu_calibration
    assert cal is not None and cal.simulated is not None
    dev, _ = run_device(calibrated)
    assert dev.calibrated_bandwidth_bytes_per_s == cal.copy_bytes_per_s.median
    assert dev.calibrated_flops_per_s["bf16"] == cal.gemm_flops_per_s["bf16"].median
    assert "SIMULATED" in dev.source and Envelope.CALIBRATED.value == "calibrated"
    # Off GPUs, or with no engine that has a torch environment, nothing runs.
    assert torch_python(["llamacpp"]) is None
