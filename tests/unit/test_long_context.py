"""The long-context check's pure parts: where its windows lie, how they are fitted with the
server's own tokenizer, how a reference that refuses the length is backed off, which changes
require it, the planted degradation, and the report's table."""

from __future__ import annotations

import pytest

from infopt.engines.scoring import ScoringError
from infopt.quality.long_context import (
    LONG_SHARE,
    WINDOW_TOKENS,
    build_long_reference,
    long_check_reason,
    window_plan,
    window_prompts,
)
from infopt.quality.long_document import entries, question, window_text
from infopt.report.quality_text import long_markdown
from infopt.specs.endpoint import Endpoint, TokenScoring
from infopt.specs.quality import (
    FidelityResult,
    Interval,
    LongContextCheck,
    PositionScore,
    QualityVerdict,
    TokenLogprob,
)
from infopt.specs.serving import LlamaCppConfig
from tests.sim.degrading_scorer import degrade


def _words(text: str) -> list[int]:
    """A stand-in tokenizer: one id per whitespace-separated word."""
    return [hash(w) % 50_000 for w in text.split()]


@pytest.mark.parametrize("context", [2048, 8192, 32_768, 131_072])
def test_windows_start_at_half_the_context_and_leave_room_for_the_continuation(context):
    plan = window_plan(context)
    assert plan.targets[0] == context * LONG_SHARE
    assert list(plan.targets) == sorted(set(plan.targets))
    assert plan.targets[-1] <= plan.limit and plan.limit + WINDOW_TOKENS < context


def test_a_context_too_short_for_a_long_check_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="too short for a long-context check"):
        window_plan(300)


def test_each_window_is_fitted_between_its_target_and_the_limit_by_the_tokenizer():
    plan = window_plan(4096)
    prompts = window_prompts(plan, _words)
    assert len(prompts) == len(plan.targets)
    for (name, text), target in zip(prompts.items(), plan.targets, strict=True):
        n = len(_words(text))
        assert target <= n <= plan.limit, (name, n)
        assert name.endswith(f"{n}tok")
        assert "returned to the harbour" in text[-200:]  # each ends recalling an early entry
    # Fixed by the seed: the reference and every candidate score the same text.
    assert window_prompts(plan, _words) == prompts


def test_the_record_is_varied_and_its_questions_point_far_back():
    doc = entries(200)
    assert len({e.text for e in doc}) == 200
    assert len({(e.name, e.city, e.year) for e in doc}) > 150
    text = window_text(doc, 150, doc[2])
    assert text.index(doc[2].text) < len(text) // 20  # the answer lies in the first 5%
    assert text.endswith(question(doc[2], 151))
    assert "Entry 151." in question(doc[2], 151)
    assert f"entry {doc[2].n}" in question(doc[2], 151) and doc[2].name in question(doc[2], 151)


def _scoring(max_prompt: int) -> TokenScoring:
    """A server that tokenizes by words and refuses prompts longer than `max_prompt`."""
    def generate(client, base, model, ids, n):
        if len(ids) > max_prompt:
            raise ScoringError(f"HTTP 400: the request exceeds the available context size "
                               f"({len(ids)} > {max_prompt})")
        return [7] * n

    def score(client, base, model, ids, cont, k):
        return [PositionScore(token_id=t, logprob=-0.1,
                              top=[TokenLogprob(token_id=t, logprob=-0.1)]) for t in cont]

    return TokenScoring(tokenize=lambda c, b, m, text: _words(text), generate=generate,
                        score=score, how="test")


def test_a_reference_that_refuses_the_length_is_halved_and_the_check_says_so():
    endpoint = Endpoint(base_url="http://127.0.0.1:9", model="m", scoring=_scoring(2600))
    long = build_long_reference(endpoint, 8192)
    assert long.reference is not None and long.served_context_tokens == 8192
    assert 2048 <= min(long.prompt_tokens) and max(long.prompt_tokens) <= 2600
    assert long.shortened is not None and "4096-token prompts refused" in long.shortened


def test_a_reference_that_refuses_every_long_length_gives_the_reason():
    endpoint = Endpoint(base_url="http://127.0.0.1:9", model="m", scoring=_scoring(200))
    with pytest.raises(ValueError, match="too short.*tried: 4096-token prompts refused"):
        build_long_reference(endpoint, 8192)


