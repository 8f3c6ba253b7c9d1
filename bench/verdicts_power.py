"""The pure parts of the regression rule's power run (`python -m bench.verdicts_bench --power`,
issue 47): the pace of a build planted a given share slower, the order of the conditions, one
`reoptimize` report as a decision, and the decisions per planted slowdown as misses, false
alarms, a confirmed share with its exact interval, and rounds. No engine, no Prefect.

A slowdown is the share of performance lost: a build 25% slower has a performance ratio new/old
of 0.75 (the ratio the rule judges, infopt.tuning.regression), every paced token 1/0.75 times
later than the baseline's."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

SLOWDOWNS = (0.0, 0.10, 0.25, 0.50)  # performance lost (1 - new/old); 0: the same build
DEFAULT_TRIALS = 3  # decisions per slowdown: ~25 min in all on 2 cores (verdicts_bench)
CONFIDENCE = 0.95  # of the confirmed share's interval


def pace_factor(slowdown: float) -> float:
    """How many times later every scheduled token leaves for a build `slowdown` slower: a closed
    loop's throughput is streams x tokens / request time, so a performance ratio new/old of
    1 - slowdown is a request time 1 / (1 - slowdown) times the baseline's."""
    if not 0.0 <= slowdown < 1.0:
        raise ValueError(f"slowdown {slowdown}: a share of the performance lost, in [0, 1)")
    return 1.0 / (1.0 - slowdown)


def paced_times(unit_s: float, tokens: int, slowdown: float) -> tuple[float, float]:
    """(ttft_s, itl_s) of tests/paced_build.py for a build `slowdown` slower than the baseline's
    pace: the baseline releases the first event `unit_s` after the request and each next one
    2 x unit_s / tokens later (a request ~3 x unit_s, unit_s being what this machine's engine
    took for it: tests/flows/test_reoptimize_flow.py's pace), and every time here is
    pace_factor(slowdown) times that, so a request of any number of events lasts that many
    times longer while the engine stays faster than the pace."""
    f = pace_factor(slowdown)
    return f * unit_s, f * 2.0 * unit_s / tokens


def rotated(slowdowns: tuple[float, ...], trial: int) -> list[float]:
    """Trial `trial`'s order (0-based): each trial starts one condition later, so every
    condition runs early and late alike."""
    k = trial % len(slowdowns)
    return [*slowdowns[k:], *slowdowns[:k]]


@dataclass(frozen=True)
class Decision:
    """One run of `reoptimize` against a paced build."""
    slowdown: float
    trial: int  # 1-based
    outcome: str | None  # the report's; None: the flow returned no report
    flagged: tuple[bool, ...] = ()  # per round: whether a check flagged a regression
    ratios: tuple[float, ...] = ()  # every check's performance ratio new/old, every round
    unmeasured: bool = False  # a check had no fresh trial: the build served nothing
    wall_s: float = 0.0
    run_id: str | None = None
    note: str = ""  # the error, or the report's summary

    @property
    def rounds(self) -> int:
        return len(self.flagged)

    @property
    def decision(self) -> str:
        """confirmed / no regression / undecided (flagged, not confirmed) / error (no report,
        or a verdict on a build that measured nothing: not a decision about speed)."""
        if self.outcome is None or self.unmeasured:
            return "error"
        if self.outcome == "regression":
            return "confirmed"
        return "undecided" if self.outcome == "suspected regression" else "no regression"

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "rounds": self.rounds, "decision": self.decision}


def decision_of(rep, slowdown: float, trial: int, wall_s: float) -> Decision:
    from infopt.specs.reoptimize import ReoptimizeReport

    if not isinstance(rep, ReoptimizeReport):
        return Decision(slowdown, trial, None, wall_s=wall_s, note=repr(rep)[:500])
    return Decision(slowdown, trial, rep.outcome,
                    flagged=tuple(r.regressed for r in rep.rounds),
                    ratios=tuple(c.ratio for r in rep.rounds for c in r.checks if c.fresh),
                    unmeasured=any(not c.fresh for r in rep.rounds for c in r.checks),
                    wall_s=wall_s, run_id=rep.run_id, note=rep.summary)


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> list[float] | None:
    """The exact binomial interval of k successes in n (None: no trial)."""
    from scipy.stats import beta

    if n == 0:
        return None
    a = (1.0 - confidence) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return [low, high]


