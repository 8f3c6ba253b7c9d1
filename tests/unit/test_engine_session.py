"""A remedy's environment is part of the configuration: apply_remedy puts knob and env changes
on the config; the env is a change of its own against the control, is covered by the trial key
(keys of configurations without one are unchanged), reaches the launch and every rendered
deployment artifact, and can never carry a credential."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infopt.engines.launch import launch_for
from infopt.engines.render import render_deployment
from infopt.specs.diagnosis import Remedy
from infopt.specs.serving import LlamaCppConfig, VllmConfig, with_knob
from infopt.specs.trial import TrialRole, TrialSpec, changes_from, trial_key
from infopt.specs.workload import fixed_levels
from infopt.troubleshoot.diagnose import apply_remedy

ENV_ONLY = Remedy(change="Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                  preserves_contract=True, diagnostic_only=False,
                  env_changes={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})


def _cfg(**kw) -> LlamaCppConfig:
    return LlamaCppConfig(model_path="/m/model.gguf", ctx_per_slot_tokens=512, **kw)


def test_apply_remedy_puts_knobs_and_env_on_the_config():
    both = ENV_ONLY.model_copy(update={"knob_changes": {"flash_attn": "on"}})
    fixed = apply_remedy(_cfg(flash_attn="off"), both)
    assert fixed.flash_attn == "on"
    assert fixed.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    # Another engine's knob: not this engine's remedy.
    other = ENV_ONLY.model_copy(update={"knob_changes": {"enforce_eager": True}})
    assert apply_remedy(_cfg(), other) is None


def test_env_is_a_change_of_its_own_and_part_of_the_key():
    control = _cfg()
    fixed = apply_remedy(control, ENV_ONLY)
    [change] = changes_from(control, fixed)
    assert (change.knob, change.control, change.value) == (
        "env.PYTORCH_CUDA_ALLOC_CONF", None, "expandable_segments:True")
    assert with_knob(fixed, "env.PYTORCH_CUDA_ALLOC_CONF", None).env == {}
    wl = fixed_levels(input_tokens=16, output_tokens=4, levels=[1], target=1, requests=2)

    def key(cfg):
        return trial_key(TrialSpec(trial_id="t1", role=TrialRole.TUNING, config=cfg,
                                   changes=[]), wl,
                         "v1", "digest")
    assert key(fixed) != key(control)
    # A configuration without env hashes as before env existed (kept runs stay resumable).
    assert key(control) == "t1-" + _legacy_hash(control, wl)


def _legacy_hash(cfg, wl) -> str:
    import hashlib
    import json

    # The configuration as it was before env (and the offload knobs, issue 49) existed.
    config = cfg.model_dump(mode="json", exclude={"port", "env", "n_gpu_layers", "n_cpu_moe",
                                                  "split_mode", "tensor_split"})
    payload = {"config": config, "workload": wl.model_dump(mode="json"), "engine_version": "v1",
               "model": "digest", "seed": 0, "repeat": 1, "contract": False, "gate": ""}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def test_the_env_reaches_the_launch_and_every_rendered_artifact():
    cfg = apply_remedy(VllmConfig(model_path="/m/hf", max_model_len=4096), ENV_ONLY.model_copy(
        update={"env_changes": {"VLLM_ENGINE_READY_TIMEOUT_S": "1800"}}))
    launch = launch_for(_vllm(), cfg, "vllm", 8000)
    assert launch.env["VLLM_ENGINE_READY_TIMEOUT_S"] == "1800"
    assert "VLLM_ENGINE_READY_TIMEOUT_S=1800" in launch.command.split(" vllm ")[0].split()
    out = render_deployment(cfg, port=8000, gpus=1, cpus=8, model_bytes=2**30, name="w")
    assert "-e VLLM_ENGINE_READY_TIMEOUT_S=1800" in out.container_command
    assert "name: VLLM_ENGINE_READY_TIMEOUT_S" in out.kubernetes_yaml
    assert "VLLM_ENGINE_READY_TIMEOUT_S" in out.helm_values_yaml


def _vllm():
    from infopt.engines.vllm import adapter as vllm

    return vllm.ADAPTER


@pytest.mark.parametrize("env", [{"HF_TOKEN": "x"}, {"MY_API_KEY": "x"}, {"1BAD": "x"},
                                 {"A B": "x"}])
def test_a_configuration_refuses_credentials_and_bad_names_in_env(env):
    with pytest.raises(ValidationError, match="env"):
        _cfg(env=env)
