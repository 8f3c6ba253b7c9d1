"""The quality verdict as text: the terminal table of `infopt quality` and the report's quality
section. Every number with its sample count; the floor beside each measure."""

from __future__ import annotations

from infopt.specs.quality import (
    FidelityResult,
    LongContextCheck,
    QualityVerdict,
    TaskSetOutcome,
)


def _row(label: str, f: FidelityResult) -> str:
    return (f"{label:10} {f.positions:>6} {f.top1_agreement:>8.1%} "
            f"{f.top1_interval.low:>6.1%}-{f.top1_interval.high:<6.1%} "
            f"{f.delta_p_mean:>+9.4f} {f.delta_p_p05:>+8.3f} {f.perplexity_ratio:>9.4f} "
            f"{f.kl_lower_bound_mean_nats:>9.4f}  {_divergence(f)}")


def _divergence(f: FidelityResult) -> str:
    return ",".join("-" if d is None else str(d) for d in f.first_divergence)


def render_verdict(v: QualityVerdict) -> str:
    head = (f"{'':10} {'tokens':>6} {'top-1':>8} {'95% interval':13} {'mean dp':>9} "
            f"{'p05 dp':>8} {'ppl ratio':>9} {'KL>= nats':>9}  first divergence per prompt")
    lines = [head] if v.candidate is not None else [f"token fidelity: {v.fidelity_note}"]
    if v.floor is not None:
        lines.append(_row("floor", v.floor))
    if v.candidate is not None:
        lines.append(_row("candidate", v.candidate))
    if v.candidate is not None and v.candidate.unscored_positions:
        lines.append(f"({v.candidate.unscored_positions} positions the servers could not report "
                     "were left out)")
    if v.candidate_tasks:
        ref = {t.set_name: t for t in v.reference_tasks}
        lines.append(f"{'task set':12} {'reference':>10} {'candidate':>10}  candidate 95%")
        lines += [f"{t.set_name:12} {ref[t.set_name].passed:>5}/{ref[t.set_name].total:<4} "
                  f"{t.passed:>5}/{t.total:<4}  {t.interval.low:.0%}-{t.interval.high:.0%}"
                  for t in v.candidate_tasks]
    lines += [f"{'PASS' if m.passed else 'OPEN' if m.undecided else 'FAIL'} {m.why}"
              for m in v.measures]
    if v.looks:
        lines.append(f"prompts scored per look: {', '.join(map(str, v.looks))} (budget "
                     f"{v.prompt_budget}; each look's intervals at "
                     f"{v.candidate.top1_interval.confidence:.1%}, 95% over all looks)"
                     if v.candidate is not None else "")
    lines.append({"pass": "PASSED: ", "fail": "FAILED: ", "undecided": "UNDECIDED: "}[
        v.decision or ("pass" if v.passed else "fail")] + v.summary)
    return "\n".join(line for line in lines if line)


def verdict_cell(v: QualityVerdict) -> str:
    """The report's verdict column: the decision, how it was reached, and where it came from."""
    failed = [m.measure for m in v.measures if not m.passed and not m.undecided]
    cell = {"pass": "pass", "fail": "FAIL: " + ", ".join(failed),
            "undecided": "UNDECIDED (not accepted)"}[v.decision or "fail"]
    if v.change == "lossless" and v.paired is not None:
        cell += (f"; lossless vs its incumbent (drop {v.paired.drop:+.1%}, "
                 f"<= {v.paired.margin:.1%})")
    elif v.change == "lossy":
        cell += "; judged against the reference"
    if v.looks:
        cell += f"; {v.looks[-1]} prompts"
    if v.reused_from is not None:
        cell += (f"; reused from run {v.reused_from.run_id}, trial {v.reused_from.trial_id} "
                 f"({v.reused_from.made_at})")
    return cell


def quality_markdown(rows: list[tuple[str, QualityVerdict]]) -> list[str]:
    """The report's quality table: one row per judged configuration, the floor first."""
    if not rows:
        return []
    out = ["| configuration | tokens | top-1 agreement (95% CI) | mean dp | ppl ratio | "
           "KL lower bound (nats) | verdict |", "|---|---|---|---|---|---|---|"]
    floor = rows[0][1].floor
    if floor is not None:
        out.append(_md("noise floor (reference restarted)", floor, "sets the thresholds"))
    for name, v in rows:
        if v.candidate is None:  # not in a run: every trial's engine has exact scoring
            continue
        out.append(_md(name, v.candidate, verdict_cell(v)))
    return out


def _md(name: str, f: FidelityResult, verdict: str) -> str:
    return (f"| {name} | {f.positions} | {f.top1_agreement:.1%} ({f.top1_interval.low:.1%}-"
            f"{f.top1_interval.high:.1%}) | {f.delta_p_mean:+.4f} | {f.perplexity_ratio:.4f} | "
            f"{f.kl_lower_bound_mean_nats:.4f} (lower bound) | {verdict} |")


def long_markdown(rows: list[tuple[str, LongContextCheck]]) -> list[str]:
    """The long-context checks: one row per configuration that changed KV precision or
    weights, judged on prompts at half the served context or more."""
    if not rows:
        return []
    first = rows[0][1]
    out = ["", f"Long-context check (a change of KV precision or weights, before it is "
           f"promoted): the reference's continuations of prompts of "
           f"{min(first.prompt_tokens):,}-{max(first.prompt_tokens):,} tokens of the "
           f"{first.served_context_tokens:,}-token served context, judged like the short "
           "pool against the same floor and tolerance"
           + (f" (shortened: {first.shortened})" if first.shortened else "") + ".", "",
           "| configuration | change | tokens | top-1 agreement (95% CI) | ppl ratio | verdict |",
           "|---|---|---|---|---|---|"]
    for name, c in rows:
        f = c.verdict.candidate
        if f is None:
            continue
        out.append(f"| {name} | {c.reason} | {f.positions} | {f.top1_agreement:.1%} "
                   f"({f.top1_interval.low:.1%}-{f.top1_interval.high:.1%}) | "
                   f"{f.perplexity_ratio:.4f} | {verdict_cell(c.verdict)} |")
    return out


def tasks_markdown(t: TaskSetOutcome | None) -> list[str]:
    """The generative task sets: the reference's and the recommended configuration's pass
    counts on the same items, with intervals and each set's paired verdict."""
    if t is None:
        return []
    ref = {r.set_name: r for r in t.reference}
    verdict = {v.measure.removeprefix("task:"): v for v in t.verdicts}
    out = ["", f"Generative task sets ({t.items_per_set} items per set, greedy, exact checks; "
           f"the same items on both; recommended: `{t.winner_trial_id}`). A set regresses only "
           "on a paired drop beyond its noise (McNemar one-sided p < 0.05) and beyond the "
           "tolerance.", "",
           "| set | reference | recommended (95% CI) | verdict (McNemar one-sided) |", "|---|---|---|---|"]
    for w in t.winner:
        r, v = ref[w.set_name], verdict[w.set_name]
        out.append(f"| {w.set_name} | {r.passed}/{r.total} | {w.passed}/{w.total} "
                   f"({w.interval.low:.0%}-{w.interval.high:.0%}) | "
                   f"{'pass' if v.passed else 'REGRESSED'} (p = {v.p_value:.3f}) |")
    out += [f"- Not recommended despite its speed: {e}" for e in t.excluded]
    return out
