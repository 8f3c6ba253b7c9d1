"""The report's pictures, made from the run's own records: what each plot shows is built first as
data (PlotData: series of points with axis labels and units, pure), then drawn with matplotlib
into a PNG that carries that data in its metadata ("infopt-plot"), so a reader (or a test)
can check a picture against the numbers it claims to show.

1. latency vs throughput per configuration across the concurrency sweep, with the SLO lines;
2. the Pareto front (throughput vs ITL), winner and closest-to-ceiling marked;
3. measured decode rate vs its ceilings per configuration (theoretical and calibrated);
4. the winner's TTFT and ITL distributions per standard scenario (from its records files).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import cast

from pydantic import Field

from infopt.runs.rundir import atomic_path
from infopt.specs.base import Spec
from infopt.specs.results import OptimizationReport, PlotRef, Trial
from infopt.tuning.pareto import config_label

META_KEY = "infopt-plot"


class Series(Spec):
    name: str
    x: list[float]
    y: list[float]
    kind: str = "line"  # line, scatter, step (a CDF), bar
    marker: str | None = None  # "winner", "closest", "front", "dominated"


class PlotData(Spec):
    name: str  # the file stem
    title: str
    x_label: str  # with its unit
    y_label: str
    series: list[Series]
    hlines: list[tuple[float, str]] = Field(default_factory=list)  # SLO lines (y, label)
    x_ticks: list[str] = Field(default_factory=list)  # bar plots: one name per x index
    note: str | None = None


def _two_engines(r: OptimizationReport) -> bool:
    return r.engines is not None and len(r.engines.results) > 1


def _by_config(r: OptimizationReport) -> dict[str, list[Trial]]:
    out: dict[str, list[Trial]] = {}
    for t in r.trials:
        if t.benchmark is not None and t.objective_value is not None:
            out.setdefault(config_label(t, _two_engines(r)), []).append(t)
    return out


def latency_throughput(r: OptimizationReport) -> PlotData | None:
    """Per configuration, one point per sweep level: median output tok/s (x) and median ITL
    p50 (y, ms) over its trials."""
    series = []
    for label, ts in _by_config(r).items():
        # _by_config keeps only benchmarked trials; the filter narrows the type, drops nothing.
        benches = [t.benchmark for t in ts if t.benchmark is not None]
        levels = sorted({lv.concurrency for b in benches for lv in b.levels})
        xs, ys = [], []
        for c in levels:
            lvs = [lv for b in benches for lv in b.levels if lv.concurrency == c
                   and lv.itl_s.p50 is not None]
            if lvs:
                xs.append(statistics.median(lv.output_tokens_per_s for lv in lvs))
                # lvs holds only levels with a p50; filtered again so mypy sees a float.
                ys.append(1000 * statistics.median(p for lv in lvs
                                                   if (p := lv.itl_s.p50) is not None))
        if xs:
            series.append(Series(name=label, x=xs, y=ys, kind="line"))
    if not series:
        return None
    slos = [(1000 * s.max_s, f"SLO ITL p{s.percentile} {1000 * s.max_s:g} ms")
            for s in r.workload.traffic.slos if s.metric.value == "itl"]
    return PlotData(name="latency-throughput", title="Latency vs throughput per configuration "
                    "(medians over trials; one point per concurrency level)",
                    x_label="output tokens/s (aggregate)", y_label="ITL p50 (ms)",
                    series=series, hlines=slos)


def pareto(r: OptimizationReport) -> PlotData | None:
    pts = [p for p in r.pareto if p.output_tokens_per_s is not None and p.itl_p50_s]
    if not pts:
        return None
    closest = {c.label for c in r.closest_to_ceiling}
    winner = r.winner_label.split(" + ")[-1]
    winner = f"{r.engine} {winner}" if _two_engines(r) else winner

    def marker(p) -> str:
        if p.label == winner:
            return "winner"
        if p.label in closest:
            return "closest"
        return "front" if p.on_front else "dominated"

    series = []
    for p in pts:
        assert p.output_tokens_per_s is not None and p.itl_p50_s is not None  # pts keeps these
        series.append(Series(name=p.label, x=[p.output_tokens_per_s], y=[1000 * p.itl_p50_s],
                             kind="scatter", marker=marker(p)))
    return PlotData(name="pareto", title="Pareto set at the target level (filled: on the "
                    "front; star: winner; diamond: closest to its ceiling)",
                    x_label="output tokens/s (aggregate)", y_label="ITL p50 (ms)",
                    series=series, note="memory and top-1 agreement are in the report's table")


def ceilings(r: OptimizationReport) -> PlotData | None:
    """Per configuration: the median measured decode rate and each envelope's ceiling, at the
    target level."""
    target = r.workload.target_concurrency
    rows: dict[str, dict[str, list[float]]] = {}
    for label, ts in _by_config(r).items():
        for t in ts:
            for c in t.ceilings:
                if f"concurrency {target} " in c.metric:
                    d = rows.setdefault(label, {})
                    d.setdefault("measured", []).append(c.measured)
                    d.setdefault(c.envelope.value, []).append(c.ceiling)
    if not rows:
        return None
    labels = sorted(rows)
    series = []
    for key in ("measured", "calibrated", "theoretical"):
        have = [lab for lab in labels if key in rows[lab]]
        if have:
            series.append(Series(name=key if key == "measured" else f"{key} ceiling (estimate)",
                                 x=[float(labels.index(lab)) for lab in have],
                                 y=[statistics.median(rows[lab][key]) for lab in have],
                                 kind="bar"))
    return PlotData(name="ceilings", title=f"Measured decode rate vs its ceilings at "
                    f"concurrency {target} (medians; ceilings are estimates)",
                    x_label="configuration", y_label="decode tokens/s", series=series,
                    x_ticks=labels)


def winner_distributions(r: OptimizationReport) -> list[PlotData]:
    """The winner's TTFT and per-request ITL p50 on each standard scenario, as CDFs from its
    records files."""
    from infopt.analysis.records import load_parquet

    ttft: list[Series] = []
    itl: list[Series] = []
    for s in r.scenarios:
        if not s.records_path or not Path(s.records_path).is_file():
            continue
        df = load_parquet(s.records_path)
        for values, cdfs in ((df["ttft_s"], ttft), (df["itl_p50_s"], itl)):
            v = sorted(1000 * float(x) for x in values.dropna())
            if v:
                cdfs.append(Series(name=f"{s.name} (n={len(v)})", x=v,
                                   y=[(i + 1) / len(v) for i in range(len(v))], kind="step"))
    out: list[PlotData] = []
    for name, what, series in (("winner-ttft", "TTFT", ttft), ("winner-itl", "ITL p50 per "
                                                                "request", itl)):
        if series:
            out.append(PlotData(name=name, title=f"Winner: {what} per standard scenario (CDF)",
                                x_label=f"{what} (ms)", y_label="fraction of requests",
                                series=series))
    return out


def all_plots(r: OptimizationReport) -> list[PlotData]:
    return [p for p in (latency_throughput(r), pareto(r), ceilings(r)) if p is not None] + \
        winner_distributions(r)


_MARKERS = {"winner": ("*", 14), "closest": ("D", 8), "front": ("o", 7), "dominated": ("o", 5)}


def draw(p: PlotData, path: Path) -> Path:
    """The PNG of `p`, with `p` itself in the file's metadata."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    width = 0.8 / max(1, len(p.series))
    for i, s in enumerate(p.series):
        if s.kind == "bar":
            ax.bar([x + i * width for x in s.x], s.y, width=width, label=s.name)
        elif s.kind == "scatter":
            shape, size = _MARKERS.get(s.marker or "front", ("o", 6))
            color = f"C{i % 10}"  # dominated points hollow, in their own colour
            ax.scatter(s.x, s.y, marker=shape, s=size ** 2, label=s.name, edgecolors=color,
                       facecolors="none" if s.marker == "dominated" else color)
        elif s.kind == "step":
            ax.step(s.x, s.y, where="post", label=s.name)
        else:
            ax.plot(s.x, s.y, marker="o", label=s.name)
    if p.x_ticks:
        ax.set_xticks([i + width * (len(p.series) - 1) / 2 for i in range(len(p.x_ticks))],
                      p.x_ticks, rotation=30, ha="right", fontsize=7)
    for y, label in p.hlines:
        ax.axhline(y, linestyle="--", color="red", linewidth=1)
        ax.annotate(label, (0, y), xycoords=("axes fraction", "data"), color="red",
                    fontsize=8, va="bottom")
    ax.set_title(p.title, fontsize=10)
    ax.set_xlabel(p.x_label, fontsize=9)
    ax.set_ylabel(p.y_label)
    ax.grid(True, alpha=0.3)
    if len(p.series) <= 16:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", metadata={META_KEY: p.model_dump_json()})
    finally:
        plt.close(fig)
    return path


def read_plot_data(path: Path) -> PlotData:
    """The data a PNG drawn by `draw` carries."""
    from PIL import Image
    from PIL.PngImagePlugin import PngImageFile

    with Image.open(path) as im:
        # draw() writes PNGs, whose text chunks PngImageFile.text holds; Image.open's type is
        # the generic ImageFile.
        return PlotData.model_validate(json.loads(cast(PngImageFile, im).text[META_KEY]))


def draw_all(plots: list[PlotData], run_dir: Path) -> list[PlotRef]:
    """Each plot drawn under run_dir/plots/, with the reference a report keeps."""
    out = []
    for p in plots:
        draw(p, run_dir / "plots" / f"{p.name}.png")
        out.append(PlotRef(name=p.name, title=p.title, file=f"plots/{p.name}.png",
                           series=len(p.series), points=sum(len(s.x) for s in p.series)))
    return out


def write_plots(r: OptimizationReport, run_dir: Path) -> list[PlotRef]:
    """Every plot the run's records support, drawn under run_dir/plots/."""
    return draw_all(all_plots(r), run_dir)
