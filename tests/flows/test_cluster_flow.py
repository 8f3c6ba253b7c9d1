"""The cluster flow on the real llama-server, at a small scale: the session's optimize run
(tests/flows/conftest.py) served as one replica (its SLO boundary searched directly) and as two
replicas behind the real vllm-router (round robin and session hashing compared on a session
workload and one without shared prefixes, then the boundary searched behind the router); the
capacity plan calibrated on the one-replica boundary and validated against the two-replica
one. Asserted: the flow's structure and evidence, never speeds; the SLO is loose enough (TTFT
p50 <= 2 s for 48-token prompts at half the rate the run served) to be met at the start rate
on any machine of this kind."""

from __future__ import annotations

import pytest

from infopt.specs.cluster import ClusterReport, ClusterRequest, Verdict
from infopt.specs.traffic import Slo, SloMetric

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(1500)]


def test_replicas_routers_boundary_and_plan_from_the_accepted_run(optimized_run):
    from flows.cluster import cluster

    stored, run_dir = optimized_run
    request = ClusterRequest(
        baseline_run=stored.run_id, slos=[Slo(metric=SloMetric.TTFT, percentile=50, max_s=2.0)],
        replica_counts=[2], routers=["vllm-router"], policies=["round_robin", "session_hash"],
        probe_requests=12, max_probes=6, session_groups=2, session_prefix_tokens=64,
        comparison_requests=8, threads_per_replica=1)
    report = cluster(request=request, runs_dir=str(run_dir.parent))
    assert isinstance(report, ClusterReport)
    out = run_dir.parent / report.run_id
    assert ClusterReport.model_validate_json((out / "cluster.json").read_text()) == report
    assert set(report.boundaries) == {1, 2}
    assert report.boundary_routes[1].startswith("direct")
    assert "vllm-router 0.1.17" in report.boundary_routes[2]
    for b in report.boundaries.values():
        assert 1 <= b.measurements <= 6 and b.probes
        # The start rate meets this loose SLO: a decided meet below any decided miss.
        assert b.probes[0].verdict is not Verdict.MISSES, b.probes[0]
        if b.bracketed:  # the search's invariant (a miss is taken only above the best meet)
            assert b.meets_up_to_rate_per_s < b.misses_from_rate_per_s
    # Two policies x two workloads, each with the routers' and engines' own evidence.
    assert [(r.policy, r.workload) for r in report.routers] == [
        ("round_robin", "sessions"), ("round_robin", "unique"),
        ("session_hash", "sessions"), ("session_hash", "unique")]
    for r in report.routers:
        assert r.failed is None and r.contract_passed and r.quality_identical, r
        assert r.requests == 8 and r.errors == 0
        assert sum(e.requests_routed or 0 for e in r.evidence) >= 8
        assert len(r.evidence) == 2
    sessions = [r for r in report.routers if r.workload == "sessions"]
    assert all(r.prefix_hit_ratio is not None for r in sessions)
    # The plan: calibrated on one replica, validated against both measured counts.
    plan = report.plan
    assert plan is not None and plan.model.slots >= 1
    assert [v.replicas for v in plan.validations] == [1, 2]
    # llm-d values for the llama.cpp winner at the plan's count, valid against the schema.
    assert [h.chart for h in report.helm] == (["llm-d-stack 0.1.0"] if plan.replicas else [])
    assert all(h.errors == [] for h in report.helm)
    # P/D interference on the one replica: streamed ITL alone and mixed, where the replica
    # batches several requests; with one slot, said why not.
    i = report.interference
    if plan.model.slots < 2:
        assert i is None and any("one slot" in n for n in report.notes), report.notes
    else:
        assert i is not None and i.itl_p95_alone_s > 0 and i.long_prompt_tokens >= 1024
        assert ("untested suggestion" in i.why) == i.recommend_pools
    md = (out / "cluster.md").read_text()
    for head in ("## The SLO boundary (measured)", "## Routers and policies (measured)",
                 "## Capacity plan (estimate)", "Validation against the measured boundaries"):
        assert head in md
