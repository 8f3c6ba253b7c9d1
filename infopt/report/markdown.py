"""Render an OptimizationReport as Markdown. The only place seconds become milliseconds and
bytes become GiB; every number says whether it was measured or read, and from where."""

from __future__ import annotations

from collections.abc import Callable

from infopt.analysis.stats import MIN_SAMPLES_FOR_P95, MIN_SAMPLES_FOR_P99
from infopt.report.approvals_text import approvals_lines, binding_lines
from infopt.report.decisions_text import decisions_lines
from infopt.report.kernel_text import kernel_lines
from infopt.report.ladder_text import ladder_lines
from infopt.report.layout_text import measured_layout_lines
from infopt.report.provenance import provenance_lines
from infopt.report.quality_text import long_markdown, quality_markdown, tasks_markdown
from infopt.report.reproduce_text import reproduce_lines
from infopt.report.speculation_text import drafter_search_lines, speculation_lines
from infopt.report.workload_text import describe_workload
from infopt.specs.quality import LongContextCheck
from infopt.specs.results import (
    LevelResult,
    OptimizationReport,
    Percentiles,
    SloResult,
    Trial,
)
from infopt.specs.workload import OBJECTIVE_UNIT, Objective
from infopt.tuning.rounds import pretty_measure

GIB = 2**30


def _ms(p: float | None) -> str:
    return "—" if p is None else f"{p * 1000:.1f}"


def _pct(p: Percentiles) -> str:
    flag = "*" if p.low_sample_p95 else ""
    return f"{_ms(p.p50)} / {_ms(p.p95)}{flag}"


def _pct99(p: Percentiles) -> str:
    """p50 / p95 / p99 with the sample count; * and † flag p95 and p99 from too few samples."""
    return (f"{_ms(p.p50)} / {_ms(p.p95)}{'*' if p.low_sample_p95 else ''} / "
            f"{_ms(p.p99)}{'†' if p.low_sample_p99 else ''} (n={p.n})")


PCT99_LEGEND = (f"p50 / p95 / p99 in ms with the sample count (* = fewer than "
                f"{MIN_SAMPLES_FOR_P95} samples: p95 is indicative only; † = fewer than "
                f"{MIN_SAMPLES_FOR_P99}: p99 is indicative only)")


def _level_row(t: Trial, name: str, lvl: LevelResult) -> str:
    reached = _checks(t.benchmark.validation_passed if t.benchmark else None, lvl)
    return (f"| {t.trial_id} | {t.value or t.role} | {name} | {lvl.requests} | "
            f"{lvl.errors} | {_pct(lvl.ttft_s)} | {_pct(lvl.itl_s)} | "
            f"{lvl.output_tokens_per_s:.1f} | {reached} |")


def _unit(objective: str) -> str:
    return OBJECTIVE_UNIT[Objective(objective)]


def _control_lines(r: OptimizationReport) -> list[str]:
    """Control, baseline and winner, and the gain against the engine's own defaults: the number
    a user cares about (never against a configuration nobody runs)."""
    g = r.gain_vs_control
    if g is None or r.control_command is None:
        return []
    unit = _unit(g.objective)
    short = g.served_context_tokens
    served = ("the full native context" if short is None else
              f"the {short:,}-token context this run serves (shorter than the native window)")
    control = (f"`{r.control_command}`" if not g.control_is_baseline else
               "the baseline below (the engine's defaults already serve the full native "
               "context)" if short is None else "the baseline below (the engine's defaults "
               f"do not fit this host at {served}: the baseline stands in for them)")
    lines = ["## Against the engine's out-of-the-box defaults (the control)", "",
             f"- Control (trial 0, what the engine runs with no flags): {control}",
             f"- Baseline: the simplest correct configuration at {served}",
             f"- Winner: {r.winner_label} (trial `{r.winner_trial_id}`, its median)", ""]
    if g.control_median is None or g.winner_median is None:
        return lines + [f"No gain can be stated: {g.note}.", ""]
    better = "higher" if g.higher_is_better else "lower"
    d = g.decision
    if d is not None:
        lines += _decision_lines(g, d, unit, better)
    else:
        c = g.comparison
        gain = f"{g.ratio:.2f}x" if g.ratio is not None else "—"
        interval = ("" if c is None else f"; difference {c.diff:+.2f}, {c.ci:.0%} interval "
                    f"[{c.ci_low:+.2f}, {c.ci_high:+.2f}] ({c.interval}) over {c.n_b} winner "
                    f"vs {c.n_a} control trials")
        lines += [f"**Winner {g.winner_median:.2f} vs control {g.control_median:.2f} {unit} "
                  f"(medians, measured; {better} is better): {gain}**{interval} → {g.note}.",
                  ""]
    if g.recommendation:
        lines += [f"**Recommendation:** {g.recommendation}.", ""]
    return lines


