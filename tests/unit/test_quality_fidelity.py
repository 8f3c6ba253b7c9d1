"""Token fidelity math and the quality verdict, on constructed scores with known answers, and
the refusal paths of teacher forcing against a fake llama-server that misbehaves."""

from __future__ import annotations

import math
import random

import pytest

from infopt.engines import endpoint_for, identify_engine
from infopt.quality.check import check_quality, quality_endpoint
from infopt.quality.fidelity import coarse_kl, fidelity
from infopt.quality.gate import quality_verdict
from infopt.quality.teacher import build_reference, score_candidate
from infopt.specs.base import InfoptError, InputError
from infopt.specs.quality import PositionScore, ReferenceSet, ScoredSequence, TokenLogprob
from tests.fakellama import FakeLlama


def _pos(token: int, dist: dict[int, float], k: int = 3) -> PositionScore:
    top = sorted(dist.items(), key=lambda kv: -kv[1])[:k]
    return PositionScore(token_id=token, logprob=math.log(dist[token]),
                         top=[TokenLogprob(token_id=t, logprob=math.log(p)) for t, p in top])


def _seq(positions, name="p") -> ScoredSequence:
    return ScoredSequence(prompt_name=name, prompt_text=name, prompt_ids=[1],
                          continuation=[p.token_id if p else 0 for p in positions],
                          positions=positions)


SHARP = {0: 0.7, 1: 0.2, 2: 0.05, 3: 0.05}
FLIPPED = {0: 0.3, 1: 0.6, 2: 0.05, 3: 0.05}


def _ref(seqs) -> ReferenceSet:
    return ReferenceSet(endpoint="ref", top_k=3, sequences=seqs, self_agreement=1.0)


def test_identical_scores_are_perfect_fidelity():
    seq = _seq([_pos(0, SHARP)] * 10)
    f = fidelity(_ref([seq]), [seq], "cand")
    assert (f.top1_agreement, f.perplexity_ratio, f.delta_p_mean) == (1.0, 1.0, 0.0)
    assert f.kl_lower_bound_mean_nats == pytest.approx(0.0, abs=1e-12)
    assert f.first_divergence == [None] and f.positions == 10
    assert f.top1_interval.low < 1.0 == f.top1_interval.high  # 10 samples cannot prove 100%


def test_flipped_positions_count_and_mark_the_first_divergence():
    ref = _seq([_pos(0, SHARP)] * 8)
    cand = _seq([_pos(0, SHARP)] * 3 + [_pos(0, FLIPPED)] * 2 + [_pos(0, SHARP)] * 3)
    f = fidelity(_ref([ref]), [cand], "cand")
    assert f.top1_agreement == pytest.approx(6 / 8)
    assert f.first_divergence == [3]
    assert f.delta_p_mean == pytest.approx(2 * (0.3 - 0.7) / 8)
    assert f.perplexity_ratio == pytest.approx(math.exp(2 * math.log(0.7 / 0.3) / 8))
    assert f.top1_interval.low < 0.75 < f.top1_interval.high


def test_unscored_positions_are_left_out_and_counted():
    ref = _seq([_pos(0, SHARP), _pos(0, SHARP), _pos(0, SHARP)])
    cand = _seq([_pos(0, SHARP), None, _pos(0, FLIPPED)])
    f = fidelity(_ref([ref]), [cand], "cand")
    assert (f.positions, f.unscored_positions, f.top1_agreement) == (2, 1, 0.5)


def test_coarse_kl_is_a_lower_bound_on_the_full_kl():
    rng = random.Random(3)
    for _ in range(200):
        p = [rng.random() ** 3 for _ in range(12)]
        q = [max(1e-9, x + rng.gauss(0, 0.05)) for x in p]
        p = {i: x / sum(p) for i, x in enumerate(p)}
        q = {i: x / sum(q) for i, x in enumerate(q)}
        full = sum(p[i] * math.log(p[i] / q[i]) for i in p)
        tok = max(p, key=p.get)
        assert coarse_kl(_pos(tok, p, k=4), _pos(tok, q, k=4)) <= full + 1e-9


