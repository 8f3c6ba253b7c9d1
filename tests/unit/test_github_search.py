"""Upstream issue search against a local fake of GitHub's search API (real HTTP, real httpx)."""

from __future__ import annotations

import socket

from infopt.troubleshoot.diagnose import diagnose_text
from infopt.troubleshoot.github import search_issues, search_terms
from tests.githubserver import FakeGitHub

KV_ERROR = ("ValueError: The model's max seq len (29000) is larger than the maximum number of "
            "tokens that can be stored in KV cache (23648). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len`")


def test_search_terms_drop_volatile_parts():
    terms = search_terms(KV_ERROR)
    assert "29000" not in terms and "23648" not in terms
    assert terms.startswith("ValueError The model max seq len")


def test_ranked_results_and_token_header():
    with FakeGitHub(token="ghp_test") as gh:
        out = search_issues(KV_ERROR, "vllm", base_url=gh.url, token="ghp_test",
                            token_to_url=True)
        assert out.matches and out.matches[0].url.endswith("vllm-project/vllm/issues/10517")
        assert out.matches[0].score > 0.5 and out.status.startswith("github: ")
        assert gh.requests[0]["auth"] == "Bearer ghp_test"
        assert "repo:vllm-project/vllm" in gh.requests[0]["query"].replace("%3A", ":").replace(
            "%2F", "/")


def test_rate_limit_stops_and_says_so():
    with FakeGitHub(rate_limit_after=0) as gh:
        out = search_issues(KV_ERROR, "vllm", base_url=gh.url)
        assert out.matches == [] and "rate limited" in out.status
        assert len(gh.requests) == 1  # no hammering after the limit


def test_bad_token_is_reported():
    with FakeGitHub(token="right") as gh:
        out = search_issues(KV_ERROR, "vllm", base_url=gh.url, token="wrong", token_to_url=True)
        assert "401" in out.status


def test_offline_means_catalog_only():
    with socket.socket() as s:  # a port that is certainly closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = search_issues(KV_ERROR, "vllm", base_url=f"http://127.0.0.1:{port}", timeout_s=2)
    assert out.matches == [] and out.status.startswith("offline:") and "catalog only" in out.status
    d = diagnose_text(KV_ERROR, "vllm", search=True, github_url=f"http://127.0.0.1:{port}")
    assert d.search.startswith("offline:")


def test_each_engine_names_its_upstream_repository():
    from infopt.troubleshoot.github import upstream_repos

    assert upstream_repos("vllm") == ["vllm-project/vllm"]
    assert upstream_repos("llamacpp") == ["ggml-org/llama.cpp"]
    assert len(upstream_repos("unknown")) == 5  # an unknown engine: every engine's
