"""Which engine's winner the run recommends when a comparator was tuned beside the routed
engine: the routed one unless the other's beats it beyond the noise and by a switch margin.
Pure."""

from __future__ import annotations

from infopt.specs.ladder import EngineChoice, EngineResult
from infopt.tuning.decide import judge

# Within a ladder the candidate's repeats alternate with the incumbent's, so drift hits both;
# the two engines' winners are measured in separate windows (all of one engine's trials, then
# the other's), and slow drift between the windows (other load, clocks, thermals) is outside
# the bootstrap interval. A switch of engine must therefore clear this margin as well as the
# request's own min_gain; a smaller decided difference is reported as practically equal. 2%
# is an assumption of the size of run-to-run drift on a shared machine, stated in the report.
ENGINE_SWITCH_MARGIN = 0.02


def engine_choice(results: list[EngineResult], higher: bool, seed: int, min_gain: float
                  ) -> EngineChoice:
    """The routed engine's winner unless the comparator's beats it beyond the noise (the
    same bootstrap rule as every ladder step) and by ENGINE_SWITCH_MARGIN; a failed engine
    cannot win, nor one that misses the SLOs while another meets them."""
    slo = _slo_choice(results)
    if slo is not None:
        return slo
    routed, others = results[0], [r for r in results[1:] if r.failed is None]
    if routed.failed is not None:
        if not others:
            raise ValueError("no engine produced a result")  # the flow re-raises before this
        return EngineChoice(results=results, chosen=others[0].engine, reason=(
            f"the routed engine {routed.engine} failed ({routed.failed}); {others[0].engine} "
            "is recommended"))
    if not others:
        why = next((f"{r.engine} failed: {r.failed}" for r in results[1:]), None)
        return EngineChoice(results=results, chosen=routed.engine, reason=(
            "only the routed engine was tuned" + (f" ({why})" if why else "")))
    comp = others[0]
    margin = max(min_gain, ENGINE_SWITCH_MARGIN)
    ok, cmp, why = judge(routed.winner_values, comp.winner_values, higher, seed, margin)
    if not ok and cmp is not None and cmp.verdict == "no_difference":
        small = _below_switch_margin(routed, comp, higher, seed, min_gain, margin)
        if small is not None:
            return EngineChoice(results=results, chosen=routed.engine, comparison=cmp,
                                reason=small)
    if ok:
        return EngineChoice(results=results, chosen=comp.engine, comparison=cmp, reason=(
            f"the comparator {comp.engine}'s winner ({comp.winner_label}) "
            + why.replace("the incumbent", f"{routed.engine}'s ({routed.winner_label})")))
    verb = "does not beat"
    if cmp is not None and cmp.verdict == "a_better":
        verb = "is worse than"
        why = f"95% interval of the difference [{cmp.ci_low:.4g}, {cmp.ci_high:.4g}]"
    return EngineChoice(results=results, chosen=routed.engine, comparison=cmp, reason=(
        f"{comp.engine}'s winner ({comp.winner_label}, median {comp.winner_median:.4g}) {verb} "
        f"{routed.engine}'s ({routed.winner_label}, median {routed.winner_median:.4g}) beyond "
        f"the noise: {why}; the routed engine stands"))


def _below_switch_margin(routed: EngineResult, comp: EngineResult, higher: bool, seed: int,
                         min_gain: float, margin: float) -> str | None:
    """Why the routed engine stands when the comparator is better beyond the noise but by
    less than the switch margin (None when the noise alone decides it)."""
    ok, cmp, _ = judge(routed.winner_values, comp.winner_values, higher, seed, min_gain)
    if not ok or cmp is None:
        return None
    gain = abs(cmp.diff) / abs(cmp.a_value) if cmp.a_value else 0.0
    return (f"{comp.engine}'s winner ({comp.winner_label}, median {comp.winner_median:.4g}) "
            f"is better than {routed.engine}'s ({routed.winner_label}, median "
            f"{routed.winner_median:.4g}) by {gain:.1%} (95% interval of the difference "
            f"[{cmp.ci_low:.4g}, {cmp.ci_high:.4g}]), under the {margin:.0%} an engine switch "
            "must clear: the engines were measured in separate windows, so drift between them "
            "is outside the interval; practically equal, the routed engine stands")


def _slo_choice(results: list[EngineResult]) -> EngineChoice | None:
    """The SLOs bind before speed: when some engines' recommendations meet them and others'
    do not, the first that meets them (the routed one when it does) is chosen."""
    ran = [r for r in results if r.failed is None]
    meets = [r for r in ran if r.slos_met is not False]
    if not meets or len(meets) == len(ran):
        return None  # all meet, none do, or none was judged: speed decides
    missed = ", ".join(r.engine for r in ran if r.slos_met is False)
    return EngineChoice(results=results, chosen=meets[0].engine, reason=(
        f"{missed}'s recommended configuration misses the SLOs at the target load; "
        f"{meets[0].engine}'s meets them, so it is chosen whatever the speed"))
