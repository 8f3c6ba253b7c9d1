"""The ladder's decisions, pure and free of engine imports so the climb (infopt.tuning.climb)
replays without them: the candidates a rule derives that change the incumbent, when an ordered
series stops climbing, and the unpaired judgement of two engines' winners (engine_choice; the
ladder's paired verdicts are infopt.tuning.rounds'). Objective values are in the
workload objective's own unit (tokens/s, requests/s or seconds)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infopt.analysis.compare import bootstrap_diff
from infopt.analysis.stats import median_and_spread
from infopt.specs.comparison import Comparison
from infopt.specs.ladder import LadderCandidate
from infopt.specs.serving import AnyServingConfig, knob_value, with_knobs

if TYPE_CHECKING:  # the rules are the adapters' data, passed in: never imported here
    from infopt.engines.rules import DimensionRule, LadderFacts
    from infopt.tuning.rounds import RoundsPolicy

# Confirmations a step may spend after screening: the best two promising candidates.
CONFIRMATIONS_PER_STEP = 2


def derive(rule: DimensionRule | None, engine: str, incumbent: AnyServingConfig, facts: LadderFacts
           ) -> list[LadderCandidate] | str:
    """The rule's candidates that change the incumbent (and validate as its config), or why
    the step has none."""
    if rule is None:
        return f"no rule for this dimension is declared for {engine}"
    out = rule.derive(incumbent, facts)
    if isinstance(out, str):
        return out
    kept = [c for c in out if _changes_something(incumbent, c)]
    return kept or "every derived value is what the incumbent already runs"


def _changes_something(config: AnyServingConfig, c: LadderCandidate) -> bool:
    return any(knob_value(config, k) != v for k, v in c.changes.items())


def apply(config: AnyServingConfig, c: LadderCandidate) -> AnyServingConfig:
    return with_knobs(config, c.changes)


def better(a: float, b: float, higher: bool) -> bool:
    """a strictly better than b."""
    return a > b if higher else a < b


def series_stops(previous: float | None, screen: float, higher: bool) -> bool:
    """An ordered series (slots 2, 4, 8) stops climbing at the first value that measures no
    better than the value before it."""
    return previous is not None and not better(screen, previous, higher)


def judge(incumbent: list[float], cand: list[float], higher: bool, seed: int,
          min_gain: float) -> tuple[bool, Comparison | None, str]:
    """(accepted, comparison, why): the bootstrap interval of candidate - incumbent over their
    repeated trials must lie wholly on the better side, beyond `min_gain` of the incumbent."""
    if len(incumbent) < 2 or len(cand) < 2:
        return False, None, (f"{len(incumbent)} incumbent and {len(cand)} candidate "
                             "measurement(s): at least 2 each are needed to tell a gain from "
                             "noise (raise repeats)")
    cmp = bootstrap_diff(incumbent, cand, higher_is_better=higher, seed=seed,
                         min_rel_diff=min_gain)
    if cmp.verdict == "b_better":
        return True, cmp, (f"beats the incumbent: median {cmp.b_value:.4g} vs "
                           f"{cmp.a_value:.4g}, {cmp.ci:.0%} interval of the difference "
                           f"[{cmp.ci_low:.4g}, {cmp.ci_high:.4g}]")
    return False, cmp, (f"the {cmp.ci:.0%} interval of the difference [{cmp.ci_low:.4g}, "
                        f"{cmp.ci_high:.4g}] does not clear the noise")


def median(values: list[float]) -> float | None:
    return median_and_spread(values)[0]


def rule_text(objective: str, higher: bool, min_gain: float, policy: RoundsPolicy) -> str:
    return (f"one dimension at a time in the specification's order; each candidate screened "
            f"with one paired round against the incumbent, the promising ones confirmed with "
            f"{policy.text()}; accepted on a gain ({'higher' if higher else 'lower'} "
            f"{objective} is better" + (f", margin {min_gain:.0%}" if min_gain else "")
            + ") or a tie won on the secondary measures, every gate passed; the accepted "
            "change carries into the next dimension; the winner is then compared with the "
            "engine's defaults the same way, and the defaults are recommended unless beaten "
            "or unfit for a hard requirement")
