import pytest
from pydantic import ValidationError

from infopt.specs.serving import LlamaCppConfig, VllmConfig, with_knob
from infopt.specs.workload import Objective, fixed_levels


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
    with pytest.raises(ValidationError, match="peak_active_generations 4 is the target load"):
        fixed_levels(input_tokens=8, output_tokens=8, levels=[1, 2], target=4, requests=4)
    with pytest.raises(ValidationError, match="single stream"):
        fixed_levels(input_tokens=8, output_tokens=8, levels=[4], target=4, requests=4,
                     objective=Objective.LATENCY)
    w = fixed_levels(input_tokens=8, output_tokens=8, levels=[1, 4], target=4, requests=4)
    # Each level warms every slot once: the sweep's closed loops warm up their concurrency.
    assert [s.warmup_count() for s in w.scenarios()] == [1, 4]
    assert [s.seed for s in w.scenarios()] == [0, 1]  # no two scenarios send the same lengths
