"""On a GPU host the Pareto set's memory axis is the engine's GPU memory as NVML reports it for
its process group (issue 32, item 11), not the host RSS of its API server. The recorded 8x
H100 inventory stands in for the driver, with a TP=2 engine's two workers and a stranger's
process on its GPUs (labelled a recording: tests/fixtures/nvml)."""

from __future__ import annotations

import copy

from infopt.hardware.gpu_memory import process_group_gpu_memory
from tests.fake_nvml import RecordedBackend, load

MIB = 2**20
ENGINE_GROUP = 4242


def _backend(unavailable: str | None = None) -> RecordedBackend:
    data = copy.deepcopy(load("h100_sxm_8x"))
    data["devices"][0]["processes"] = [
        {"pid": 4243, "type": "C", "name": "VLLM::Worker_TP0", "used_memory_mib": 72_000},
        {"pid": 999, "type": "C", "name": "someone-else", "used_memory_mib": 4_000}]
    data["devices"][1]["processes"] = [
        {"pid": 4244, "type": "C", "name": "VLLM::Worker_TP1", "used_memory_mib": 71_500},
        {"pid": 5000, "type": "G", "name": "Xorg", "used_memory_mib": 50}]
    return RecordedBackend(data, unavailable)


GROUPS = {4243: ENGINE_GROUP, 4244: ENGINE_GROUP, 999: 1, 5000: ENGINE_GROUP}


def test_the_engines_processes_are_summed_over_its_gpus_and_no_one_elses():
    used = process_group_gpu_memory(ENGINE_GROUP, _backend(), group_of=GROUPS.get)
    assert used is not None and sum(used.values()) == (72_000 + 71_500) * MIB  # compute processes of its group only


def test_no_nvml_or_none_of_its_processes_listed_is_no_figure():
    assert process_group_gpu_memory(ENGINE_GROUP, _backend("libnvidia-ml.so.1 not found"),
                                   group_of=GROUPS.get) is None
    assert process_group_gpu_memory(7, _backend(), group_of=GROUPS.get) is None


def test_the_pareto_memory_axis_takes_gpu_memory_over_host_rss():
    from infopt.specs.results import OptimizationReport
    from infopt.tuning.pareto import points
    from tests.fixture_data import FIXTURES

    report = OptimizationReport.model_validate_json(
        (FIXTURES / "reports" / "llamacpp-optimize-report.json").read_text())
    target = report.workload.target_concurrency
    trials = [t for t in report.trials if t.objective_value is not None]
    before = {p.label: p.memory_bytes for p in points(trials, target)}
    assert any(before.values())  # host RSS, measured on this CPU
    on_gpu = [t.model_copy(update={"gpu_memory_bytes": 70 * 2**30 + i})
              for i, t in enumerate(trials)]
    after = {p.label: p.memory_bytes for p in points(on_gpu, target)}
    assert all(v is not None and 70 * 2**30 <= v < 70 * 2**30 + len(trials)
               for v in after.values())


def test_each_gpu_holds_its_ranks_share_and_the_sum_is_theirs():
    per_device = process_group_gpu_memory(ENGINE_GROUP, _backend(), group_of=GROUPS.get)
    assert per_device == {0: 72_000 * MIB, 1: 71_500 * MIB}  # the stranger and Xorg left out
    assert process_group_gpu_memory(7, _backend(), group_of=GROUPS.get) is None
