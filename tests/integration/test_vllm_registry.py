"""The architecture is checked against the installed engine's own registry before anything
starts (issue 49): this machine's vLLM CPU build, its ModelRegistry read through its python;
SGLang's model list, read from its installed package in its own python.
A checkpoint whose config.json names an architecture the build does not list is refused in one
paragraph at planning time, for the CLI's pre-flight and the flow alike (plan_run)."""

from __future__ import annotations

import json

import pytest

from infopt.engines.support import architecture_refusal
from infopt.engines.vllm import adapter as vllm
from infopt.model.classify import classify_config
from infopt.specs.base import EngineUnavailableError
from infopt.specs.model import ModelFormat, ModelProfile
from infopt.specs.request import ModelTarget, OptimizeRequest
from infopt.specs.serving import EngineName
from infopt.specs.workload import fixed_levels
from infopt.tuning.plan_run import plan_run
from tests.fixture_data import MODEL_CONFIGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _hf(tmp_path, architecture: str) -> ModelProfile:
    cfg = json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text())
    cfg["architectures"] = [architecture]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return ModelProfile(path=str(tmp_path), format=ModelFormat.HF, file_bytes=2**30,
                        inspection=classify_config(cfg, model="q"), source="test")


def test_the_installed_vllm_lists_its_architectures_from_its_own_registry():
    listed = vllm.architectures(vllm.locate())
    assert listed is not None and len(listed) > 100
    assert {"Qwen3ForCausalLM", "LlamaForCausalLM"} <= listed


def test_an_architecture_the_build_does_not_list_is_refused_before_any_start(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    known = _hf(tmp_path / "a", "Qwen3ForCausalLM")
    unknown = _hf(tmp_path / "b", "NotARealModelForCausalLM")
    locate = lambda name: vllm.locate()  # noqa: E731
    assert architecture_refusal(EngineName.VLLM, known, locate) is None
    why = architecture_refusal(EngineName.VLLM, unknown, locate)
    assert why is not None and "does not list NotARealModelForCausalLM" in why
    assert "own model registry" in why

    from infopt.hardware.host import inventory

    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[1], target=1, requests=2)
    request = OptimizeRequest(model=ModelTarget(path=unknown.path), engines=["vllm"],
                              workload=wl.traffic, objective=wl.objective, scenarios=[],
                              quality_task_items=0, github_search=False)
    with pytest.raises(EngineUnavailableError) as err:
        plan_run(request, inventory(measure_bandwidth=False), unknown, [],
                 request.tuning_workload())
    text = str(err.value)
    assert text.startswith("no usable engine:") and "NotARealModelForCausalLM" in text


def test_the_installed_sglang_lists_its_architectures_from_its_own_package(tmp_path,
                                                                          sglang_args_python):
    """SGLang 0.5.23 (the argument environment `make sglang-args` builds): the names its
    ModelRegistry registers, read from the installed package's srt/models in its own python;
    an architecture it does not list is refused, naming the engine's own registry."""
    from infopt.engines.sglang import adapter as sglang

    listed = sglang.architectures(str(sglang_args_python))
    assert listed is not None and len(listed) > 100
    assert {"Qwen3ForCausalLM", "LlamaForCausalLM", "DeepseekV3ForCausalLM"} <= listed
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    locate = lambda name: str(sglang_args_python)  # noqa: E731
    assert architecture_refusal(EngineName.SGLANG, _hf(tmp_path / "a", "Qwen3ForCausalLM"),
                                locate) is None
    why = architecture_refusal(EngineName.SGLANG, _hf(tmp_path / "b", "NotARealForCausalLM"),
                               locate)
    assert why is not None and "SGLang's own model registry" in why
