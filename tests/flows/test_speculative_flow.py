"""Speculative decoding climbed for real on llama-server (issue 33): a Q8_0 made here from the
bundled SmolLM2 is the model, the bundled Q4_1 its draft model (named in model.draft_models:
the same tokenizer, ~56% of the bytes), one user. The speculative step tries n-gram drafting
and the draft model, each a series over 2, 4 and 8 draft tokens, and every draft-model trial
reports how many drafted tokens the target accepted, from llama-server's own per-request
timings. Which candidate wins is this CPU's call and is not asserted (recorded here on the
AVX2 EPYC: see docs/measurements.md)."""

from __future__ import annotations

import pytest

from infopt.bootstrap import default_paths
from infopt.engines.quantize import requantize
from infopt.specs.base import InputError
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
from infopt.specs.workload import fixed_levels

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(1500)]

DRAFT = "spec=draft_model-SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_draft_model_and_ngrams_are_climbed_by_draft_length(prefect_api, tmp_path):
    from flows.optimize import optimize

    paths = default_paths()
    if not paths.gguf.exists():
        pytest.fail("bundled model missing: run `make engines`")
    q8 = requantize(paths.llama_quantize, paths.gguf, tmp_path / "Q8_0.gguf", "Q8_0")
    wl = fixed_levels(input_tokens=48, output_tokens=32, levels=[1], target=1, requests=4,
                      cooldown_s=0.5)
    request = OptimizeRequest(
        model=ModelTarget(path=str(q8), draft_models=[str(paths.gguf)]), engines=["llamacpp"],
        workload=wl.traffic, objective=wl.objective, budgets=Budgets(repeats=2, max_rounds=2,
                                                                        max_window_scale=1.0),
        scenarios=[], quality_task_items=0, quality_max_prompts=8,
        dimensions=["speculative"], github_search=False)
    report = optimize(request=request, runs_dir=str(tmp_path / "runs"))

    step = next(s for s in report.ladder.steps if s.dimension.value == "speculative")
    labels = {c.candidate.label for c in step.candidates}
    assert {"spec=ngram-2", f"{DRAFT}-2"} <= labels, labels
    drafting = [t for t in report.trials if t.value and t.value.startswith(DRAFT)
                and t.benchmark is not None]
    assert drafting, [(t.trial_id, t.failed) for t in report.trials]
    for t in drafting:
        assert f"-md {paths.gguf}" in t.engine.command and "--spec-draft-n-max" in t.engine.command
        level = t.benchmark.levels[0]
        assert level.lengths_not_reached == 0
        # The same model at fewer bits: most of its greedy drafts are the target's own tokens.
        assert level.draft_counts_source is None  # llama-server's per-request timings
        assert level.draft_acceptance is not None and level.draft_acceptance > 0.5, t.trial_id
    md = (tmp_path / "runs" / report.run_id / "report.md").read_text()
    assert "## Speculative decoding (measured)" in md and DRAFT in md


def test_a_draft_model_of_another_tokenizer_is_refused_where_the_request_is_read(tmp_path):
    from infopt.model.drafters import check_draft_models
    from infopt.model.profile import profile_model

    target = profile_model(str(default_paths().gguf))
    other = target.model_copy(update={"inspection": target.inspection.model_copy(
        update={"vocab_size": target.inspection.vocab_size + 1})})
    with pytest.raises(InputError, match=r"draft_models\[0\].*vocabulary of 49,152 tokens "
                                         r"against the model's 49,153"):
        check_draft_models([str(default_paths().gguf)], other)
    with pytest.raises(InputError):
        check_draft_models([str(tmp_path / "missing.gguf")], target)
