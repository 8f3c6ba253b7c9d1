"""The re-optimization's words: a one-line summary and reoptimize.md (every ratio with its
interval and the rule that judged it; every fresh trial with its objective)."""

from __future__ import annotations

from infopt.specs.reoptimize import ReoptimizeReport, ReoptimizeRequest

_UNITS = {"throughput": "output tok/s", "goodput": "good req/s", "latency": "s TPOT p50"}


def summary(r: ReoptimizeReport, req: ReoptimizeRequest) -> str:
    head = f"{r.engine} {r.stored_version} -> {r.installed_version}"
    if r.outcome == "no upgrade":
        return (f"no upgrade: {r.engine} is still {r.installed_version} (the accepted run "
                f"{r.baseline_run}'s); nothing re-measured. {r.release.note}")
    last = r.rounds[-1].checks
    worst = min(last, key=lambda c: c.ratio)
    what = {"regression": f"REGRESSION confirmed over {len(r.rounds)} round(s)",
            "suspected regression": "a drop flagged, not confirmed",
            "improvement": "faster beyond the noise",
            "no change": "no change beyond the noise"}[r.outcome]
    out = (f"{head}: {what}; {worst.label} at {worst.ratio:.3f}x the accepted run "
           f"[{worst.ratio_low:.3f}, {worst.ratio_high:.3f}]")
    if r.outcome == "regression":
        out += (f"; re-tune: `infopt optimize --target runs/{r.baseline_run}/request.json`, "
                f"then `infopt accept` its run" if not req.retune else "")
    return out


def render_reoptimize(r: ReoptimizeReport, req: ReoptimizeRequest) -> str:
    unit = _UNITS.get(r.objective, r.objective)
    lines = [f"# Re-optimization {r.run_id}", "", f"**{r.outcome.upper()}**: {r.summary}", "",
             f"- accepted run: `{r.baseline_run}` measured on {r.engine} {r.stored_version}",
             f"- installed build: {r.installed_version} ({'upgraded' if r.upgraded else 'same'})",
             f"- package index ({r.release.index_url}): {r.release.note}",
             f"- objective: {r.objective} ({unit}, "
             f"{'higher' if r.higher_is_better else 'lower'} is better)",
             f"- rule: a regression is a ratio whose {req.confidence:.0%} interval lies wholly "
             f"under {req.bound:g}, in {req.confirm_rounds} consecutive rounds of "
             f"{req.repeats} fresh starts per configuration; the trial (a fresh engine start) "
             "is the unit of replication", ""]
    for rnd in r.rounds:
        lines += [f"## Round {rnd.round}", "",
                  f"| configuration | stored ({unit}) | fresh ({unit}) | ratio | interval | "
                  "verdict |", "|---|---|---|---|---|---|"]
        for c in rnd.checks:
            lines.append(f"| {c.label} | {', '.join(f'{v:.4g}' for v in c.stored)} | "
                         f"{', '.join(f'{v:.4g}' for v in c.fresh) or 'none'} | "
                         f"{c.ratio:.3f} | [{c.ratio_low:.3f}, {c.ratio_high:.3f}] | "
                         f"{c.verdict} |")
        lines += [""] + [f"- {c.label}: {c.rule}" for c in rnd.checks] + [""]
    if r.trials:
        lines += ["## Fresh trials (measured)", "", f"| trial | configuration | {unit} | "
                  "failed |", "|---|---|---|---|"]
        lines += [f"| {t.trial_id} | {t.value} | "
                  f"{'' if t.objective_value is None else f'{t.objective_value:.4g}'} | "
                  f"{t.failed or ''} |" for t in r.trials]
        lines.append("")
    if r.retune_run:
        gate = (f" (promote gate: {r.promotion.source.value}"
                f"{', ' + r.promotion.answered_by if r.promotion.answered_by else ''}"
                f"{': ' + r.promotion.reason if r.promotion.reason else ''})"
                if r.promotion else "")
        lines += [f"Re-tune: run `{r.retune_run}`, "
                  f"{'promoted' if r.promoted else 'not promoted'}{gate}.", ""]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    return "\n".join(lines)
