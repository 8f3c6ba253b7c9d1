"""TensorRT-LLM 1.2 faults in what infopt rendered (issue 46, items 2 and 3), each pinned by a
test that failed on the code before the fix; the facts and their sources are recorded in
infopt/engines/data/trtllm-1.2-llm-args.json.

- The PyTorch backend refuses every prompt over max_num_tokens (default 8,192) with HTTP 400
  unless chunked prefill is on (tensorrt_llm/llmapi/llm.py BaseLLM._check_arguments): the
  baseline at a longer native context must turn it on, a lower max_num_tokens must keep it, and
  the control (the defaults) must be seen by the plan as serving 8,192-token prompts only.
- 1.2's MTP runs num_nextn_predict_layers draft tokens (default 1) and overwrites max_draft_len
  with it; its decoding types are DecodingBaseConfig.from_dict's registry keys ("Eagle", not
  "Eagle3"; "DraftTarget"); NGram asserts max_matching_ngram_size > 0, default 0."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from pydantic import ValidationError

from infopt.engines.launch import ServingTarget
from infopt.engines.rules import Drafter, LadderFacts
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.trtllm.rules import prefill, speculative
from infopt.specs.serving import TrtllmSpeculativeOptions, with_knobs
from infopt.tuning.control import control_ineligible
from infopt.tuning.decide import apply

LONG = ServingTarget(model_path="/m/Llama-3.1-8B", served_model_name="Llama-3.1-8B",
                     native_context_tokens=131_072, usable_cpus=16)
SHORT = ServingTarget(model_path="/m/Llama-3.1-8B", served_model_name="Llama-3.1-8B",
                      native_context_tokens=8192, usable_cpus=16)


def facts(**kw) -> LadderFacts:
    base = dict(target_concurrency=8, usable_cpus=16, physical_cores=None, gpu_count=1,
                mean_prompt_tokens=300, mean_output_tokens=64, prefix_reuse=False,
                kv_read_share=0.18)
    return LadderFacts(**{**base, **kw})


def yaml_of(cfg) -> dict:
    (text,) = trtllm.build_launch(cfg, "trtllm-serve", 8000).files.values() or (None,)
    return yaml.safe_load(text) if text is not None else {}


def test_the_baseline_turns_chunked_prefill_on_where_the_context_exceeds_max_num_tokens():
    control, base = trtllm.control_config(LONG), trtllm.baseline_config(LONG)
    assert yaml_of(control) == {}  # the defaults: no options file at all
    assert yaml_of(base) == {"enable_chunked_prefill": True}
    assert control.prompt_cap_tokens == 8192 and base.prompt_cap_tokens is None
    # At a context an iteration already holds, the baseline is the defaults.
    assert trtllm.baseline_config(SHORT) == trtllm.control_config(SHORT)
    assert trtllm.control_config(SHORT).prompt_cap_tokens is None


def test_the_plan_sees_the_defaults_serve_only_max_num_tokens_prompts():
    control, base = trtllm.control_config(LONG), trtllm.baseline_config(LONG)
    assert trtllm.memory_shape(control, 8, False).context_tokens == 8192
    assert trtllm.memory_shape(base, 8, False).context_tokens == 131_072

    def fit(cfg):
        return SimpleNamespace(context_tokens=trtllm.memory_shape(cfg, 8, False).context_tokens)

    def trial(cfg):
        return SimpleNamespace(objective_value=1.0, contract=[], quality=None, config=cfg)

    why = control_ineligible(trial(control), fit, 131_072, [])
    assert why is not None and "8,192 context tokens of the 131,072" in why
    assert control_ineligible(trial(base), fit, 131_072, []) is None


def test_a_lower_max_num_tokens_keeps_the_full_context_servable():
    got = prefill(trtllm.control_config(LONG), facts())
    assert not isinstance(got, str)
    lower = next(c for c in got if c.label.startswith("max_num_tokens="))
    assert lower.changes["extra_llm_api_options.enable_chunked_prefill"] is True
    cfg = apply(trtllm.control_config(LONG), lower)
    assert cfg.prompt_cap_tokens is None and "chunked prefill" in lower.why
    # From the baseline (chunked prefill already on) the candidate changes max_num_tokens only.
    got = prefill(trtllm.baseline_config(LONG), facts())
    assert not isinstance(got, str)
    assert [c.changes for c in got] == [{"max_num_tokens": lower.changes["max_num_tokens"]}]


def test_mtp_candidates_render_their_draft_length_as_num_nextn_predict_layers():
    base = trtllm.baseline_config(LONG)
    got = speculative(base, facts(drafters=(Drafter("mtp", None, why="own layers"),)))
    assert not isinstance(got, str)
    mtp = [c for c in got if c.label.startswith("spec=mtp")]
    assert [c.label for c in mtp] == ["spec=mtp-model-1", "spec=mtp-model-2",
                                      "spec=mtp-model-4"]
    for cand, n in zip(mtp, (1, 2, 4), strict=True):
        doc = yaml_of(apply(base, cand))
        assert doc["speculative_config"] == {"decoding_type": "MTP",
                                             "num_nextn_predict_layers": n}


def test_drafter_and_ngram_candidates_use_the_tags_and_fields_1_2_takes():
    from infopt.engines.trtllm.rules import ngram_pattern_tokens

    base = trtllm.baseline_config(LONG)
    drafters = (Drafter("eagle3", "/d/e3", "o/e3"), Drafter("draft_model", "/d/small", "o/s"))
    got = speculative(base, facts(drafters=drafters, target_concurrency=2))
    assert not isinstance(got, str)
    docs = {c.label: yaml_of(apply(base, c))["speculative_config"] for c in got}
    assert docs["spec=eagle3-e3-2"] == {"decoding_type": "Eagle", "max_draft_len": 2,
                                        "speculative_model": "/d/e3"}
    assert docs["spec=draft_model-s-4"] == {"decoding_type": "DraftTarget",
                                                "max_draft_len": 4,
                                                "speculative_model": "/d/small"}
    assert docs["spec=ngram-8"] == {"decoding_type": "NGram", "max_draft_len": 8,
                                    "max_matching_ngram_size": 3}
    # Upstream's AUTO heuristic (auto_heuristic.py): 3 up to a batch of 4, 5 above.
    assert ngram_pattern_tokens(4) == 3 and ngram_pattern_tokens(5) == 5


@pytest.mark.parametrize("bad, why", [
    ({"decoding_type": "MTP", "max_draft_len": 2}, "num_nextn_predict_layers"),
    ({"decoding_type": "MTP", "num_nextn_predict_layers": 2, "max_draft_len": 2},
     "leave max_draft_len unset"),
    ({"decoding_type": "NGram", "max_draft_len": 2}, "max_matching_ngram_size is required"),
    ({"decoding_type": "Eagle3", "max_draft_len": 2, "speculative_model": "/d"},
     "decoding_type"),
    ({"decoding_type": "Draft_Target", "max_draft_len": 2, "speculative_model": "/d"},
     "decoding_type"),
    ({"decoding_type": "Eagle", "max_draft_len": 2}, "speculative_model is required"),
])
def test_speculative_options_refuse_what_1_2_would_refuse_or_ignore(bad, why):
    with pytest.raises(ValidationError, match=why):
        TrtllmSpeculativeOptions(**bad)


def test_the_draft_length_is_read_from_the_field_that_carries_it():
    mtp = TrtllmSpeculativeOptions(decoding_type="MTP", num_nextn_predict_layers=4)
    ngram = TrtllmSpeculativeOptions(decoding_type="NGram", max_draft_len=3,
                                     max_matching_ngram_size=3)
    assert (mtp.draft_tokens, ngram.draft_tokens) == (4, 3)
    cfg = with_knobs(trtllm.baseline_config(LONG), {
        "extra_llm_api_options.speculative_config.decoding_type": "MTP",
        "extra_llm_api_options.speculative_config.num_nextn_predict_layers": 2})
    assert cfg.speculates and yaml_of(cfg)["enable_chunked_prefill"] is True
