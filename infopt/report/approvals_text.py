"""The report's binding and approvals sections: where every engine really listened (read from
its sockets, never from a constant), and every gate with its answer."""

from __future__ import annotations

from infopt.specs.approval import is_loopback
from infopt.specs.results import OptimizationReport


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
        verdict = (f"chose `{a.choice}`" if a.choice else
                   "approved" if a.approved else "denied") + f" ({a.source.value})"
        out.append(f"| `{a.key}` | {a.kind.value} | {a.title} | {verdict} | "
                   f"{a.answered_by or '-'} | {a.answered_at} | {a.reason or '-'} |")
    return out + [""]
