"""Routers and replicas read from their own recorded /metrics text: vllm-router 0.1.17's and
sglang-router 0.3.2's per-worker counters, llama-server's prefix-cache counters."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.cluster.evidence import cache_counts, labelled_counter, replica_evidence, routed
from infopt.cluster.routers import (
    SGLANG_ROUTER,
    VLLM_ROUTER,
    Policy,
    router_argv,
    router_kind,
)
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.vllm import adapter as vllm

FIX = Path(__file__).parents[1] / "fixtures" / "cluster"


def test_each_router_names_the_requests_each_replica_got():
    v = routed(VLLM_ROUTER, (FIX / "vllm-router-0.1.17.metrics.txt").read_text())
    s = routed(SGLANG_ROUTER, (FIX / "sglang-router-0.3.2.metrics.txt").read_text())
    assert v == {"http://127.0.0.1:18081": 2.0}
    assert s == {"http://127.0.0.1:18082": 2.0}
    text = 'm{worker="a",outcome="success"} 3\nm{worker="a",outcome="failure"} 1\nm 9\n'
    assert labelled_counter(text, "m", "worker", (("outcome", "success"),)) == {"a": 3.0}


def test_replica_cache_counters_follow_each_engines_semantics():
    text = (FIX / "llama-server.metrics.txt").read_text()
    hits, looked = cache_counts(llamacpp.ADAPTER.prefix_cache_counters, text)
    assert 0 < hits < looked  # computed ("excluding cached") + cached = looked up
    vtext = "vllm:prefix_cache_queries_total{engine=\"0\"} 100\n" \
            "vllm:prefix_cache_hits_total{engine=\"0\"} 40\n"
    assert cache_counts(vllm.ADAPTER.prefix_cache_counters, vtext) == (40.0, 100.0)
    assert cache_counts(vllm.ADAPTER.prefix_cache_counters, "") is None


def test_the_evidence_is_the_difference_over_the_scenario():
    before = 'vllm_router_processed_requests_total{worker="http://a"} 2\n'
    after = ('vllm_router_processed_requests_total{worker="http://a"} 7\n'
             'vllm_router_processed_requests_total{worker="http://b"} 4\n')
    rb = {"http://a": "llamacpp:prompt_tokens_cached_total 10\nllamacpp:prompt_tokens_total 90\n"}
    ra = {"http://a": "llamacpp:prompt_tokens_cached_total 60\nllamacpp:prompt_tokens_total 140\n",
          "http://b": "llamacpp:prompt_tokens_cached_total 0\nllamacpp:prompt_tokens_total 50\n"}
    ev = replica_evidence(VLLM_ROUTER, before, after, rb, ra,
                          llamacpp.ADAPTER.prefix_cache_counters)
    assert [(e.url, e.requests_routed) for e in ev] == [("http://a", 5), ("http://b", 4)]
    assert ev[0].prefix_hit_ratio == pytest.approx(50 / 100) and ev[1].prefix_hit_ratio == 0.0


def test_router_command_lines_come_from_their_own_flags():
    argv = router_argv(VLLM_ROUTER, ["http://127.0.0.1:1", "http://127.0.0.1:2"],
                       Policy.SESSION_HASH, 9000, 9001, bin_dir=Path("/venv/bin"))
    assert argv[:1] == ["/venv/bin/vllm-router"] and "consistent_hash" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    s = router_argv(SGLANG_ROUTER, ["http://x"], Policy.CACHE_AWARE, 9000, 9001,
                    bin_dir=Path("/b"))
    assert s[:2] == ["/b/sglang-router", "launch"]
    with pytest.raises(ValueError, match="no session_hash policy"):
        router_argv(SGLANG_ROUTER, ["http://x"], Policy.SESSION_HASH, 9000, 9001)
    with pytest.raises(ValueError, match="unknown router 'nginx'"):
        router_kind("nginx")
    # The request's router names are the routers infopt knows how to start.
    from infopt.cluster.routers import ROUTERS
    from infopt.specs.cluster import ROUTER_NAMES

    assert set(ROUTERS) == set(ROUTER_NAMES)


def test_a_router_row_pools_the_replicas_cache_counters_and_a_failure_is_a_row():
    from infopt.cluster.evidence import router_failed, router_head, router_row
    from infopt.specs.cluster import ReplicaEvidence
    from infopt.specs.contract import CheckStatus, ContractCheck
    from tests.unit.test_cluster_interference import _measured

    head = router_head(VLLM_ROUTER, Policy.ROUND_ROBIN, 2, "sessions")
    assert head["policy_flag"] == VLLM_ROUTER.policy_name(Policy.ROUND_ROBIN)
    evidence = [ReplicaEvidence(url="a", requests_routed=3, prompt_tokens_from_cache=30,
                                prompt_tokens_looked_up=100),
                ReplicaEvidence(url="b", requests_routed=3, prompt_tokens_from_cache=None,
                                prompt_tokens_looked_up=100)]
    ok = ContractCheck(feature="chat", route="/v1/chat/completions", stream=False,
                       required=True, status=CheckStatus.PASS, detail="")
    row = router_row(head, _measured(0.02, 100.0, 0.1), evidence, [ok], True, "identical")
    assert row.prefix_hit_ratio == 30 / 200 and row.contract_passed and row.failed is None
    broken = router_failed(head, RuntimeError("bind failed\nstack"))
    assert broken.failed == "RuntimeError: bind failed" and broken.requests == 0
