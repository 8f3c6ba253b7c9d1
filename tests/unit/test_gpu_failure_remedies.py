"""GPU start-failure classes on real upstream logs (tests/fixtures/engine_logs, each with its URL):
no kernel image for the GPU, OOM while repacking quantized weights, CUDA-graph capture against
torch.compile, an architecture or a tensor the engine does not know, NCCL set-up. For each log
the diagnosis offers the remedy upstream gave, in the form the optimizer acts on: a knob or
environment change that applies to that engine's real control configuration, an upgrade of the
engine (which build), or a route to another engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from infopt.cli import app
from infopt.engines.launch import ServingTarget
from infopt.specs.diagnosis import Remedy, RemedyAction
from infopt.specs.serving import EngineName, with_knob
from infopt.troubleshoot.diagnose import (
    apply_remedy,
    contract_preserving_remedy,
    diagnose_text,
    load_catalog,
    route_remedy,
    upgrade_remedies,
)
from infopt.tuning.control import control_config

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "engine_logs"
TARGET = ServingTarget(model_path="/models/Qwen3-8B", served_model_name="Qwen3-8B",
                       native_context_tokens=32768, usable_cpus=8)


def _control(engine: EngineName):
    return control_config(engine, TARGET)


def _diagnose(name: str, engine: str):
    return diagnose_text((LOGS / name).read_text(), engine)


# log, engine, the change the optimizer applies to the failing config itself (knob or env ->
# value; None: none keeps the contract), the engine it routes to (None: no contract-keeping
# route), whether an engine upgrade is offered.
CASES = [
    ("vllm_v1_no_kernel_image_rtx50.log", "vllm", None, None, True),
    ("sglang_rmsnorm_no_kernel_image_sm120.log", "sglang", None, EngineName.VLLM, True),
    ("vllm_fp8_marlin_repack_oom.log", "vllm",
     {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, None, True),
    ("sglang_graph_capture_torch_compile_subproc.log", "sglang",
     {"enable_torch_compile": False}, None, True),
    ("sglang_torch_compile_stream_capturing.log", "sglang",
     {"enable_torch_compile": False}, None, True),
    ("vllm_model_architecture_not_supported.log", "vllm", None, EngineName.SGLANG, True),
    ("sglang_model_architecture_not_supported.log", "sglang", None, EngineName.VLLM, True),
    ("vllm_v0_load_weights_keyerror_weight_scale.log", "vllm", None, EngineName.SGLANG, True),
    ("llamacpp_tensor_not_found_newer_gguf.log", "llamacpp", None, None, True),
    ("sglang_nccl_shm_segment.log", "sglang", None, None, False),
    ("vllm_v0_nccl_unhandled_cuda_error.log", "vllm", {"env.NCCL_P2P_DISABLE": "1"}, None, False),
]


def _failing_config(engine: EngineName):
    """The configuration that failed: the control, with torch.compile on for SGLang (the
    capture clash needs it; SGLang's control leaves it off)."""
    config = _control(engine)
    if engine is EngineName.SGLANG:
        config = with_knob(config, "enable_torch_compile", True)
    return config


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_gpu_failure_gets_the_remedy_the_optimizer_acts_on(case):
    name, engine, change, route, upgrade = case
    d = _diagnose(name, engine)
    failing = _failing_config(EngineName(engine))
    remedy = contract_preserving_remedy(d, failing)
    if change is None:
        assert remedy is None, remedy
    else:
        assert remedy is not None and remedy.preserves_contract and not remedy.diagnostic_only
        fixed = apply_remedy(failing, remedy)
        assert fixed is not None
        for knob, value in change.items():
            got = fixed.env.get(knob.removeprefix("env.")) if knob.startswith("env.") \
                else getattr(fixed, knob)
            assert got == value, (knob, got)
    routed = route_remedy(d)
    assert (routed[1] if routed else None) == route
    assert bool(upgrade_remedies(d)) == upgrade
    for r in upgrade_remedies(d):
        assert r.engine_version  # says which build or release carries the fix
    assert d.matches and all(m.url.startswith("https://github.com/") for m in d.matches)


def test_a_remedy_that_changes_nothing_is_not_the_one_applied():
    """The control already runs SGLang without torch.compile: dropping it would restart the
    same configuration, so the optimizer is handed no remedy (the capture is the cause)."""
    d = _diagnose("sglang_torch_compile_stream_capturing.log", "sglang")
    assert contract_preserving_remedy(d, _control(EngineName.SGLANG)) is None
    assert contract_preserving_remedy(d) is not None  # without the config: the catalog's first


def test_a_route_goes_only_to_an_engine_the_plan_has():
    d = _diagnose("vllm_model_architecture_not_supported.log", "vllm")
    assert route_remedy(d, ["vllm", "llamacpp"]) is None  # llama.cpp would change the checkpoint
    remedy, engine = route_remedy(d, ["sglang", "llamacpp"])
    assert engine is EngineName.SGLANG and remedy.action is RemedyAction.ROUTE
    # The failing engine is never its own route, whatever an "any" entry lists.
    assert route_remedy(_diagnose("sglang_model_architecture_not_supported.log", "sglang"),
                        ["sglang"]) is None


def test_the_repack_oom_needs_the_repack_in_the_traceback():
    """A CUDA OOM elsewhere (profiling, another process) keeps the generic OOM remedies only."""
    d = _diagnose("vllm_v0_tp_worker_cuda_oom.log", "vllm")
    assert "quantized-weight-repack-oom" not in d.known_failure_ids
    assert "torch-cuda-oom-load-or-profile" in d.known_failure_ids


def _engines(entry_engine: str) -> list[EngineName]:
    return list(EngineName) if entry_engine == "any" else [EngineName(entry_engine)]


def test_every_catalog_knob_remedy_applies_to_a_real_control_config_of_its_engine():
    """A remedy whose knobs no engine has would make apply_remedy return None at run time: each
    knob/env remedy applies to the control of its entry's engine (an "any" entry: to at least one
    engine's, and an env-only remedy to every engine's)."""
    for k in load_catalog():
        for r in k.remedies:
            if not (r.knob_changes or r.env_changes):
                continue
            applied = {e: apply_remedy(_control(e), r) for e in _engines(k.engine)}
            if k.engine != "any" or not r.knob_changes:
                assert all(c is not None for c in applied.values()), (k.id, r.change, applied)
            else:
                assert any(c is not None for c in applied.values()), (k.id, r.change)


def test_upgrade_and_route_remedies_say_what_to_install_or_start():
    for k in load_catalog():
        for r in k.remedies:
            if r.action is RemedyAction.UPGRADE:
                assert r.engine_version and not r.route_to, k.id
            if r.action is RemedyAction.ROUTE:
                assert r.route_to and r.engine_version is None, k.id
                # llama.cpp serves a GGUF: a route there changes the checkpoint.
                if r.route_to == [EngineName.LLAMACPP] and k.engine != "llamacpp":
                    assert not r.preserves_contract, k.id


def test_the_remedy_model_refuses_an_action_without_its_fields():
    base = {"change": "x", "preserves_contract": True, "diagnostic_only": False}
    with pytest.raises(ValidationError, match="engine_version"):
        Remedy(**base, action="upgrade")
    with pytest.raises(ValidationError, match="route_to"):
        Remedy(**base, action="route")
    with pytest.raises(ValidationError, match="no knobs"):
        Remedy(**base, action="route", route_to=["sglang"], knob_changes={"enforce_eager": True})
    with pytest.raises(ValidationError, match="route_to"):
        Remedy(**base, route_to=["sglang"])
    # A remedy as recorded before actions existed still loads: a configure change.
    assert Remedy(**base).action is RemedyAction.CONFIGURE


def test_diagnose_json_reports_the_route_and_the_upgrade():
    log = LOGS / "sglang_model_architecture_not_supported.log"
    out = CliRunner().invoke(app, ["diagnose", str(log), "--engine", "sglang", "--no-search",
                                   "--json"])
    assert out.exit_code == 0, out.output
    remedies = json.loads(out.output)["remedies"]
    assert {"action": "upgrade"}.items() <= remedies[0].items() and remedies[0]["engine_version"]
    assert any(r["action"] == "route" and r["route_to"] == ["vllm", "sglang"] for r in remedies)


def test_a_start_no_knob_fixes_names_the_build_and_the_engines_that_would():
    from infopt.troubleshoot.diagnose import diagnose_file, next_steps

    d = diagnose_file(str(LOGS / "vllm_v1_no_kernel_image_rtx50.log"), "vllm")
    steps = next_steps(d)
    assert steps.startswith("upgrade: ") and "12.8" in steps
    assert "engines: [llamacpp]" in steps