def _decision_lines(g, d, unit: str, better: str) -> list[str]:
    """The final paired comparison: what was recommended, the ratio with its interval, the
    secondary measures, what the rounds could have detected, and the drift check."""
    pick = ("the ladder's winner" if d.recommended == "winner" else
            "**the engine's defaults** (the control)")
    lines = [f"**Recommended: {pick}.** {d.why}.", ""]
    r = d.reconfirmed or d.rounds
    if r is None:
        return lines
    o = r.objective
    lines += [f"Winner {o.b_median:.2f} vs control {o.a_median:.2f} {unit} (medians of "
              f"{r.rounds} paired rounds, measured; {better} is better): **{o.ratio:.2f}x** "
              f"(geometric mean of the per-round ratios), interval [{o.ratio_low:.2f}x, "
              f"{o.ratio_high:.2f}x] at {o.confidence:.2%} per look"
              + ("" if o.detectable is None else
                 f"; these rounds could have detected a difference of {o.detectable:.0%}")
              + ".", ""]
    for s in r.secondary:
        lines.append(f"- {pretty_measure(s.measure)}: control {s.a_median:.4g}, winner {s.b_median:.4g}, "
                     f"ratio {s.ratio:.2f}x [{s.ratio_low:.2f}x, {s.ratio_high:.2f}x] "
                     f"({'higher' if s.higher_is_better else 'lower'} is better; {s.verdict})")
    if d.control_ineligible:
        lines.append(f"- The defaults fail a hard requirement: {d.control_ineligible}.")
    if d.drift is not None:
        lines.append(f"- Drift: {d.drift.why}" + (
            "; the comparison above was made afresh after it was seen" if d.reconfirmed
            else "") + ".")
    return lines + [""]


def _checks(validation_passed: bool | None, lv: LevelResult) -> str:
    out = "ok" if validation_passed is not False else "VALIDATION FAILED"
    for n, what in ((lv.lengths_not_reached, "short outputs"),
                    (lv.prompt_lengths_off, "prompts off length"),
                    (lv.chunk_counts_assumed, "chunk counts assumed")):
        if n:
            out += f", {n} {what}"
    if lv.client_saturated:
        out += ", client-bound"
        if lv.client_bound_reason:
            out += f" ({lv.client_bound_reason})"
    return out


