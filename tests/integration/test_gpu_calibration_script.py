"""The GPU envelope calibration (issue 50) end to end, where it can run here:

- the real script with the vLLM CPU build's own torch on `--device cpu` (no GPU here: the same
  code path but the timer and the device), read back by infopt's parser;
- the simulated GPU host's engine python answering it (SIMULATED: planted shares of the
  simulated GPU's peaks, and torch's own refusal of FP8 GEMMs below capability 8.9).

tests/flows/test_gpu_calibration_task.py reads it into a run's inventory."""

from __future__ import annotations

import json

import pytest

from infopt.hardware.gpu_calibration import run_calibration
from tests.integration.test_sim_vllm_gpu import sim_gpu
from tests.sim import gpu_host
from tests.sim import vllm_gpu as sim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_the_script_runs_with_the_engine_environments_own_torch(vllm_python):
    cal = run_calibration(str(vllm_python), "cpu", copy_mib=32, gemm_n=256, repeats=3)
    assert cal.device_name == "cpu" and cal.torch_version.endswith("+cpu")
    assert cal.simulated is None and cal.python == str(vllm_python)
    assert cal.copy_bytes_per_s.median > 1e8  # any machine copies 0.1 GB/s
    # bf16 and fp16 run on any torch; what a build cannot run is named with torch's reason.
    assert {"bf16", "fp16"} <= set(cal.gemm_flops_per_s)
    assert set(cal.gemm_flops_per_s) | set(cal.skipped) == {"bf16", "fp16", "fp8", "int8"}
    assert all(r.repeats == 3 and r.min <= r.median <= r.max
               for r in [cal.copy_bytes_per_s, *cal.gemm_flops_per_s.values()])


@pytest.mark.parametrize("key, fp8", [("h100_sxm5_80gb", True), ("a100_sxm4_80gb", False)])
def test_the_simulated_host_answers_in_the_scripts_format_and_says_so(
        tmp_path, monkeypatch, key, fp8):
    gpu = sim_gpu(key, count=1)
    monkeypatch.setenv("INFOPT_SIM_GPU", json.dumps(gpu))
    cal = run_calibration(sim.write_python(tmp_path / "bin"))
    assert cal.simulated is not None and cal.source.startswith("SIMULATED")
    assert cal.copy_bytes_per_s.median == pytest.approx(
        gpu_host.SIM_COPY_SHARE * gpu["hbm_bytes_per_s"])
    assert ("fp8" in cal.gemm_flops_per_s) is fp8
    assert ("fp8" in cal.skipped) is not fp8
    if not fp8:
        assert "compute capability >= 9.0 or 8.9" in cal.skipped["fp8"]