def _fid(agreement: float, ppl: float, dp: float = 0.0, n: int = 1000):
    from scipy.stats import binomtest

    from infopt.specs.quality import Interval

    seq = _seq([_pos(0, SHARP)] * 4)
    f = fidelity(_ref([seq]), [seq], "x")
    ci = binomtest(round(agreement * n), n).proportion_ci(0.95, method="wilson")
    return f.model_copy(update={"top1_agreement": agreement, "perplexity_ratio": ppl,
                                "delta_p_mean": dp, "positions": n,
                                "top1_interval": Interval(low=ci.low, high=ci.high)})


def test_verdict_thresholds_are_deltas_from_the_floor():
    floor = _fid(0.99, 1.001)
    ok = quality_verdict(_fid(0.985, 1.02), floor, tolerance=0.02)  # 95% 97.6-99.1%
    assert ok.passed and ok.decision == "pass", ok.summary
    bad = quality_verdict(_fid(0.95, 1.02), floor, tolerance=0.02)  # 95% 93.5-96.2%
    assert not bad.passed
    assert [m.measure for m in bad.measures if not m.passed] == ["top1_agreement"]
    assert "top-1 agreement" in bad.summary
    worse = quality_verdict(_fid(0.99, 1.05), floor, tolerance=0.02)
    assert [m.measure for m in worse.measures if not m.passed] == ["perplexity_ratio"]
    # An interval that straddles the threshold decides nothing: undecided, and not a pass
    # (issue 30: the gate used to wave it through as "within its noise").
    for edge in (quality_verdict(_fid(0.965, 1.0, n=200), floor, tolerance=0.02),
                 quality_verdict(_fid(0.975, 1.02), floor, tolerance=0.02)):
        assert edge.decision == "undecided" and not edge.passed
        assert edge.measures[0].undecided and "undecided" in edge.summary


def test_verdict_without_a_floor_says_so():
    v = quality_verdict(_fid(1.0, 1.0), None, tolerance=0.01)
    assert v.passed and "no noise floor" in v.summary


def test_the_toy_server_scores_itself_perfectly_and_is_identified():
    with FakeLlama() as fake:
        assert str(identify_engine(fake.base_url)) == "llamacpp"
        end = quality_endpoint(fake.base_url, None, None)
        assert end.model == "toy"
        # 16 tokens a prompt: 128 or 256 agreeing positions cannot show 98% at 98.3% (Wilson's
        # lower bounds 95.7%, 97.8%); the gate adds prompts until 512 do (98.9%).
        ref, verdict = check_quality(end, end, floor=end, tokens=16, top_k=4)
        assert ref.self_agreement == 1.0 and verdict.passed, verdict.summary
        assert verdict.looks == [8, 16, 32] and len(ref.sequences) == 32
        assert verdict.candidate.positions == 16 * 32
        # With 6 tokens a prompt, 32 prompts (192 positions) still cannot: undecided, exit 1.
        _, short = check_quality(end, end, floor=end, tokens=6, top_k=4)
        assert short.decision == "undecided" and not short.passed


@pytest.mark.parametrize("mode, says", [
    ("ignores_bias", "logit_bias was not honoured"),
    ("other_tokenizer", "another tokenizer"),
])
def test_a_candidate_that_does_not_score_what_was_asked_is_refused(mode, says):
    with FakeLlama() as good, FakeLlama(mode) as bad:
        ref = build_reference(endpoint_for("llamacpp", good.base_url, "toy"), tokens=6)
        # Tokens the toy would not pick greedily: only a server honouring the bias scores them.
        ref.sequences[0].continuation[:] = [(t + 5) % 64 for t in ref.sequences[0].continuation]
        with pytest.raises(InfoptError, match=says):
            score_candidate(endpoint_for("llamacpp", bad.base_url, "toy"), ref)


def test_a_reference_whose_scores_do_not_reproduce_its_greedy_tokens_is_refused():
    with FakeLlama("noisy") as bad, pytest.raises(InputError, match="garbage"):
        build_reference(endpoint_for("llamacpp", bad.base_url, "toy"), tokens=6)


def test_an_unknown_server_and_an_unreachable_one_are_one_paragraph_errors(tmp_path):
    with pytest.raises(InputError, match="neither a llama-server"):
        quality_endpoint("http://127.0.0.1:9", "m", None)
    with pytest.raises(InputError, match="cannot reach"):
        build_reference(endpoint_for("llamacpp", "http://127.0.0.1:9", "m"))
    with pytest.raises(InputError, match="no exact teacher forcing"):
        build_reference(endpoint_for("trtllm", "http://127.0.0.1:9", "m"))
