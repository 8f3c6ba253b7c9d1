"""The parallel-layout step climbed family by family (issue 32, item 5): TP, then PP, then DP,
then EP (MoE only), each family screened and confirmed on its own from the best configuration
the families before it left. A stand-in for the engines (tests/unit/test_climb_golden.py's
Sim) answers each layout with a planted objective; no engine, no Prefect."""

from __future__ import annotations

from infopt.costmodel.layouts import candidate_layouts
from infopt.engines.launch import ServingTarget
from infopt.engines.layout import rank_placement
from infopt.engines.rules import LadderFacts
from infopt.engines.vllm import adapter as vllm
from infopt.specs.fit import Layout
from infopt.specs.request import Budgets
from infopt.specs.trial import TrialRole
from infopt.tuning.climb import ClimbPlan, climb, drive
from infopt.tuning.dimension_rules import rules_for
from tests.unit.test_climb_golden import Sim

T = ServingTarget(model_path="/m/llama-8b", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=16)
CONTROL = vllm.control_config(T)


def _layouts(moe: bool = False) -> tuple:
    """The layout matrix's rows on 4 GPUs for a model of 32 heads (and 8 experts if MoE)."""
    from types import SimpleNamespace

    model = SimpleNamespace(attention=SimpleNamespace(num_query_heads=32), num_layers=32,
                            moe=SimpleNamespace(num_experts=8) if moe else None)
    return tuple(candidate_layouts(model, 4))


def _plan(layouts: tuple) -> ClimbPlan:
    facts = LadderFacts(target_concurrency=16, usable_cpus=16, physical_cores=8, gpu_count=4,
                        mean_prompt_tokens=512, mean_output_tokens=128, prefix_reuse=False,
                        kv_read_share=0.2, layouts=layouts)
    return ClimbPlan(control=CONTROL, baseline=CONTROL, engine="vllm",
                     rules=rules_for(vllm.ADAPTER, ["parallel_layout"]),
                     facts=lambda t: facts, objective="throughput", higher=True,
                     budgets=Budgets(repeats=3), clock=lambda: 0.0)


# Planted objectives (tokens/s), one per repeat: TP4 beats TP2 and the baseline; no PP layout
# beats TP4; four replicas of one GPU beat everything.
VALUES = {"baseline": [100, 101, 99], "TP2": [150, 151, 149], "TP4": [180, 181, 179],
          "TP1_PP4": [80, 81, 79], "TP2_PP2": [120, 121, 119],
          "TP1_DP4": [300, 301, 299], "TP2_DP2": [250, 251, 249],
          "TP2_EP2": [190, 191, 189], "TP4_EP4": [170, 170, 170]}


def test_families_are_climbed_in_order_each_from_the_best_so_far():
    sim = Sim(VALUES)
    outcome, _ = drive(climb(_plan(_layouts())), sim)
    steps = [s for s in outcome.ladder.steps if s.dimension.value == "parallel_layout"]
    assert [s.family for s in steps] == ["TP", "PP", "DP", "EP"]
    tp, pp, dp, ep = steps
    # The best screen is confirmed first; once accepted, the family's step ends: TP2's one
    # screening stays in the record, its confirmation not run.
    assert [(c.candidate.label, c.status) for c in tp.candidates] == [("TP4", "accepted"),
                                                                       ("TP2", "not run")]
    assert "TP4 screened better and was accepted" in tp.candidates[1].reason
    assert tp.accepted == "TP4" and pp.incumbent == "TP4" and pp.accepted is None
    assert {c.candidate.label for c in pp.candidates} == {"TP1_PP4", "TP2_PP2"}
    assert all(c.status == "worse" for c in pp.candidates)
    assert dp.incumbent == "TP4" and dp.accepted == "TP1_DP4"
    assert ep.skipped and "MoE" in ep.skipped  # a dense model
    assert outcome.ladder.winner_label == "baseline + TP4 + TP1_DP4"
    # Each family's candidates were paired against the incumbent it left: PP against TP4.
    for s in sim.specs:
        if s.role is TrialRole.TUNING and s.value in ("TP1_PP4", "TP2_PP2"):
            assert s.incumbent.tensor_parallel_size == 4
    # The winner runs 4 replicas of TP=1: the TP=4 it came from is reset, not multiplied.
    winner = outcome.history[-1].config
    assert (winner.tensor_parallel_size or 1, winner.data_parallel_size) == (1, 4)
    # The defaults are the baseline here (vLLM): the winner is compared with them and wins.
    assert outcome.ladder.decision.recommended == "winner"
    assert outcome.ladder.decision.rounds.state == "gain"


def test_a_moe_model_gets_its_expert_parallel_family_last():
    sim = Sim(VALUES)
    outcome, _ = drive(climb(_plan(_layouts(moe=True))), sim)
    ep = [s for s in outcome.ladder.steps if s.family == "EP"][0]
    assert ep.skipped is None and ep.incumbent == "TP1_DP4"
    assert {c.candidate.label: c.status for c in ep.candidates} == {
        "TP2_EP2": "worse", "TP4_EP4": "worse"}
    assert ep.accepted is None  # nothing beats the four replicas


def test_ranks_are_placed_tp_innermost_then_pp_then_dp():
    assert rank_placement(Layout(tp=2, pp=2, dp=2)) == [
        "replica 0: stage 0 on GPUs 0,1; stage 1 on GPUs 2,3",
        "replica 1: stage 0 on GPUs 4,5; stage 1 on GPUs 6,7"]
    assert rank_placement(Layout(tp=4)) == ["replica 0: GPUs 0,1,2,3"]
    assert rank_placement(Layout(tp=1, dp=2)) == ["replica 0: GPUs 0", "replica 1: GPUs 1"]


def test_the_report_places_each_layouts_ranks_and_shows_each_gpus_memory():
    from infopt.report.layout_text import measured_layout_lines
    from infopt.specs.serving import with_knobs
    from infopt.specs.trial import TrialSpec
    from tests.unit.test_climb_golden import trial

    cfg = with_knobs(CONTROL, {"tensor_parallel_size": 2, "data_parallel_size": 2})
    spec = TrialSpec(trial_id="t05-TP2_DP2-r1", role=TrialRole.TUNING, config=cfg,
                     changes=[], value="TP2_DP2", repeat=1)
    gib = 2**30
    t = trial(spec, 250.0).model_copy(update={
        "gpu_memory_by_device_bytes": {0: 70 * gib, 1: 70 * gib, 2: 71 * gib, 3: 69 * gib}})
    one = trial(TrialSpec(trial_id="t00-baseline-r1", role=TrialRole.BASELINE, config=CONTROL,
                          changes=[], value="baseline", repeat=1), 100.0)
    text = "\n".join(measured_layout_lines([one, t]))
    assert "t00-baseline" not in text  # one GPU, no NVML reading: nothing to place
    assert ("| t05-TP2_DP2-r1 | TP=2 DP=2 | replica 0: GPUs 0,1<br>replica 1: GPUs 2,3 | "
            "GPU 0: 70.0, GPU 1: 70.0, GPU 2: 71.0, GPU 3: 69.0 | 71.0 | 250 |") in text
    assert "vllm: vllm/distributed/parallel_state.py" in text  # the engine's own source
