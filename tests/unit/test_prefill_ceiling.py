"""Prefill beside decode in each trial (issue 50): the single-stream prompt rate (mean prompt /
TTFT p50 at concurrency 1) against the prefill ceiling of one such prompt for the trial's
weights and tensor parallelism, with the bound it predicts; on a GPU the theoretical entry also
carries the TTFT estimate's rate (rough, labelled). The benchmark is the real llama.cpp fixture
report's (CPU times standing in for a GPU run: the arithmetic is tested, not the values); the
host a recorded 8x H100 SXM."""

from __future__ import annotations

import pytest

from infopt.costmodel.roofline import prefill_row
from infopt.costmodel.weights import BF16
from infopt.specs.fit import Envelope
from infopt.tuning.candidates import run_device
from infopt.tuning.level_steps import mean_lengths
from infopt.tuning.prefill_ceiling import prefill_ceilings
from tests.unit.test_layout_ceilings import _model, _vllm, bench, h100x8  # noqa: F401

MODEL = "meta-llama__Llama-3.1-8B-Instruct.json"


def test_the_single_stream_prompt_rate_against_its_prefill_ceiling(bench, h100x8):  # noqa: F811
    m = _model(MODEL)
    got = prefill_ceilings(m, h100x8, _vllm(), bench)
    [theory] = [r for r in got if r.envelope is Envelope.THEORETICAL]
    prompt = mean_lengths(bench)[0]
    ttft = next(lvl.ttft_s.p50 for lvl in bench.levels if lvl.concurrency == 1)
    assert theory.measured == pytest.approx(prompt / ttft)
    row = prefill_row(m.inspection, BF16, "auto", prompt, run_device(h100x8)[0],
                      Envelope.THEORETICAL)
    assert theory.ceiling == pytest.approx(row.tokens_per_s)
    assert theory.ratio == pytest.approx(theory.measured / theory.ceiling)
    assert "bound" in theory.note and "lower bound on the prefill's own rate" in theory.note
    # the TTFT estimate's rate: below the ceiling (overhead + floor / fraction <= 1)
    assert 0 < theory.attainable < theory.ceiling
    assert "published single-stream TTFTs" in theory.attainable_note
    # TP2 splits the prompt's compute: a higher ceiling, the same measured rate
    [tp2] = [r for r in prefill_ceilings(m, h100x8, _vllm(tensor_parallel_size=2), bench)
             if r.envelope is Envelope.THEORETICAL]
    assert tp2.ceiling > theory.ceiling and tp2.measured == theory.measured


def test_no_single_stream_level_no_prefill_ratio(bench, h100x8):  # noqa: F811
    moved = [s.model_copy(update={"level": s.level.model_copy(update={
        "concurrency": s.level.concurrency + 1})}) for s in bench.scenarios]
    assert prefill_ceilings(_model(MODEL), h100x8, _vllm(),
                            bench.model_copy(update={"scenarios": moved})) == []
