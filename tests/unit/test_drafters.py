"""The drafter search (infopt.model.drafters) against the fake hub over real HTTP: which
repositories it verifies as drafters of Qwen3-8B from their metadata, which it turns down and
why; the native MTP layers read from real configs; and the drafters as the ladder sees them."""

from __future__ import annotations

import json

import pytest

from infopt.model.drafters import ladder_drafters, native_mtp, search_drafters
from tests.fixture_data import MODEL_CONFIGS
from tests.hubserver import DRAFTERS, FakeHub

QWEN = "Qwen/Qwen3-8B"


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    with FakeHub(extra_roots=(DRAFTERS,)) as hub:
        said: list[str] = []
        result = search_drafters(QWEN, cache_dir=tmp_path_factory.mktemp("c"),
                                 endpoint=hub.endpoint, say=said.append)
        # Metadata only: no weight file was downloaded whole (safetensors headers by Range).
        whole = [r for r in hub.requests if r["path"].endswith(".safetensors")
                 and not r.get("range")]
    assert not whole and said and "to check" in said[0]
    return result


def test_verified_drafters_each_say_what_was_checked(found):
    got = {f.repo_id: f for f in found.drafters}
    assert set(got) == {"Qwen/Qwen3-0.6B", "AngelSlim/Qwen3-8B_eagle3",
                        "RedHatAI/Qwen3-8B-speculator.eagle3"}
    small = got["Qwen/Qwen3-0.6B"]
    assert small.kind == "draft_model" and "same tokenizer.json" in small.why
    assert got["AngelSlim/Qwen3-8B_eagle3"].kind == "eagle3"
    assert "declares base_model Qwen/Qwen3-8B" in got["AngelSlim/Qwen3-8B_eagle3"].why
    assert "verifier names Qwen/Qwen3-8B" in got["RedHatAI/Qwen3-8B-speculator.eagle3"].why
    assert all(f.commit_sha for f in found.drafters)
    assert found.native_mtp is None  # Qwen3-8B has no MTP layers


def test_lookalikes_are_turned_down_with_the_reason(found):
    why = {f.repo_id: f.why for f in found.rejected}
    assert "trained for Qwen/Qwen3-8B-FP8" in why["nm-testing/Qwen3-8B-FP8-speculator.eagle3"]
    assert "vocabulary 128256" in why["mixup/Qwen3-8B-eagle3-llama-vocab"]
    # The same tokenizer but the same size: drafting with it costs as much as the target.
    assert "above the 25%" in why["Qwen/Qwen3-8B-Base"]
    assert "not accessible" in why["acme-research/Qwen3-8B-AWQ"]  # gated: recorded, not fatal


def test_the_ladder_gets_the_best_kinds_first(found):
    drafters = ladder_drafters(found, local={"Qwen/Qwen3-0.6B": "/models/qwen3-0.6b"})
    assert [d.kind for d in drafters] == ["eagle3", "eagle3", "draft_model"]
    assert drafters[-1].path == "/models/qwen3-0.6b" and drafters[0].path is None
    assert drafters[0].source and drafters[0].why.startswith(drafters[0].source + "@")


@pytest.mark.parametrize("config, key", [
    ("deepseek-ai__DeepSeek-V3.json", "num_nextn_predict_layers=1"),
    ("deepseek-ai__DeepSeek-V3.2.json", "num_nextn_predict_layers=1"),
    ("Qwen__Qwen3.5-397B-A17B.json", "mtp_num_hidden_layers=1"),
])
def test_native_mtp_layers_are_read_from_the_models_own_config(config, key):
    mtp = native_mtp(json.loads((MODEL_CONFIGS / config).read_text()))
    assert mtp is not None and mtp.kind == "mtp" and mtp.path is None and key in mtp.why


def test_no_mtp_layers_no_native_drafter():
    assert native_mtp(json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text())) is None
    assert native_mtp({"num_nextn_predict_layers": 0}) is None and native_mtp(None) is None


def test_the_report_lists_what_was_verified_and_what_was_turned_down(found):
    from infopt.report.speculation_text import drafter_search_lines

    text = "\n".join(drafter_search_lines(found))
    assert "**draft_model** `Qwen/Qwen3-0.6B@" in text and "No weights were downloaded" in text
    assert "turned down: `mixup/Qwen3-8B-eagle3-llama-vocab` (eagle3)" in text
    assert drafter_search_lines(None) == []
