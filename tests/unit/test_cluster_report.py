"""cluster.md from a recorded-shape ClusterReport: each boundary as an interval with its probes
(pooled runs marked), the router table with per-replica evidence, a cache-aware policy that
measured worse than round robin said as a counter-case, the plan and its error against each
measured bracket (its reference rate, the bracket's width beside it, the fit labelled in-sample)."""

from __future__ import annotations

from infopt.report.cluster_text import render_cluster
from infopt.specs.cluster import (
    Boundary,
    CapacityPlan,
    ClusterReport,
    PlanValidation,
    Probe,
    ReplicaEvidence,
    ReplicaModel,
    ReplicaPrediction,
    RouterRun,
    SloCheck,
    Verdict,
)
from infopt.specs.traffic import Slo, SloMetric


def _probe(rate: float, verdict: Verdict, why: str = "planted") -> Probe:
    c = SloCheck(metric="ttft", percentile=90, max_s=1.0, observed_s=0.5, requests=40,
                 meeting=39, share_low=0.9, share_high=1.0, verdict=verdict)
    return Probe(rate_per_s=rate, achieved_requests_per_s=rate, goodput_requests_per_s=rate,
                 requests=40, errors=0, checks=[c], verdict=verdict, why=why,
                 completion_rate_per_s=rate)


def _run(policy: str, p95: float) -> RouterRun:
    ev = [ReplicaEvidence(url="http://a", requests_routed=20, prompt_tokens_from_cache=50,
                          prompt_tokens_looked_up=100),
          ReplicaEvidence(url="http://b", requests_routed=21, prompt_tokens_from_cache=None,
                          prompt_tokens_looked_up=None)]
    return RouterRun(router="vllm-router 0.1.17", policy=policy, policy_flag=policy,
                     workload="sessions", replicas=2, requests=40, errors=0,
                     output_tokens_per_s=100.0, ttft_p50_s=0.2, ttft_p95_s=p95, e2e_p50_s=1.0,
                     prefix_hit_ratio=0.5, evidence=ev, contract_passed=True)


def test_the_cluster_report_states_intervals_evidence_counter_cases_and_error():
    b = Boundary(probes=[_probe(2.0, Verdict.MEETS), _probe(4.0, Verdict.MISSES),
                         _probe(3.0, Verdict.MEETS, "two runs pooled: ...")],
                 meets_up_to_rate_per_s=3.0, misses_from_rate_per_s=4.0, shape="cliff",
                 probes_budget=15, measurements=4, rel_tolerance=0.1, confidence=0.9)
    model = ReplicaModel(slots=2, service_mean_s=1.0, service_cv2=0.2,
                         light_load_rate_per_s=2.0, light_load_s={"ttft p90": 0.3},
                         decode_curve={}, calibrated_from="planted")
    plan = CapacityPlan(target_rate_per_s=5.0, peak_rate_per_s=7.5, routing="pooled",
                        model=model, predictions=[ReplicaPrediction(
                            replicas=n, routing="pooled", max_rate_per_s=3.2 * n,
                            limited_by="ttft p90 <= 1 s") for n in (1, 2, 3)],
                        replicas=3, gpus_per_replica=0, gpus=None,
                        validations=[PlanValidation(
                            replicas=1, routing="pooled", predicted_rate_per_s=3.2,
                            measured_meets_up_to_rate_per_s=3.0,
                            measured_misses_from_rate_per_s=4.0, error=3.2 / 12**0.5 - 1,
                            measured_reference_rate_per_s=12**0.5,
                            reference="the bracket's geometric middle", bracket_width=1 / 3,
                            in_sample=True)],
                        method="estimate: planted")
    report = ClusterReport(run_id="c1", created_at="now", baseline_run="r1", engine="llamacpp",
                           engine_version="b1", winner_command="llama-server -m m.gguf",
                           slos=[Slo(metric=SloMetric.TTFT, percentile=90, max_s=1.0)],
                           boundaries={1: b}, boundary_routes={1: "direct (no router)"},
                           routers=[_run("round_robin", 0.5), _run("cache_aware", 0.9)],
                           plan=plan)
    md = render_cluster(report)
    assert "between 3 (met) and 4 (missed) requests/s; a cliff" in md
    assert "| 3 | 3 | 3 | 0.5; 39/40 | meets (pooled) |" in md
    assert "#0: 20 req, hit 50%; #1: 21 req, hit —" in md
    assert "Counter-case: on the sessions workload, vllm-router 0.1.17's cache_aware had a " \
           "higher TTFT p95 (0.9 s) than round robin (0.5 s)" in md
    assert "**Replicas needed: 3** (estimate)." in md
    assert "| 1 | 3.2 | 3 / 4 | 33% | 3.46 (the bracket's geometric middle) | -8% (in-sample: " \
           "the fit) |" in md


def test_the_boundary_pictures_carry_the_probes_they_draw(tmp_path):
    from infopt.report.cluster_plots import boundary_plots, write_cluster_plots
    from infopt.report.plots import read_plot_data

    b = Boundary(probes=[_probe(2.0, Verdict.MEETS), _probe(4.0, Verdict.MISSES),
                         _probe(4.0, Verdict.MISSES, "two runs pooled: ...")],
                 meets_up_to_rate_per_s=2.0, misses_from_rate_per_s=4.0, shape="slope",
                 probes_budget=15, measurements=3, rel_tolerance=0.1, confidence=0.9)
    report = ClusterReport(run_id="c1", created_at="now", baseline_run="r1", engine="e",
                           engine_version="1", winner_command="x",
                           slos=[Slo(metric=SloMetric.TTFT, percentile=90, max_s=1.0)],
                           boundaries={1: b, 2: b}, boundary_routes={}, routers=[], plan=None)
    plots = boundary_plots(report)
    assert [p.name for p in plots] == ["boundary-goodput", "boundary-ttft-p90"]
    assert plots[0].series[0].x == [2.0, 4.0]  # the pooled probe stands for its rate once
    assert plots[1].hlines == [(1.0, "SLO 1 s")] and len(plots[1].series) == 2
    refs = write_cluster_plots(report, tmp_path)
    assert read_plot_data(tmp_path / refs[1].file) == plots[1]
    assert "![TTFT p90 against the offered rate (measured)](plots/boundary-ttft-p90.png)" in \
        render_cluster(report.model_copy(update={"plots": refs}))
