"""The report's binding and approvals sections: where every engine really listened (read from
its sockets, never from a constant), and every gate with its answer."""

from __future__ import annotations

import statistics

from infopt.specs.approval import is_loopback
from infopt.specs.results import OptimizationReport
from infopt.tuning.search import higher_is_better


def _loopback(addr: str) -> bool:
    return is_loopback(addr.rsplit(":", 1)[0].strip("[]"))


def binding_lines(r: OptimizationReport) -> list[str]:
    seen = [(t.trial_id, t.engine.bind_addresses) for t in r.trials if t.engine]
    unread = [tid for tid, addrs in seen if not addrs]
    wide = [(tid, a) for tid, addrs in seen for a in addrs if not _loopback(a)]
    out = [f"Bind addresses, read from each engine's listening sockets: {len(seen) - len(unread)}"
           f" of {len(seen)} trial engines read, "
           + ("all on loopback" if not wide else
              "NOT all on loopback: " + "; ".join(f"`{t}` {a}" for t, a in wide))
           + (f" ({len(unread)} not readable: {', '.join(unread[:4])})" if unread else "")
           + ". The runnable command binds 127.0.0.1; serving beyond it needs the expose gate."]
    e = r.exposure
    if e is not None and e.approved:
        out.append(f"Exposed after the expose gate: listening on {', '.join(e.bind_addresses)}; "
                   f"API key required ({e.api_key_env}, kept in {e.api_key_source}); auth "
                   f"check: {e.auth_check}.")
        out += ["", "```sh", e.command or "", "```"]
    elif e is not None:
        out.append(f"Exposure on {e.address} was asked for and {e.note}.")
    return out


def approvals_lines(r: OptimizationReport) -> list[str]:
    out = ["## Approvals", ""]
    if not r.approvals:
        return out + ["No gate was needed: nothing was downloaded, quantized or exposed.", ""]
    out += ["| gate | kind | what | answer | by | when | reason |", "|---|---|---|---|---|---|---|"]
    for a in r.approvals:
        verdict = ("approved" if a.approved else "denied") + f" ({a.source.value})"
        out.append(f"| `{a.key}` | {a.kind.value} | {a.title} | {verdict} | "
                   f"{a.answered_by or '-'} | {a.answered_at} | {a.reason or '-'} |")
    return out + [""]


def weight_lines(r: OptimizationReport, unit: str) -> list[str]:
    """The weight variants made behind the quantize gate, beside the baseline they modify."""
    trials = [t for t in r.trials if t.role == "weights"]
    if not trials:
        return []
    base = r.tuning.medians.get(r.tuning.baseline_value) if r.tuning else None
    out = ["## Weight candidates made here (behind the quantize gate)", "",
           "The baseline with only its weights changed; judged by the quality gate before it "
           "was measured. Not part of the tuning decision above (the weights dimension of the "
           "tuning ladder decides among them).", "",
           f"| variant | quality | median objective ({unit}) | repeats | vs baseline median "
           f"({'higher' if higher_is_better(r.workload.objective) else 'lower'} is better) |",
           "|---|---|---|---|---|"]
    for value in dict.fromkeys(t.value for t in trials):
        rows = [t for t in trials if t.value == value]
        got = [t.objective_value for t in rows if t.objective_value is not None]
        med = statistics.median(got) if got else None
        q = rows[0].quality
        verdict = ("not judged" if q is None else "pass" if q.passed else
                   "FAIL: " + ", ".join(m.measure for m in q.measures if not m.passed))
        ratio = f"{med / base:.2f}x" if med is not None and base else "-"
        failed = next((t.failed for t in rows if t.failed), None)
        out.append(f"| {value} | {verdict} | {f'{med:.4g}' if med is not None else '-'} | "
                   f"{len(got)} of {len(rows)} | {ratio}"
                   + (f" ({failed[:80]})" if failed and med is None else "") + " |")
    return out + [""]