def _scenario_lines(r: OptimizationReport) -> list[str]:
    if not r.scenarios:
        return []
    lines = ["", "### The winner on the standard scenarios (measured)", "",
             f"Exact prompt lengths where the engine has a tokenizer route; {PCT99_LEGEND}; "
             "ITL per output token; TPOT per request.", "",
             "| scenario | arrival | concurrency | in / out tokens (mean) | requests | errors | "
             "TTFT ms | ITL ms | TPOT ms | out tok/s | total tok/s | checks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in r.scenarios:
        lv = s.level
        tokens = (f"{s.input_tokens_mean:.0f} / {s.output_tokens_mean:.0f}"
                  if s.input_tokens_mean is not None else "—")
        tpot = _pct99(lv.tpot_s) if lv.tpot_s else "—"
        lines.append(f"| {s.name} | {s.arrival} | {lv.concurrency} | {tokens} | {lv.requests} "
                     f"| {lv.errors} | {_pct99(lv.ttft_s)} | {_pct99(lv.itl_s)} | {tpot} | "
                     f"{lv.output_tokens_per_s:.1f} | {lv.total_tokens_per_s:.1f} | "
                     f"{_checks(s.validation_passed, lv)} |")
    return lines


def _observed(x: SloResult) -> str:
    if x.samples == 0:
        return "—"
    return "∞ (failures)" if x.observed_s is None else f"{_ms(x.observed_s)} ms"


def _slo_lines(r: OptimizationReport) -> list[str]:
    """The winner's SLOs per scenario (definitions: docs/metrics.md)."""
    winner = next(t for t in r.trials if t.trial_id == r.winner_trial_id)
    judged = [s for s in (winner.benchmark.scenarios if winner.benchmark else []) if s.slos]
    if not judged:
        return []
    lines = ["", "### SLOs of the winner (measured)", "",
             "A run meets an SLO when its value at the percentile (ITL: over all token gaps; "
             "a failed request counts as +inf) is within the bound; goodput counts requests "
             "that meet every SLO themselves, per second (docs/metrics.md).", "",
             "| scenario | SLO | observed | samples | met | requests within | goodput req/s |",
             "|---|---|---|---|---|---|---|"]
    for s in judged:
        for x in s.slos:
            lines.append(f"| {s.name} | {x.metric} p{x.percentile} <= {x.max_s * 1e3:g} ms | "
                         f"{_observed(x)}"
                         f" | {x.samples} | {'yes' if x.met else '**no**'} | "
                         f"{x.requests_meeting_fraction:.0%} | "
                         f"{s.goodput_requests_per_s:.3g} |")
    return lines


def _troubleshooting_lines(r: OptimizationReport) -> list[str]:
    hit = [t for t in r.trials if t.diagnosis]
    if not hit:
        return []
    lines = ["", "### Start failures (issue-first troubleshooting)", ""]
    for t in hit:
        d = t.diagnosis
        assert d is not None  # hit keeps only trials with a diagnosis
        outcome = (f"remedied by `{t.remedy.change}` (keeps the contract)" if t.remedy and
                   not t.failed else "recorded as failed; no contract-preserving remedy applied")
        lines += [f"- `{t.trial_id}`: **{d.category.value}** — `{d.root_error[:240]}`; {outcome}.",
                  *[f"  - [{m.source}] {m.title} — {m.url}" for m in d.matches[:3]],
                  f"  - search: {d.search}"]
    return lines


def _ceiling_table(rows) -> list[str]:
    # The attainable column only where some row has one (GPU runs): on a CPU the calibrated
    # envelope is itself measured, and an all-dash column would say nothing.
    attainable = any(c.attainable is not None for _, c in rows)
    extra = ["attainable tok/s (estimate)"] if attainable else []
    head = ["trial", "metric", "envelope", "measured tok/s", "ceiling tok/s (upper bound)",
            "ratio", *extra, "predicted bottleneck", "remaining gap tok/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t, c in rows:
        flag = " ⚠ above ceiling" if c.flagged else ""
        est = ([f"{c.attainable:.1f}" if c.attainable is not None else "-"] if attainable
               else [])
        cells = [t.trial_id, c.metric, c.envelope.value, f"{c.measured:.1f}",
                 f"{c.ceiling:.1f}", f"{c.ratio:.2f}{flag}", *est, c.note,
                 f"{c.ceiling - c.measured:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _prefill_lines(r: OptimizationReport) -> list[str]:
    """Prefill beside decode: each trial's single-stream prompt rate against its prefill
    ceiling, the bound the ceiling predicts, and on a GPU the TTFT estimate's rate."""
    rows = [(t, c) for t in r.trials for c in t.prefill_ceilings]
    if not rows:
        return []
    out = ["", "Prefill (single stream): the mean prompt / TTFT p50 at concurrency 1, against "
           "the prefill ceiling of one such prompt (TTFT also holds scheduling and the HTTP "
           "round trip: a lower bound on the prefill's own rate).", "",
           "| trial | envelope | measured prompt tok/s | ceiling tok/s | ratio | bound | "
           "estimate tok/s |", "|---|---|---|---|---|---|---|"]
    for t, c in rows:
        bound = c.bound or "—"
        est = f"{c.attainable:,.0f}" if c.attainable else "—"
        out.append(f"| {t.trial_id} | {c.envelope.value} | {c.measured:,.0f} | "
                   f"{c.ceiling:,.0f} | {c.ratio:.2f} | {bound} | {est} |")
    notes = sorted({c.attainable_note for _, c in rows if c.attainable_note})
    return out + ["", *[f"Estimate: {n}." for n in notes]] if notes else out


def _ceiling_lines(r: OptimizationReport) -> list[str]:
    rows = [(t, c) for t in r.trials for c in t.ceilings]
    lines = ["", "### Fraction of the ceiling (measured / estimated upper bound, unclamped)", ""]
    if not rows:
        return lines + ["No ceiling could be computed for this device (see the plan's "
                        "unavailable envelopes)."]
    lines += ["Decode rate = streams decoding together × 1 / median ITL (decode only; TPOT "
              "p50 under speculative decoding, whose verified drafts arrive in bursts), "
              "against the roofline decode ceiling at that batch and the benchmark's mean "
              "context. A ratio above 1 means the cost model is wrong for this case and is "
              "flagged (speculation can exceed the one-token-a-step ceiling by design).", "",
              *_ceiling_table(rows)]
    notes = sorted({c.attainable_note for _, c in rows if c.attainable_note})
    if notes:
        lines += ["", *[f"Attainable: {n}; not an upper bound." for n in notes]]
    lines += _prefill_lines(r)
    lines += ["", "The configuration closest to its ceiling at each level is in the tuning "
              "ladder's section, compared at the same level and envelope as the winner."]
    if r.pruned:
        lines += ["", "Pruned before launch (this machine cannot run it, or it does not fit "
                      "at the full context):",
                  *[f"- {p}" for p in r.pruned]]
    fit = next((t.fit for t in r.trials if t.trial_id == r.winner_trial_id and t.fit), None)
    if fit:
        lines += ["", f"Winner's memory fit (estimate): weights {fit.weights_bytes_per_gpu / GIB:.2f}"
                  f" GiB, KV {fit.required_kv_bytes_per_gpu / GIB:.2f} GiB for "
                  f"{fit.concurrency} × {fit.context_tokens} tokens of "
                  f"{fit.kv_budget_bytes_per_gpu / GIB:.2f} GiB available; "
                  f"{'fits' if fit.fits else 'does not fit'}.",
                  "", f"Context and concurrency limits of the winner (estimate): KV capacity "
                  f"{fit.kv_capacity_tokens:,} tokens; {fit.context_tokens:,} tokens per "
                  f"sequence; the full native context "
                  f"({r.model.native_context_tokens:,} tokens) allows "
                  f"{_at_native(fit, r.model.native_context_tokens):.1f} concurrent "
                  "sequence(s)."]
    point = next((p for p in r.pareto if p.trial_ids and r.winner_trial_id in p.trial_ids
                  and p.memory_bytes), None)
    if point is not None and point.memory_bytes:
        what = ("GPU memory (measured, NVML, the engine's process group over its GPUs)"
                if point.memory_kind == "gpu" else
                "peak resident memory (measured, the engine process)")
        lines += ["", f"Winner's {what}: {point.memory_bytes / GIB:.2f} GiB."]
    return lines


def _kv_lines(r: OptimizationReport) -> list[str]:
    """Each trial whose engine logged its KV capacity, against the fit's estimate."""
    rows = [t for t in r.trials if t.kv is not None]
    if not rows:
        return []
    lines = ["", "### KV capacity: the engine's startup log against the fit (estimate)", "",
             "| trial | unit | logged | fit | error |", "|---|---|---:|---:|---:|"]
    for t in rows:
        k = t.kv
        assert k is not None  # rows keeps only trials with a KV check
        flag = " **stops the ladder**" if k.stops_ladder else ""
        lines.append(f"| {t.trial_id} | {k.unit} | {k.observed:,} | {k.predicted:,} | "
                     f"{k.error:+.1%}{flag} |")
    return lines


def _offload_lines(r: OptimizationReport) -> list[str]:
    """Each trial whose engine reported what it put in device memory (its load log)."""
    rows = [t for t in r.trials if t.offload is not None]
    if not rows:
        return []
    lines = ["", "### Offload achieved: the engine's load log (measured)", "",
             "| trial | layers on the GPU | model buffers |", "|---|---:|---|"]
    for t in rows:
        o = t.offload
        assert o is not None  # rows keeps only trials with one
        bufs = ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in o.model_buffer_bytes.items())
        lines.append(f"| {t.trial_id} | {o.layers_offloaded}/{o.layers_total}"
                     f"{'' if o.full else ' (partial)'} | {bufs or '-'} |")
    return lines


def _at_native(fit, native_tokens: int) -> float:
    """Sequences the KV capacity holds at the model's full native context (state included)."""
    per_seq = fit.kv_bytes_per_token_per_gpu * native_tokens + fit.state_bytes_per_sequence_per_gpu
    return fit.kv_budget_bytes_per_gpu / per_seq if per_seq else 0.0


def _bandwidth_line(r: OptimizationReport) -> str:
    bw = r.hardware.host_memory_bandwidth
    if bw is None:
        return "- Host memory bandwidth: not measured."
    return (f"- Host memory bandwidth: **measured** {bw.median_bytes_per_s / 1e9:.1f} GB/s median "
            f"(range {bw.min_bytes_per_s / 1e9:.1f}–{bw.max_bytes_per_s / 1e9:.1f}, {bw.repeats} "
            f"copies of {bw.array_bytes / 2**20:.0f} MiB, {bw.threads} threads).")


def _model_line(r: OptimizationReport) -> str:
    m, i = r.model, r.model.inspection
    kinds = ", ".join(f"{k} x{v}" for k, v in i.layer_kinds.items())
    q = i.quantization
    quant = (f"{q.scheme} {q.format}, verified from {q.source}" if q else "unquantized")
    return (f"- Model: `{m.name}` — {i.architecture} ({i.model_type}), {i.num_layers} layers "
            f"({kinds}), {i.attention.kind.value} attention {m.num_query_heads} query / "
            f"{m.num_kv_heads} KV heads × {m.head_dim}, native context "
            f"{m.native_context_tokens} tokens, {(i.params_total or 0) / 1e6:.1f} M parameters "
            f"({(i.params_active_per_token or 0) / 1e6:.1f} M active per token), "
            f"{'MoE' if i.moe else 'dense'}; weights {quant}; file {m.file_bytes / 2**20:.1f} MiB; "
            f"KV {m.kv_bytes_per_token_f16:,} B/token at 16-bit (computed from the "
            f"classification). License {i.license or 'unknown'}. Source: {m.source}.")


def _shortlist_lines(r: OptimizationReport) -> list[str]:
    s = r.shortlist
    assert s is not None  # called only when the report has one (the section list below)
    lines = [f"## Checkpoint shortlist for `{s.base_model}` (hub metadata, not names)", "",
             f"Device {s.device.kind.value}; ≤ {s.max_weight_bits}-bit weights; {s.ranking}.", "",
             "| rank | repository | format | bits | kernel tier | provenance |",
             "|---|---|---|---|---|---|"]
    for n, c in enumerate(s.candidates, 1):
        lines.append(f"| {n} | `{c.repo_id}`{' ' + c.gguf_file if c.gguf_file else ''} | "
                     f"{c.format.value} | {c.weight_bits} | "
                     f"{c.best_tier.value if c.best_tier else '—'} | {c.provenance.value} |")
    lines += ["", *[f"- rejected `{x.repo_id}`: {x.reason.value} — {x.detail}" for x in s.rejected],
              ""]
    return lines


def _contract_gap_lines(r: OptimizationReport) -> list[str]:
    """What the engine's defaults lack and what would provide it (the engine's remedies)."""
    o, lines = r.contract_outcome, []
    if o.applied is not None:
        lines += ["", f"The baseline lacked required features "
                  f"({', '.join(g.feature for g in o.first_baseline_gaps if g.required)}); "
                  f"the run applied the candidate change `{o.applied.change}` (source: "
                  f"{o.applied.source}) and re-planned around it."]
    # Each gap with its remedy, paired so the remedy's type is narrowed to not-None.
    gaps = [(g, g.remedy) for g in o.control_gaps if g.remedy is not None]
    if gaps:
        lines += ["", "Gaps of the engine's defaults (the control) and what would provide "
                  "them:", ""] + [f"- `{g.feature}` ({g.status.value}): `{rem.change}` "
                                  f"(source: {rem.source})" for g, rem in gaps]
    return lines


def _quality_lines(r: OptimizationReport) -> list[str]:
    """One row per configuration the gate judged (repeats share a verdict), the floor first."""
    judged, seen = [], set()
    for t in r.trials:
        if t.quality is not None and t.value not in seen:
            seen.add(t.value)
            judged.append((f"`{t.trial_id}`" + (f" ({t.dimension}={t.value})" if t.value
                                                 else " (control)"), t.quality))
    head = ["", "## Quality gate (measured)", "", r.quality_note or ""]
    if not judged:
        return head + tasks_markdown(r.tasks)
    tol = judged[0][1].tolerance
    return head + ["", "Token fidelity under teacher forcing: each configuration scores the "
                   "reference's greedy tokens of a fixed prompt pool (docs/metrics.md), 8, "
                   "16, 32 ... prompts until its interval clears the threshold (the floor "
                   f"minus the tolerance {tol:g}) one way or the other; one that still "
                   "straddles it at the budget is undecided and not accepted. A candidate is "
                   "first paired against the incumbent it modifies: unchanged within the "
                   "margin it passes as lossless (it is not charged with the incumbent's own "
                   "distance); any other change is judged against the reference.", "",
                   *quality_markdown(judged), *long_markdown(_long_rows(r)),
                   *_budget_line(r), *tasks_markdown(r.tasks)]


def _long_rows(r: OptimizationReport) -> list[tuple[str, LongContextCheck]]:
    """One row per configuration whose long-context check ran (repeats share it)."""
    rows, seen = [], set()
    for t in r.trials:
        if t.long_context is not None and t.value not in seen:
            seen.add(t.value)
            rows.append((f"`{t.trial_id}`", t.long_context))
    return rows


def _budget_line(r: OptimizationReport) -> list[str]:
    """The run's quality budget: where the recommended configuration stands against the
    reference (every accepted lossy change was checked against it)."""
    t = next((t for t in r.trials if t.trial_id == r.winner_trial_id), None)
    q = t.quality if t is not None else None
    if q is None or q.candidate is None:
        return []
    agree = next((m for m in q.measures if m.measure == "top1_agreement"), None)
    if agree is None:
        return []
    c = q.candidate
    return ["", f"Quality budget: the recommended configuration reproduces "
                f"{c.top1_agreement:.1%} of the reference's tokens ({c.top1_interval.low:.1%}-"
                f"{c.top1_interval.high:.1%}, {c.positions} tokens) against a threshold of "
                f"{agree.threshold:.1%}"
                + ("; its last change was judged lossless against its incumbent"
                   if q.change == "lossless" else "") + "."]


def _plot_lines(r: OptimizationReport) -> list[str]:
    if not r.plots:
        return []
    lines = ["## Pictures (drawn from this run's records; each PNG carries its data)", ""]
    for p in r.plots:
        lines += [f"![{p.title}]({p.file})", "",
                  f"*{p.title}: {p.series} series, {p.points} points.*", ""]
    return lines


def _version_note(r: OptimizationReport) -> str | None:
    from infopt.engines import adapter_for
    from infopt.engines.base import unchecked_version_note
    from infopt.specs.base import EngineUnavailableError

    try:
        a = adapter_for(r.engine)
    except EngineUnavailableError:  # a report of an engine this build no longer has
        return None
    return unchecked_version_note(a.checked_versions, a.display_name, r.engine_version)


def _slos_missed_lines(r: OptimizationReport) -> list[str]:
    """What the report leads with when no configuration met the SLOs (issue 49)."""
    o = r.slos
    if o is None or o.met:
        return []
    return ["## No configuration meets the SLOs at the target load", "",
            f"**Binding constraint:** {o.binding}.", "",
            "Loads measured (pooled over each configuration's trials; a verdict is decided "
            "only where the exact interval on the share of requests within the limit lies "
            "wholly on one side of the percentile):", "",
            *[f"- {line}" for line in o.loads], "",
            "Smallest viable alternatives:", "",
            *[f"- {a}" for a in o.alternatives], "",
            "The configuration below is what the run would otherwise recommend; it does NOT "
            "meet the SLOs. `infopt optimize` exits with status 3 for this outcome.", ""]


def _served_reference_lines(r: OptimizationReport) -> list[str]:
    """Said up front: a quality gate against the served checkpoint's own weights judges every
    change relative to them, not to the model's full precision."""
    if r.quality_against != "served":
        return []
    return ["> **Quality relative to the served weights only.** The quality gate judged every "
            "candidate against this checkpoint itself: no checkpoint of higher precision was "
            "downloaded to serve as the reference (a shortlisted one is, with `authorize: "
            "[download]` or listed in `model.try_checkpoints`), so a loss the served "
            "quantization already has is not measured.", ""]


def _header_lines(r: OptimizationReport) -> list[str]:
    w = r.workload
    winner = next(t for t in r.trials if t.trial_id == r.winner_trial_id)
    return [
        f"# infopt optimization report — run `{r.run_id}`",
        "",
        f"Created {r.created_at}. Engine **{r.engine} {r.engine_version}**. "
        "All latencies and rates below are **measured** on this machine unless marked otherwise.",
        "",
        *([f"> {note}", ""] if (note := _version_note(r)) else []),
        *_served_reference_lines(r),
        *_slos_missed_lines(r),
        "## Runnable configuration (winner)",
        "",
        "```sh",
        r.winner_command,
        "```",
        "",
        "(`--port` was picked free for the trial; any free port works.)",
        "",
        *([f"Weights: `{r.winner_weights.path}`, {r.winner_weights.digest} "
           f"({r.winner_weights.source}); engine {r.engine} {r.engine_version}.", ""]
          if r.winner_weights else []),
        *binding_lines(r),
        "",
        *approvals_lines(r),
        *decisions_lines(r.decisions, r.gate_waits),
        *(_control_lines(r)),
        f"Winner: trial `{r.winner_trial_id}`; objective **{w.objective.value}** = "
        f"{winner.objective_value:.4g} {OBJECTIVE_UNIT[w.objective]} (measured, scenario "
        f"`{w.target_scenario}`).",
        "",
    ]


def _ladder_section(r: OptimizationReport) -> list[str]:
    return ladder_lines(r, OBJECTIVE_UNIT[r.workload.objective])


def _trial_lines(r: OptimizationReport) -> list[str]:
    lines = [
        "## Trials (measured)",
        "",
        "TTFT and ITL as p50 / p95 in ms (* = fewer than 20 samples: p95 is indicative only). "
        "Output tokens/s is the aggregate over the measured phase. \"client-bound\" marks a "
        "level where the load generator was the bottleneck, with the reason: its event-loop "
        "thread used >= 80% of a core, or its event-loop lag (p99) reached the median ITL it "
        "measured (a late loop on a machine whose cores the engine holds is not flagged).",
        "",
        "| trial | value | scenario | requests | errors | TTFT ms | ITL ms | out tok/s | "
        "checks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in r.trials:
        if t.benchmark is None:
            lines.append(f"| {t.trial_id} | {t.value or t.role} | — | — | — | — | — | — | "
                         f"failed: {t.failed} |")
            continue
        lines += [_level_row(t, s.name, s.level) for s in t.benchmark.scenarios]
    return lines


def _kernel_section(r: OptimizationReport) -> list[str]:
    return ["", *kernel_lines(r.kernel_path, r.trials)]


def _command_lines(r: OptimizationReport) -> list[str]:
    lines = ["", "### Exact command of each trial", ""]
    for t in r.trials:
        cmd = t.engine.command if t.engine else "(did not start)"
        lines += [f"- `{t.trial_id}` (startup {t.engine.startup_s:.1f} s):" if t.engine
                  else f"- `{t.trial_id}`:", f"  `{cmd}`"]
    return lines


def _contract_lines(r: OptimizationReport) -> list[str]:
    return [
        "",
        "## API contract (measured)",
        "",
        "Probed through the official `openai` and `anthropic` SDKs on the first baseline trial; "
        "streamed routes as the SDKs' helpers read them (`responses.stream()`, "
        "`chat.completions.stream()`, `messages.stream()`), every raw SSE event validated "
        "against the SDK's typed event model, required fields included. Partial support is a "
        "failure. Evidence per check: the trial's `contract/`.",
        "",
        "| route | feature | stream | result | required | detail |",
        "|---|---|---|---|---|---|",
        *[f"| `{c.route}` | {c.feature} | {c.stream} | "
          f"{c.shown} | "
          f"{'yes' if c.required else ''} | {c.detail} |" for c in r.contract],
        *_contract_gap_lines(r),
        *_quality_lines(r),
        "",
    ]


def _target_lines(r: OptimizationReport) -> list[str]:
    h = r.hardware.host
    return [
        "",
        "## Target",
        "",
        f"- Host: {h.cpu_model}, {h.usable_cpus} usable CPUs ({h.logical_cpus} logical), "
        f"{h.ram_total_bytes / GIB:.1f} GiB RAM ({h.ram_available_bytes / GIB:.1f} GiB available), "
        f"{h.os}, kernel {h.kernel}; ISA: {', '.join(h.isa_features) or 'none detected'} "
        "(read from /proc/cpuinfo).",
        f"- GPUs: {len(r.hardware.gpus)} — {r.hardware.gpu_probe}.",
        *_device_line(r),
        _bandwidth_line(r),
        _model_line(r),
        f"- Workload {describe_workload(r.workload)} Metric definitions (TTFT, ITL, TPOT, E2E, "
        "goodput): docs/metrics.md.",
        "- Routing: " + "; ".join(r.routing),
        "",
    ]


def _device_line(r: OptimizationReport) -> list[str]:
    """The device the ceilings priced: its peaks (and measured figures) with their source."""
    d = r.device
    if d is None:
        return []
    peaks = [f"{d.bandwidth_bytes_per_s / 1e12:.2f} TB/s memory" if d.bandwidth_bytes_per_s
             else "memory bandwidth not in the catalog",
             *[f"dense {k.upper()} {v / 1e12:,.0f} TFLOP/s"
               for k, v in d.dense_flops_per_s.items()]]
    measured = ([f"calibrated {d.calibrated_bandwidth_bytes_per_s / 1e9:,.1f} GB/s copy"]
                if d.calibrated_bandwidth_bytes_per_s else [])
    measured += [f"calibrated {k} GEMM {v / 1e9:,.1f} GFLOP/s"
                 for k, v in d.calibrated_flops_per_s.items()]
    return [f"- Device the ceilings price: {d.name}"
            + (f", compute capability {d.compute_capability}" if d.compute_capability else "")
            + f": {', '.join(peaks + measured)} (source: {d.source})."]


def _deployment_lines(r: OptimizationReport) -> list[str]:
    d = r.winner_deployment
    if not d:
        return []
    return ["## Deploy the winner elsewhere (rendered, not run)", "",
            f"Container (`{d.image}`), port published on 127.0.0.1 only:", "", "```sh",
            d.container_command, "```", "", "Kubernetes (Deployment + ClusterIP Service):",
            "", "```yaml", d.kubernetes_yaml.rstrip(), "```", "",
            *([f"Helm values for `{d.helm_chart}`:", "", "```yaml",
               d.helm_values_yaml.rstrip(), "```", ""] if d.helm_values_yaml else []),
            *[f"- {n}" for n in d.notes], ""]


def _notes_lines(r: OptimizationReport) -> list[str]:
    return ["## Notes", "", *[f"- {n}" for n in r.notes], ""] if r.notes else []


# The report, top to bottom: each section renders its own lines from the report (an empty list
# when the run has nothing for it).
SECTIONS: tuple[Callable[[OptimizationReport], list[str]], ...] = (
    _header_lines, _ladder_section, _plot_lines, _trial_lines,
    lambda r: speculation_lines(r.trials, OBJECTIVE_UNIT[r.workload.objective]),
    lambda r: drafter_search_lines(r.drafter_search),
    _slo_lines, _scenario_lines,
    _troubleshooting_lines, _ceiling_lines, _kv_lines, _offload_lines,
    lambda r: measured_layout_lines(r.trials), _kernel_section, _command_lines, _contract_lines,
    _target_lines, lambda r: reproduce_lines(r.reproduce), _deployment_lines,
    lambda r: _shortlist_lines(r) if r.shortlist else [], _notes_lines,
    lambda r: provenance_lines(r.provenance))


def render_markdown(r: OptimizationReport) -> str:
    return "\n".join(line for section in SECTIONS for line in section(r))
