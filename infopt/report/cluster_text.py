"""cluster.md: the SLO boundary of each replica count with its probes, the router table with
each replica's evidence, and the capacity plan with its error against each measured bracket."""

from __future__ import annotations

from infopt.specs.cluster import Boundary, CapacityPlan, ClusterReport, RouterRun


def _s(x: float | None, unit: str = " s") -> str:
    return "—" if x is None else f"{x:.3g}{unit}"


def _interval(b: Boundary) -> str:
    lo, hi = b.meets_up_to_rate_per_s, b.misses_from_rate_per_s
    if lo is None:
        return (f"no rate tried met the SLOs (the lowest, {min(p.rate_per_s for p in b.probes):.3g}"
                " requests/s, did not)") if b.probes else "not measured"
    if hi is None:
        return f"meets at {lo:.3g} requests/s; no higher rate tried missed"
    shape = {"cliff": "a cliff: goodput fell past it",
             "slope": "a slope: goodput held while a percentile crossed its limit"}[b.shape or
                                                                                   "slope"]
    return f"between {lo:.3g} (met) and {hi:.3g} (missed) requests/s; {shape}"


def boundary_lines(report: ClusterReport) -> list[str]:
    slo_text = ", ".join(f"{s.metric.value} p{s.percentile} <= {s.max_s:g} s"
                         for s in report.slos)
    out = ["## The SLO boundary (measured)", "",
           f"The highest Poisson arrival rate meeting every SLO ({slo_text}), the accepted "
           "run's lengths. A probe decides an SLO only when the exact interval on the share of "
           "requests within it lies on one side of the percentile; undecided is never a pass.",
           ""]
    for n, b in sorted(report.boundaries.items()):
        out += [f"### {n} replica(s), {report.boundary_routes.get(n, '')}", "",
                f"**Boundary:** {_interval(b)} ({b.measurements} probes of at most "
                f"{b.probes_budget}).", ""]
        heads = [f"{c.metric} p{c.percentile}" for c in b.probes[0].checks] if b.probes else []
        out += ["| offered req/s | completed req/s | goodput req/s | "
                + " | ".join(f"{h} (s; share within)" for h in heads) + " | verdict |",
                "|---" * (4 + len(heads)) + "|"]
        for p in b.probes:
            cells = [f"{_s(c.observed_s, '')}; {c.meeting}/{c.requests}" for c in p.checks]
            served = p.completion_rate_per_s or p.achieved_requests_per_s
            out.append(f"| {p.rate_per_s:.3g} | {served:.3g} | "
                       f"{p.goodput_requests_per_s:.3g} | " + " | ".join(cells)
                       + f" | {p.verdict.value}{' (pooled)' if 'pooled' in p.why else ''} |")
        out += [f"- {n_}" for n_ in b.notes] + [""]
    out += [f"![{p.title}]({p.file})" for p in report.plots] + ([""] if report.plots else [])
    return out


def _replicas(r: RouterRun) -> str:
    parts = []
    for i, e in enumerate(r.evidence):
        hit = "—" if e.prefix_hit_ratio is None else f"{e.prefix_hit_ratio:.0%}"
        parts.append(f"#{i}: {e.requests_routed if e.requests_routed is not None else '?'} "
                     f"req, hit {hit}")
    return "; ".join(parts) or "—"


def router_lines(runs: list[RouterRun]) -> list[str]:
    if not runs:
        return []
    out = ["## Routers and policies (measured)", "",
           "The same replicas behind each router and policy, on a session workload (every "
           "request in a prefix group sent with its group's X-Session-ID) and on one with no "
           "shared prefix. Per replica: the requests the router's own counter gave it "
           "(attempts) and its prefix-cache hit rate from the engine's counters. The API "
           "contract ran through each router first, and the quality check: greedy answers to "
           "the fidelity prompts through the router equal to a replica's own.", "",
           "| router | policy (flag) | workload | requests (errors) | output tok/s | TTFT p50 | "
           "TTFT p95 | prefix hits | per replica | contract | same answers |",
           "|---" * 11 + "|"]
    for r in runs:
        if r.failed:
            out.append(f"| {r.router} | {r.policy} (`{r.policy_flag}`) | {r.workload} | "
                       f"failed: {r.failed} | | | | | | | |")
            continue
        hit = "—" if r.prefix_hit_ratio is None else f"{r.prefix_hit_ratio:.0%}"
        contract = {None: "not run", True: "pass", False: "FAIL"}[r.contract_passed]
        same = {None: "not run", True: "yes", False: "NO"}[r.quality_identical]
        out.append(f"| {r.router} | {r.policy} (`{r.policy_flag}`) | {r.workload} | "
                   f"{r.requests} ({r.errors}) | {r.output_tokens_per_s:.4g} | "
                   f"{_s(r.ttft_p50_s)} | {_s(r.ttft_p95_s)} | {hit} | {_replicas(r)} | "
                   f"{contract} | {same} |")
    out += [f"- {r.router} {r.policy}: {r.caveat}" for r in runs if r.caveat
            and r.workload == "sessions"]
    out += [f"- {r.router} {r.policy}: {r.quality_detail}" for r in runs
            if r.quality_identical is False]
    out += counter_cases(runs) + [""]
    return out


