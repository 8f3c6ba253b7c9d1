"""Root errors of real upstream startup failures (tests/fixtures/engine_logs, each with its
URL) for engines that cannot run here: the first cause, its category and its catalog entry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infopt.specs.diagnosis import FailureCategory
from infopt.troubleshoot.diagnose import diagnose_text, load_catalog

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "engine_logs"
INDEX = json.loads((LOGS / "index.json").read_text())


@pytest.mark.parametrize("case", INDEX, ids=[c["file"] for c in INDEX])
def test_recorded_log_root_error(case):
    d = diagnose_text((LOGS / case["file"]).read_text(), case["engine"])
    assert case["expected_root_error_contains"] in d.root_error, (case["url"], d.root_error)
    assert d.category is FailureCategory(case["expected_category"]), case["url"]
    assert case["known_failure_id"] in d.known_failure_ids
    assert any(m.url for m in d.matches)  # the upstream issue(s) come with the diagnosis


def test_catalog_is_seeded_from_real_upstream_issues():
    cat = load_catalog()
    assert len(cat) >= 15
    assert len({u for k in cat for u in k.urls}) >= 15
    for k in cat:
        re.compile(k.pattern)
        assert k.urls and all(u.startswith("https://github.com/") for u in k.urls), k.id
        for r in k.remedies:
            # A change that shrinks context or concurrency never claims to keep the contract.
            if any(w in r.change.lower() for w in ("decrease max_model_len", "lower max_model_len",
                                                   "reduce max_model_len")):
                assert not r.preserves_contract, (k.id, r.change)
