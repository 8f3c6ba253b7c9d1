"""From failed contract checks to the engine's remedy (pure): one remedy must provide every
required check that failed, else none is applied."""

from __future__ import annotations

from infopt.contract.remedies import contract_gaps, remedy_for_required
from infopt.engines import adapter_for
from infopt.specs.contract import CheckStatus, ContractCheck, ContractRemedy


def _check(feature: str, status: str, required: bool) -> ContractCheck:
    return ContractCheck(route="/v1/chat/completions", feature=feature, stream=False,
                         status=CheckStatus(status), detail="d", required=required)


TOOLS = adapter_for("vllm").contract_remedies[0]
OTHER = ContractRemedy(features=["n"], knob_changes={"x": 1}, change="c", source="s")


def test_gaps_name_the_remedy_of_each_failed_check_and_skip_passes():
    gaps = contract_gaps([_check("whole", "pass", True), _check("tools_named", "unsupported",
                                                                 False),
                          _check("logprobs", "fail", False)], [TOOLS])
    assert [(g.feature, g.remedy is TOOLS) for g in gaps] == [("tools_named", True),
                                                              ("logprobs", False)]


def test_a_remedy_is_chosen_only_when_it_provides_every_required_failure():
    req = [_check("tools_required", "unsupported", True), _check("tools_auto", "fail", True)]
    assert remedy_for_required(contract_gaps(req, [TOOLS])) == TOOLS
    mixed = req + [_check("n", "unsupported", True)]
    assert remedy_for_required(contract_gaps(mixed, [TOOLS, OTHER])) is None  # two needed
    unknown = req + [_check("logprobs", "fail", True)]
    assert remedy_for_required(contract_gaps(unknown, [TOOLS])) is None
    optional = [_check("tools_required", "unsupported", False)]
    assert remedy_for_required(contract_gaps(optional, [TOOLS])) is None  # nothing required


def test_the_vllm_tool_remedy_renders_the_flags_vllm_asked_for():
    from infopt.engines.vllm import adapter as vllm
    from infopt.specs.serving import VllmConfig

    cfg = VllmConfig(model_path="/m", max_model_len=4096, **TOOLS.knob_changes)
    argv = vllm.build_launch(cfg, "python", 8000).argv
    assert "--enable-auto-tool-choice" in argv
    assert argv[argv.index("--tool-call-parser") + 1] == "hermes"
