"""Speculative counters read around a scenario (infopt.loadgen.spec_counters): Prometheus text
summed over label sets, the difference folded into the level, the mean accepted length from
the steps counter or the server's own figure; nothing where nothing was read."""

from __future__ import annotations

import pytest

from infopt.loadgen.spec_counters import parse_counter, with_counted_drafts
from infopt.loadgen.summary import summarize_level
from infopt.specs.results import RequestRecord

TEXT = """# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 120.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 9
"""


def _level():
    rec = RequestRecord(request_id="r", concurrency=1, ok=True, prompt_tokens=8,
                        output_tokens=5, output_tokens_requested=5, ttft_s=0.1, e2e_s=0.5,
                        itl_s=[0.1] * 4, content_chunks=5)
    return summarize_level([rec], 1, 1.0)


def test_counters_are_summed_over_label_sets_and_a_longer_name_is_not_taken():
    assert parse_counter(TEXT, "vllm:spec_decode_num_draft_tokens_total") == 150.0
    assert parse_counter(TEXT, "vllm:spec_decode_num_accepted_tokens_total") is None


def test_the_scenarios_difference_and_the_mean_accepted_length():
    level = with_counted_drafts(_level(), (100.0, 50.0, 40.0), (300.0, 170.0, 100.0))
    assert (level.draft_tokens_total, level.draft_tokens_accepted_total) == (200, 120)
    assert level.draft_acceptance == pytest.approx(0.6)
    assert level.spec_accept_length == pytest.approx(1 + 120 / 60)
    assert level.draft_counts_source.startswith("engine counters")
    # No steps counter: counts, no length; the server's own length: taken as given.
    assert with_counted_drafts(_level(), (0, 0, None), (10, 5, None)).spec_accept_length is None
    assert with_counted_drafts(_level(), None, None, 2.4).spec_accept_length == 2.4
    # Nothing drafted, or nothing read: the level as it was.
    assert with_counted_drafts(_level(), (5, 2, 1), (5, 2, 1)) == _level()
    assert with_counted_drafts(_level(), None, None) == _level()
