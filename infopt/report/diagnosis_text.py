"""Plain-text view of a Diagnosis for `infopt diagnose`."""

from __future__ import annotations

from infopt.specs.diagnosis import Diagnosis


def render_diagnosis(d: Diagnosis) -> str:
    lines = [f"Root error ({d.category.value}, engine {d.engine}):", f"  {d.root_error}", ""]
    if d.context:
        lines += ["Context:", *[f"  | {c[:200]}" for c in d.context], ""]
    if d.known_failure_ids:
        lines.append(f"Known failure(s): {', '.join(d.known_failure_ids)}")
    if d.matches:
        lines.append("Upstream:")
        lines += [f"  [{m.source} {m.score:.2f}] {m.title} — {m.url}" for m in d.matches[:8]]
    if d.remedies:
        lines.append("Remedies:")
        for r in d.remedies:
            tags = ["keeps the contract" if r.preserves_contract else "CHANGES the contract"]
            if r.diagnostic_only:
                tags.append("diagnostic only, not a final setting")
            if r.action == "upgrade":
                tags.append(f"upgrade: {r.engine_version}")
            elif r.action == "route":
                tags.append(f"route to: {', '.join(str(e) for e in r.route_to)}")
            lines.append(f"  - {r.change} ({'; '.join(tags)})")
    lines.append(f"Search: {d.search}")
    return "\n".join(lines)
