"""cluster.md's pictures: goodput and each SLO's measured percentile against the offered rate,
one series per replica count, from the boundary searches' probes (the last word on each rate:
a pooled pair replaces its runs), drawn with infopt.report.plots (the data rides in the PNG)."""

from __future__ import annotations

from pathlib import Path

from infopt.cluster.boundary import last_word
from infopt.report.plots import PlotData, Series, draw_all
from infopt.specs.cluster import ClusterReport
from infopt.specs.results import PlotRef


def boundary_plots(report: ClusterReport) -> list[PlotData]:
    counts = sorted(report.boundaries.items())
    out = [PlotData(
        name="boundary-goodput", title="Goodput against the offered rate (measured)",
        x_label="offered rate (requests/s, Poisson)",
        y_label="goodput (requests/s within every SLO)",
        series=[Series(name=f"{n} replica(s)", x=[p.rate_per_s for p in last_word(b.probes)],
                       y=[p.goodput_requests_per_s for p in last_word(b.probes)])
                for n, b in counts if b.probes])]
    for slo in report.slos:
        metric, pct = slo.metric.value, slo.percentile
        series = []
        for n, b in counts:
            pts = [(p.rate_per_s, c.observed_s) for p in last_word(b.probes) for c in p.checks
                   if c.metric == metric and c.percentile == pct and c.observed_s is not None]
            if pts:
                series.append(Series(name=f"{n} replica(s)", x=[x for x, _ in pts],
                                     y=[y for _, y in pts]))
        if series:
            out.append(PlotData(
                name=f"boundary-{metric}-p{pct}",
                title=f"{metric.upper()} p{pct} against the offered rate (measured)",
                x_label="offered rate (requests/s, Poisson)", y_label=f"{metric} p{pct} (s)",
                series=series, hlines=[(slo.max_s, f"SLO {slo.max_s:g} s")]))
    return out


def write_cluster_plots(report: ClusterReport, run_dir: Path) -> list[PlotRef]:
    return draw_all(boundary_plots(report), run_dir)
