"""The `infopt bench` results table (seconds -> ms here)."""

from __future__ import annotations

from infopt.specs.results import BenchResult


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1e3:.1f}"


def render_bench(r: BenchResult) -> str:
    lines = [f"{r.workload} against {r.endpoint} (model {r.model}); all figures measured", "",
             f"{'scenario':24} {'arrival':11} {'n':>4} {'err':>4} {'TTFT p50/p95/p99 ms':>22} "
             f"{'ITL p50/p95/p99 ms':>20} {'TPOT p50 ms':>11} {'out tok/s':>9} "
             f"{'total tok/s':>11} {'req/s':>6} {'goodput':>7} checks"]
    for s in r.scenarios:
        lv = s.level
        flags = []
        if not s.validation_passed:
            flags.append("VALIDATION FAILED")
        if lv.lengths_not_reached:
            flags.append(f"{lv.lengths_not_reached} short")
        if lv.prompt_lengths_off:
            flags.append(f"{lv.prompt_lengths_off} prompts off length")
        if s.clipped_inputs:
            flags.append(f"{s.clipped_inputs} prompts cut to --max-input-tokens")
        if lv.chunk_counts_assumed:
            flags.append(f"{lv.chunk_counts_assumed} chunk counts assumed")
        if lv.client_saturated:
            flags.append("client-bound" + (f": {lv.client_bound_reason}"
                                           if lv.client_bound_reason else ""))
        if missed := [f"{x.metric} p{x.percentile}" for x in s.slos if not x.met]:
            flags.append("SLO missed: " + ", ".join(missed))
        if lv.ttft_s.low_sample_p95:
            flags.append("few samples for p95/p99")
        elif lv.ttft_s.low_sample_p99:
            flags.append("few samples for p99")
        good = "—" if s.goodput_requests_per_s is None else f"{s.goodput_requests_per_s:.2f}"
        lines.append(
            f"{s.name[:24]:24} {s.arrival:11} {lv.requests:>4} {lv.errors:>4} "
            f"{_ms(lv.ttft_s.p50):>6}/{_ms(lv.ttft_s.p95)}/{_ms(lv.ttft_s.p99):<7} "
            f"{_ms(lv.itl_s.p50):>6}/{_ms(lv.itl_s.p95)}/{_ms(lv.itl_s.p99):<6} "
            f"{_ms(lv.tpot_s.p50 if lv.tpot_s else None):>11} "
            f"{lv.output_tokens_per_s:>9.1f} {lv.total_tokens_per_s:>11.1f} "
            f"{lv.requests_per_s:>6.2f} {good:>7} "
            f"{', '.join(flags) or 'ok'}")
    if r.stopped_early:
        lines.append(r.stopped_early)
    return "\n".join(lines)


def bench_failure(r: BenchResult) -> str | None:
    """Why the benchmark's numbers are not evidence, as one paragraph (the CLI exits 1 on it):
    a scenario whose every request failed, or whose records failed validation. None: they are."""
    bad = []
    for s in r.scenarios:
        lv = s.level
        if lv.requests and lv.errors == lv.requests:
            kinds = ", ".join(f"{n} {kind}" for kind, n in s.errors_by_kind.items())
            bad.append(f"{s.name}: every request failed ({kinds or f'{lv.errors} errors'})")
        elif not s.validation_passed:
            bad.append(f"{s.name}: the records failed validation ("
                       + "; ".join(s.validation_failures) + ")")
    if not bad:
        return None
    reasons = "; ".join(bad).replace("\n", " ")  # one paragraph, whatever a check printed
    return (f"the benchmark ran, but its numbers are not evidence: {reasons}. Check the "
            "server's log and --model; --out keeps every request's record")