def counter_cases(runs: list[RouterRun]) -> list[str]:
    """Where a cache- or session-aware policy measured worse than round robin on the same
    router and workload (published comparisons include such cases): said, not hidden."""
    out = []
    ok = [r for r in runs if not r.failed and r.ttft_p95_s is not None]
    for r in ok:
        if r.policy not in ("cache_aware", "session_hash"):
            continue
        rr = next((x for x in ok if x.router == r.router and x.workload == r.workload
                   and x.policy == "round_robin"), None)
        if rr is not None and r.ttft_p95_s is not None and rr.ttft_p95_s is not None \
                and r.ttft_p95_s > rr.ttft_p95_s:
            out.append(f"- Counter-case: on the {r.workload} workload, {r.router}'s "
                       f"{r.policy} had a higher TTFT p95 ({r.ttft_p95_s:.3g} s) than round "
                       f"robin ({rr.ttft_p95_s:.3g} s); one run each, not a decided "
                       "difference.")
    return out


def plan_lines(plan: CapacityPlan | None) -> list[str]:
    if plan is None:
        return []
    m = plan.model
    out = ["## Capacity plan (estimate)", "",
           f"Method: {plan.method}. Calibrated from {m.calibrated_from}: {m.slots} slots a "
           f"replica, service time {m.service_mean_s:.3g} s (CV^2 {m.service_cv2:.2f}).", "",
           f"Sized for {plan.peak_rate_per_s:.3g} requests/s: the target "
           f"{plan.target_rate_per_s:.3g} x the burst allowance, routing modelled as "
           f"\"{plan.routing}\".", "",
           "| replicas | predicted max req/s within the SLOs | limited by |", "|---|---|---|"]
    shown = plan.predictions if len(plan.predictions) <= 12 else \
        [*plan.predictions[:10], plan.predictions[-1]]
    out += [f"| {p.replicas} | {p.max_rate_per_s:.3g} | {p.limited_by} |" for p in shown]
    if len(shown) < len(plan.predictions):
        out.append(f"| ... | ({len(plan.predictions) - len(shown)} more counts) | |")
    if plan.replicas is None:
        out += ["", f"**No replica count up to {len(plan.predictions)} is predicted to serve "
                "the peak within the SLOs.**"]
    else:
        gpus = f" ({plan.gpus} GPUs)" if plan.gpus else ""
        out += ["", f"**Replicas needed: {plan.replicas}{gpus}** (estimate)."]
    if plan.validations:
        out += ["", "Validation against the measured boundaries. The error is the prediction "
                "over the bracket's reference rate, minus 1: the rate left undecided inside it "
                "(two runs pooled), else its geometric middle; the bracket's width (missed "
                "from / met up to - 1) says how far the measurement itself pins the boundary. "
                "The one-replica bracket is the one the wait stretch was fitted to: in-sample.",
                "", "| replicas | predicted req/s | measured: met up to / missed from | "
                "bracket width | compared with | error |", "|---|---|---|---|---|---|"]
        for v in plan.validations:
            err = "—" if v.error is None else f"{v.error:+.0%}"
            width = "—" if v.bracket_width is None else f"{v.bracket_width:.0%}"
            ref = "—" if v.measured_reference_rate_per_s is None else \
                f"{v.measured_reference_rate_per_s:.3g} ({v.reference})"
            out.append(f"| {v.replicas} | {v.predicted_rate_per_s:.3g} | "
                       f"{_s(v.measured_meets_up_to_rate_per_s, '')} / "
                       f"{_s(v.measured_misses_from_rate_per_s, '')} | {width} | {ref} | "
                       f"{err}{' (in-sample: the fit)' if v.in_sample else ''} |")
    return out + [""]


def helm_lines(report: ClusterReport) -> list[str]:
    if not report.helm:
        return []
    out = ["## Helm values (rendered from the measured winner and the plan)", ""]
    for h in report.helm:
        valid = ("valid against the chart's values schema" if not h.errors else
                 "INVALID against the chart's values schema: " + "; ".join(h.errors))
        out += [f"### {h.chart}", "", f"{valid} (`infopt/cluster/schemas/{h.schema_file}`).",
                ""] + [f"- {n}" for n in h.notes] + ["", "```yaml", h.values_yaml.rstrip(),
                                                       "```", ""]
    return out


def render_cluster(report: ClusterReport) -> str:
    out = [f"# Cluster plan {report.run_id}", "",
           f"Accepted run `{report.baseline_run}`: {report.engine} {report.engine_version}, "
           f"each replica `{report.winner_command}` on its own loopback port.", ""]
    out += boundary_lines(report) + router_lines(report.routers) + plan_lines(report.plan)
    out += helm_lines(report)
    if report.interference:
        i = report.interference
        out += ["## Prefill/decode interference (measured on one replica)", "",
                f"Decode ITL p95 of the target load: {i.itl_p95_alone_s:.3g} s alone, "
                f"{i.itl_p95_mixed_s:.3g} s with {i.long_prompt_tokens:,}-token prompts sent "
                f"beside it (x{i.ratio:.2f}; separate pools above x{i.threshold:g}, this "
                "rule's own line).", "", i.why, ""]
    out += [f"- {n}" for n in report.notes]
    return "\n".join(out).rstrip() + "\n"
