"""The report's decisions section: each decision the run asked instead of ending (the question,
the alternatives offered, the answer and who gave it, what changed), and each gate's wait with
the work that ran meanwhile."""

from __future__ import annotations

from infopt.specs.decision import ConstraintDecision, GateWait


def decisions_lines(decisions: list[ConstraintDecision], waits: list[GateWait]) -> list[str]:
    if not decisions and not waits:
        return []
    out = ["## Decisions and waits", ""]
    for d in decisions:
        a = d.answer
        out += [f"**Gate `{d.gate_key}`:** {d.question}.", "",
                "| choice | what it changes | outcome |", "|---|---|---|",
                *[f"| `{c.key}` | {c.title} | "
                  f"{'**chosen**' if c.key == d.chosen.key else ''}"
                  f"{'' if c.resumes else ' (stops the run)'} |" for c in d.choices], "",
                f"Answered `{d.chosen.key}` ({a.source.value}) by {a.answered_by or 'nobody'} "
                f"at {a.answered_at}" + (f": {a.reason}" if a.reason else "") + ".", ""]
        if d.chosen.resumes:
            out += [f"The run went on with `{d.chosen.request_changes}` applied to the "
                    "request; every trial below ran with it.", ""]
    for w in waits:
        ran = "; ".join(w.ran_meanwhile) or ("nothing: no work independent of the answer was "
                                             "left to run")
        out.append(f"- Gate `{w.gate_key}` waited {w.waited_s:.1f} s. Ran meanwhile: {ran}.")
    return out + [""]
