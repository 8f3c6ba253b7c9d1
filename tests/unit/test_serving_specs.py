import pytest
from pydantic import ValidationError

from infopt.specs.serving import LlamaCppConfig, VllmConfig, with_knob
from infopt.specs.workload import Objective, Workload


def test_with_knob_revalidates_and_keeps_type():
    cfg = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192)
    out = with_knob(cfg, "parallel_slots", 4)
    assert isinstance(out, LlamaCppConfig) and out.parallel_slots == 4
    # Each slot keeps the full native context: total context scales with slots.
    assert out.ctx_total_tokens == 4 * 8192
    assert cfg.parallel_slots == 1  # original untouched


def test_unknown_knob_is_an_error_not_a_silent_drop():
    cfg = VllmConfig(model_path="/m", max_model_len=4096)
    with pytest.raises(ValueError, match="no knob 'parallel_slots'"):
        with_knob(cfg, "parallel_slots", 2)
    with pytest.raises(ValidationError):
        LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192, max_num_seqs=4)


def test_bad_knob_value_is_rejected():
    cfg = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192)
    with pytest.raises(ValidationError):
        with_knob(cfg, "parallel_slots", 0)
    with pytest.raises(ValidationError):
        with_knob(cfg, "cache_type_k", "fp8")


def test_workload_validation_names_the_field():
    with pytest.raises(ValidationError, match="target_concurrency"):
        Workload(concurrency_levels=[1, 2], target_concurrency=4)
    with pytest.raises(ValidationError, match="single stream"):
        Workload(concurrency_levels=[4], target_concurrency=4, objective=Objective.LATENCY)
    assert Workload().warmup_for(4) == 4