def tabulate(decisions: list[Decision], slowdowns: tuple[float, ...]) -> list[dict[str, Any]]:
    """Per slowdown: the decisions by kind; misses (a planted slowdown not confirmed) and false
    alarms (the same build confirmed as a regression) among the decisions that measured; the
    confirmed share with its interval (the power, or the false-alarm rate at 0%); rounds."""
    rows = []
    for s in slowdowns:
        ds = [d for d in decisions if d.slowdown == s]
        kinds = {k: [d for d in ds if d.decision == k]
                 for k in ("confirmed", "no regression", "undecided", "error")}
        valid = [d for d in ds if d.decision != "error"]
        n_conf = len(kinds["confirmed"])
        rows.append({
            "slowdown": s, "planted_ratio": 1.0 - s, "decisions": len(ds),
            **{k.replace(" ", "_"): len(v) for k, v in kinds.items()},
            "misses": len(valid) - n_conf if s > 0 else None,
            "false_alarms": n_conf if s == 0 else None,
            "confirmed_share": n_conf / len(valid) if valid else None,
            "confirmed_interval": clopper_pearson(n_conf, len(valid)),
            "rounds_to_confirm": spread([d.rounds for d in kinds["confirmed"]]),
            "rounds": spread([d.rounds for d in valid]),
            "first_round_flags": sum(d.flagged[0] for d in valid if d.flagged),
            "measured_ratio": spread([r for d in valid for r in d.ratios]),
            "wall_s": spread([d.wall_s for d in ds])})
    return rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _range(sp: dict[str, float] | None, fmt: str = "{:.3g}") -> str:
    if sp is None:
        return "-"
    f = fmt.format
    return f(sp["median"]) if sp["min"] == sp["max"] else \
        f"{f(sp['median'])} [{f(sp['min'])}, {f(sp['max'])}]"


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| planted slowdown | ratio planted | ratio measured, median [range] | decisions | "
            "confirmed | no regression | undecided | errors | misses | false alarms | "
            "confirmed share [95% CI] | rounds to confirm | first rounds flagged | "
            "s per decision |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        ci = r["confirmed_interval"]
        share = "-" if ci is None else \
            f"{_pct(r['confirmed_share'])} [{_pct(ci[0])}, {_pct(ci[1])}]"
        valid = r["decisions"] - r["error"]
        lines.append(
            f"| {'0% (same build)' if r['slowdown'] == 0 else _pct(r['slowdown'])} | "
            f"{r['planted_ratio']:.2f} | {_range(r['measured_ratio'], '{:.3f}')} | "
            f"{r['decisions']} | {r['confirmed']} | {r['no_regression']} | {r['undecided']} | "
            f"{r['error']} | {'-' if r['misses'] is None else r['misses']} | "
            f"{'-' if r['false_alarms'] is None else r['false_alarms']} | {share} | "
            f"{_range(r['rounds_to_confirm'])} | {r['first_round_flags']} of {valid} | "
            f"{_range(r['wall_s'], '{:.0f}')} |")
    return "\n".join(lines)


def parse_slowdowns(text: str) -> tuple[float, ...]:
    """"0,10,25,50" (percent) -> (0.0, 0.1, 0.25, 0.5)."""
    out = tuple(float(x) / 100 for x in text.split(",") if x.strip())
    if not out:
        raise ValueError(f"{text!r}: name at least one slowdown, in percent (e.g. 0,10,25,50)")
    for s in out:
        pace_factor(s)  # in [0, 1)
    return out