def _cfg(**knobs) -> LlamaCppConfig:
    return LlamaCppConfig(model_path="/m/model.Q4_1.gguf", served_model_name="m",
                          ctx_per_slot_tokens=4096, **knobs)


def test_only_a_change_of_kv_precision_or_weights_needs_the_check():
    base = _cfg(parallel_slots=4)
    kv = long_check_reason(_cfg(parallel_slots=4, cache_type_k="q4_0", cache_type_v="q4_0"),
                           base)
    assert kv is not None and kv.startswith("KV precision") and "f16 -> q4_0" in kv
    weights = long_check_reason(base.model_copy(update={"model_path": "/v/model.Q8_0.gguf"}),
                                base)
    assert weights == "weights (model.Q4_1.gguf -> model.Q8_0.gguf)"
    assert long_check_reason(_cfg(parallel_slots=8), base) is None  # scheduling: its numerics
    assert long_check_reason(_cfg(cache_type_k="q8_0"), None) is None  # the control: reference


def _answer(top1: int, top2: int) -> dict:
    return {"completion_probabilities": [{"id": top1, "logprob": -0.2, "top_logprobs": [
        {"id": top1, "logprob": -0.2}, {"id": top2, "logprob": -1.9},
        {"id": 3, "logprob": -4.0}]}]}


def test_the_planted_degradation_swaps_the_top_two_past_its_length_only():
    hits = [degrade(_answer(11, 12), n, after=1000) for n in range(1001, 1101)]
    changed = [h for h in hits if h is not None]
    assert 30 < len(changed) < 70  # about half of the positions, fixed by position
    c = changed[0]["completion_probabilities"][0]
    assert [t["id"] for t in c["top_logprobs"]] == [12, 11, 3]
    assert c["logprob"] == -1.9 and c["id"] == 11  # the forced token, now second
    assert "SIMULATED" in changed[0]["infopt_simulated"]
    assert all(degrade(_answer(11, 12), n, after=1000) is None for n in range(900, 1001))


def _fid(agree: float) -> FidelityResult:
    return FidelityResult(endpoint="e", prompts=8, positions=512, unscored_positions=0,
                          top1_agreement=agree, top1_interval=Interval(low=agree - .03,
                                                                      high=agree + .02),
                          delta_p_mean=-0.01, delta_p_p05=-0.1, perplexity_ratio=1.2,
                          kl_lower_bound_mean_nats=0.05, first_divergence=[None] * 8)


def test_the_report_lists_each_long_check_with_its_change_and_verdict():
    verdict = QualityVerdict(passed=False, decision="fail", candidate=_fid(0.55), floor=_fid(1.0),
                             tolerance=0.02, measures=[], summary="quality regressed: x")
    check = LongContextCheck(reason="KV precision (cache_type_k f16 -> q4_0)",
                             served_context_tokens=8192, prompt_tokens=[4100, 4990],
                             verdict=verdict)
    text = "\n".join(long_markdown([("`t3` (kv_precision=kv=q4_0)", check)]))
    assert "4,100-4,990 tokens of the 8,192-token served context" in text
    assert "| `t3` (kv_precision=kv=q4_0) | KV precision (cache_type_k f16 -> q4_0) | 512 | " \
           "55.0%" in text
    assert long_markdown([]) == []


def test_a_reference_that_does_not_start_for_the_windows_records_why(tmp_path, monkeypatch):
    from contextlib import contextmanager

    from infopt.quality import gate_run
    from infopt.quality.long_run import long_note, long_reference_path, windows_missing
    from infopt.specs.base import EngineStartError

    @contextmanager
    def no_start(*args, **kwargs):
        raise EngineStartError("llama-server exited with code 1 before becoming ready\nmore")
        yield  # pragma: no cover

    monkeypatch.setenv("INFOPT_QUALITY_CACHE_DIR", str(tmp_path / "memo"))
    monkeypatch.setattr(gate_run, "engine_session", no_start)
    ref = tmp_path / "reference-abc.json"
    assert windows_missing(str(ref), 8192)
    gate_run.build_long_windows(LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192),
                               str(ref), 1, 8192)
    # Recorded: no trial tries again, and the report says the check could not run.
    assert not windows_missing(str(ref), 8192)
    note = long_note(long_reference_path(ref, 8192))
    assert note is not None and "could NOT run" in note
    assert "did not start (llama-server exited with code 1 before becoming ready)" in note
