"""The optimize flow on a SIMULATED 8-GPU host (issue 32): the recorded 8x H100 SXM inventory
(tests/fixtures/nvml, through infopt's NVML seam) and the simulated vLLM engine
(tests/sim/vllm_gpu.py) started from the adapter's argv, for Llama-3.1-8B-Instruct's real
config.json with sparse weight shards of its real size (no bytes on disk; not hashed: the
digest is the shards' names, sizes and times). Every trial runs through the real flow, contract,
quality gate, benchmark and ladder; what the engine prints and serves is simulated and says so.
No GPU ran any of this."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
from infopt.specs.workload import fixed_levels
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import MODEL_CONFIGS
from tests.integration.test_sim_vllm_gpu import sim_gpu
from tests.sim import vllm_gpu as sim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SHARDS = 4


def _sim_model(folder: Path, name: str) -> Path:
    """config.json and sparse safetensors shards summing to the checkpoint's bf16 size."""
    folder.mkdir(parents=True)
    shutil.copy(MODEL_CONFIGS / f"{name}.json", folder / "config.json")
    params = sim.read_model(str(folder)).params
    for i in range(1, SHARDS + 1):
        with (folder / f"model-{i:05d}-of-{SHARDS:05d}.safetensors").open("wb") as f:
            f.truncate(params * 2 // SHARDS)
    return folder


def _stamp_digest(path: str) -> str:
    p = Path(path)
    return "simulated:" + json.dumps(sorted((f.name, f.stat().st_size)
                                            for f in p.iterdir() if f.is_file()))


@pytest.fixture(scope="module")
def sim_run(prefect_api, tmp_path_factory):
    from flows import engine_tuning, reproduce
    from flows.optimize import optimize

    tmp = tmp_path_factory.mktemp("sim-gpu")
    mp = pytest.MonkeyPatch()
    mp.setenv("INFOPT_SIM_GPU", json.dumps(sim_gpu()))
    # Slowed 3x: the simulated steps (~10 ms a token), not Python's HTTP, set the pace.
    mp.setenv("INFOPT_SIM_TIME_SCALE", "3")
    mp.setenv("INFOPT_VLLM_PYTHON", sim.write_python(tmp / "sim-vllm" / "bin"))
    mp.setattr(engine_tuning, "model_digest", _stamp_digest)
    mp.setattr(reproduce, "model_digest", _stamp_digest)
    model = _sim_model(tmp / "Llama-3.1-8B-Instruct", "meta-llama__Llama-3.1-8B-Instruct")
    wl = fixed_levels(input_tokens=256, output_tokens=32, levels=[16], target=16, requests=16,
                      cooldown_s=0.1)
    request = OptimizeRequest(
        model=ModelTarget(path=str(model)), engines=["vllm"], workload=wl.traffic,
        objective=wl.objective, budgets=Budgets(repeats=2), scenarios=[],
        quality_task_items=0, quality_max_prompts=8, dimensions=["parallel_layout"],
        github_search=False)
    try:
        report = optimize(request=request, runs_dir=str(tmp / "runs"),
                          hardware=recorded_inventory("h100_sxm_8x"))
    finally:
        mp.undo()
    return report, tmp / "runs" / report.run_id


def test_the_layout_families_are_climbed_in_order_on_eight_simulated_gpus(sim_run):
    report, run_dir = sim_run
    assert report.engine == "vllm" and report.engine_version.endswith("+simulated")
    # 16 sequences at the native 131,072 tokens fit on neither 1 nor 2 GPUs: the run starts
    # from the smallest TP that fits (the fit's pruning says why TP1 and TP2 were not tried).
    start = next(t for t in report.trials if t.role == "baseline")
    assert start.config.tensor_parallel_size == 4
    steps = [s for s in report.ladder.steps if s.dimension.value == "parallel_layout"]
    assert [s.family for s in steps] == ["TP", "PP", "DP", "EP"], [
        (s.family, s.skipped) for s in steps]
    tp, pp, dp, ep = steps
    status = {c.candidate.label: c.status for c in tp.candidates}
    assert status["TP1"] == status["TP2"] == "pruned" and status["TP8"] == "accepted"
    # Each later family is judged against the TP winner: the simulated timing model reads
    # the weights at HBM speed, so TP=8 (a quarter of the weights per GPU) beats pipelines
    # and replicas at 16 sequences.
    assert pp.incumbent == dp.incumbent == ep.incumbent == "TP8"
    assert {c.candidate.label for c in pp.candidates} == {"TP4_PP2", "TP2_PP4", "TP1_PP8"}
    assert {c.candidate.label for c in dp.candidates} == {"TP4_DP2", "TP2_DP4", "TP1_DP8"}
    assert all(c.status != "accepted" for c in [*pp.candidates, *dp.candidates])
    assert ep.skipped and "MoE" in ep.skipped  # a dense model
    assert report.winner_label == "baseline + TP8"
    md = (run_dir / "report.md").read_text()
    assert "| parallel_layout (PP) | TP8 (" in md
    assert "rank placement and GPU memory per device" in md
    assert "| TP=2 PP=4 | replica 0: stage 0 on GPUs 0,1; stage 1 on GPUs 2,3;" in md
    # The deployment requests the winner's GPUs.
    assert "nvidia.com/gpu: '8'" in md
    # Every engine log says what it was.
    logs = list(run_dir.glob("trials/*/engine.log"))
    assert logs and all("SIMULATED vLLM" in p.read_text() for p in logs)
