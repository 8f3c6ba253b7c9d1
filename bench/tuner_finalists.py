"""The tuner bench's finalists (bench/tuner_bench.py), pure: after the searches of a seed, the
configurations in contention are measured again in fresh rounds, and each method's pick is
scored by those rounds instead of by the search that chose it.

Why (issue 47): the grid's best by its search medians is the largest of 42 medians of 2 noisy
trials, inflated by about the noise's upper tail (the winner's curse); a pick scored by the
same campaign, or by its own selected median, carries the same bias. Here:

- finalists (`select`): the grid's top `TOP` configurations by their search medians and each
  method's pick (the ladder's recommendation, TPE's and random search's best single
  measurement), one entry per configuration (a pick the grid also ranks keeps both roles);
- rounds (`remeasure`, a generator behind the climb's interface): every finalist once per round,
  each round with prompts of its own (a trial seed no search used), in mirrored pairs (the
  second round of a pair is the first reversed, each pair starting one finalist later), so a
  drift that is linear across a pair of rounds hits every position alike;
- scores (`score`): a pick's median over the rounds; the grid's best is the grid finalist with
  the best re-measured median. It is chosen on the same rounds it is scored by, so what is left
  of the curse (a maximum of `TOP` medians) is on the grid's side: ladder/grid is conservative;
- ratios (`seed_ratios`): ladder/grid-best, ladder/TPE and ladder/random per seed, Student's t
  on the per-round log ratios (infopt.analysis.paired.paired_compare; a round where either
  failed is left out); over seeds (`pooled`) two ways, both stated in the output: the per-round
  log ratios of every seed in one t interval (the headline: these seeds' picks against the
  measurement noise), and each seed's geometric means as one pair, t over seeds (a new seed's
  spread included; wide with 3 seeds, 2 degrees of freedom);
- launch shares against a one-pass grid: launches over the number of configurations (the
  grid's repeats are its noise control, not its search).

Values are the objective in its own units (output tokens/s for the bench); higher is better
unless `higher=False`."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from infopt.analysis.paired import paired_compare
from infopt.specs.paired import PairedComparison
from infopt.specs.results import Trial
from infopt.specs.serving import same_config
from infopt.specs.trial import TrialRole, TrialSpec, changes_from

TOP = 5  # the grid's finalists
CONFIDENCE = 0.95
# Finalist rounds' prompt seeds: far above any seed a search uses (the climb's run from its
# plan seed up by one per paired round; the grid, TPE and random search use the plan seed).
FRESH_SEED = 10_000
RATIOS = {"ladder/grid": "grid", "ladder/tpe": "tpe", "ladder/random": "random"}
POOLING = {
    "rounds": "per-round log ratios of every seed pooled, Student's t (these seeds' picks "
              "against measurement noise)",
    "seeds": "each seed's geometric-mean ratio as one value, Student's t over seeds (a new "
             "seed's spread included)"}


@dataclass
class Finalist:
    name: str  # a trial-id fragment: the space's label, or "<method>-pick" outside the space
    config: Any
    roles: list[str] = field(default_factory=list)  # "grid#1".."grid#5", "ladder", "tpe", ...


def select(ranked: Sequence[tuple[str, Any]], picks: dict[str, tuple[str, Any] | None],
           top: int = TOP, same: Callable[[Any, Any], bool] = same_config) -> list[Finalist]:
    """The grid's first `top` of `ranked` ((label, config), best search median first) and each
    method's pick ((name, config), None when it measured nothing), one per configuration."""
    out: list[Finalist] = []

    def add(name: str, config: Any, role: str) -> None:
        for f in out:
            if same(f.config, config):
                f.roles.append(role)
                return
        out.append(Finalist(name, config, [role]))

    for i, (label, config) in enumerate(ranked[:top]):
        add(label, config, f"grid#{i + 1}")
    for method, pick in picks.items():
        if pick is not None:
            add(pick[0], pick[1], method)
    return out


def ranked_by(medians: dict[str, float], higher: bool = True) -> list[str]:
    """Labels best median first; equal medians in label order (a stable, stated tie rule)."""
    return sorted(medians, key=lambda k: (-medians[k] if higher else medians[k], k))


def round_order(n: int, rnd: int) -> list[int]:
    """The indices of `n` finalists in the order round `rnd` (0-based) measures them: rounds
    come in mirrored pairs (the odd one the even one reversed), each pair starting one later."""
    if n <= 0:
        return []
    shift = (rnd // 2) % n
    order = list(range(shift, n)) + list(range(shift))
    return order[::-1] if rnd % 2 else order


def round_seed(seed: int, rnd: int) -> int:
    """Round `rnd`'s prompt seed for bench seed `seed` (added to the workload's own seed)."""
    if not 0 <= rnd < 100:
        raise ValueError(f"finalist round {rnd}: at most 100 rounds per seed")
    return FRESH_SEED + 100 * seed + rnd


Rounds = Generator[TrialSpec, Trial, list[list[float | None]]]


def remeasure(finalists: Sequence[Finalist], control: Any, rounds: int, seed: int,
              prefix: str = "f") -> Rounds:
    """Every finalist once per round, `rounds` rounds in `round_order`; returns the objective
    per finalist per round (None where the trial failed)."""
    if rounds < 2:
        raise ValueError(f"rounds={rounds}: an interval needs at least 2 rounds")
    values: list[list[float | None]] = [[None] * rounds for _ in finalists]
    for rnd in range(rounds):
        for i in round_order(len(finalists), rnd):
            f = finalists[i]
            trial = yield TrialSpec(
                trial_id=f"{prefix}r{rnd + 1}-{f.name}", role=TrialRole.TUNING,
                config=f.config, changes=changes_from(control, f.config), dimension="search",
                value=f.name, repeat=rnd + 1, seed=round_seed(seed, rnd))
            values[i][rnd] = trial.objective_value
    return values


def median_of(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def grid_best(finalists: Sequence[Finalist], values: Sequence[Sequence[float | None]],
              higher: bool = True) -> int | None:
    """The index of the grid finalist with the best re-measured median (ties: the better
    search rank); None when none measured."""
    cands = [(i, m) for i, f in enumerate(finalists)
             if any(r.startswith("grid#") for r in f.roles)
             and (m := median_of(values[i])) is not None]
    if not cands:
        return None
    return (max if higher else min)(cands, key=lambda im: im[1])[0]


def pick_of(finalists: Sequence[Finalist], method: str) -> int | None:
    return next((i for i, f in enumerate(finalists) if method in f.roles), None)


def both_measured(a: Sequence[float | None], b: Sequence[float | None]
                  ) -> tuple[list[float], list[float]]:
    """The rounds where both values exist (paired: a failed trial drops its round)."""
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return [x for x, _ in pairs], [y for _, y in pairs]


def interval(a: Sequence[float], b: Sequence[float], higher: bool = True,
             confidence: float = CONFIDENCE) -> PairedComparison | None:
    """b/a over paired values (None below 2 pairs)."""
    if len(a) < 2:
        return None
    return paired_compare(a, b, higher_is_better=higher, confidence=confidence)


def compact(c: PairedComparison | None, why: str | None = None) -> dict[str, Any]:
    """What the JSON keeps of a comparison."""
    if c is None:
        return {"ratio": None, "why": why or "fewer than 2 paired values"}
    return {"ratio": c.ratio, "low": c.ratio_low, "high": c.ratio_high, "n": c.rounds,
            "confidence": c.confidence, "sd_log": c.sd_log}


def seed_pairs(finalists: Sequence[Finalist], values: Sequence[Sequence[float | None]],
               higher: bool = True) -> dict[str, tuple[list[float], list[float]]]:
    """Per ratio key: the paired (other, ladder) values of this seed's rounds; a key is absent
    when the ladder or the other side has no finalist."""
    lad = pick_of(finalists, "ladder")
    idx = {"grid": grid_best(finalists, values, higher),
           "tpe": pick_of(finalists, "tpe"), "random": pick_of(finalists, "random")}
    out = {}
    for key, other in RATIOS.items():
        j = idx[other]
        if lad is not None and j is not None:
            out[key] = both_measured(values[j], values[lad])
    return out


def seed_ratios(pairs: dict[str, tuple[list[float], list[float]]], higher: bool = True,
                confidence: float = CONFIDENCE) -> dict[str, dict[str, Any]]:
    return {key: (compact(interval(*pairs[key], higher, confidence)) if key in pairs
                  else compact(None, "no finalist on one side"))
            for key in RATIOS}


def _geomean(xs: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def pooled(per_seed: Sequence[dict[str, tuple[list[float], list[float]]]], higher: bool = True,
           confidence: float = CONFIDENCE) -> dict[str, dict[str, dict[str, Any]]]:
    """Per ratio key, over seeds, both ways (POOLING)."""
    out = {}
    for key in RATIOS:
        seeds = [p[key] for p in per_seed if key in p and p[key][0]]
        a = [x for s in seeds for x in s[0]]
        b = [y for s in seeds for y in s[1]]
        ga, gb = [_geomean(s[0]) for s in seeds], [_geomean(s[1]) for s in seeds]
        out[key] = {"rounds": compact(interval(a, b, higher, confidence)),
                    "seeds": compact(interval(ga, gb, higher, confidence),
                                     f"{len(seeds)} seed(s): an interval over seeds needs 2")}
    return out


def launch_share(launches: int, configurations: int) -> float:
    """A method's launches against a one-pass grid (each configuration launched once)."""
    if configurations <= 0:
        raise ValueError("a grid of no configurations")
    return launches / configurations


def against(c: dict[str, Any], bound: float) -> str:
    """Where a ratio's interval lies against a bound."""
    if c.get("ratio") is None:
        return "not measured"
    if c["low"] >= bound:
        return f"at or above {bound:g} (the whole interval)"
    if c["high"] < bound:
        return f"below {bound:g} (the whole interval)"
    return f"{'at or above' if c['ratio'] >= bound else 'below'} {bound:g} (the interval spans it)"


def fmt(c: dict[str, Any] | None) -> str:
    if not c or c.get("ratio") is None:
        return "-"
    return f"{c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"


def markdown(res: dict[str, Any]) -> str:
    """The table for docs/measurements.md from the bench's result (bench/tuner_bench.py)."""
    n_cfg = res["space"]["configurations"]
    lines = [
        f"| seed | ladder's pick, re-measured | launches (of a one-pass {n_cfg}-configuration "
        "grid) | grid's best, re-measured | ladder/grid | ladder/TPE | ladder/random |",
        "|---|---|---|---|---|---|---|"]
    for s in res["seeds"]:
        lad, best = s["picks"].get("ladder"), s.get("grid_best")
        lad_txt = f"`{lad['finalist']}` {lad['median']:.2f}" if lad and lad.get("median") \
            else "-"
        best_txt = f"`{best['finalist']}` {best['median']:.2f}" if best else "-"
        r = s["ratios"]
        lines.append(f"| {s['seed']} | {lad_txt} | {s['launches']['ladder']} "
                     f"({s['launch_share']['ladder']:.0%}) | {best_txt} | "
                     f"{fmt(r['ladder/grid'])} | {fmt(r['ladder/tpe'])} | "
                     f"{fmt(r['ladder/random'])} |")
    mean_launches = statistics.fmean(s["launches"]["ladder"] for s in res["seeds"])
    for how, title in (("rounds", "all seeds, rounds pooled"), ("seeds", "over seeds")):
        p = {k: res["pooled"][k][how] for k in RATIOS}
        n = p["ladder/grid"].get("n", "-")
        lines.append(f"| {title} (n={n}) | | {mean_launches:.1f} mean "
                     f"({mean_launches / n_cfg:.0%}) | | "
                     f"{fmt(p['ladder/grid'])} | {fmt(p['ladder/tpe'])} | "
                     f"{fmt(p['ladder/random'])} |")
    return "\n".join(lines)


def score_seed(s: dict[str, Any], configurations: int, higher: bool = True
               ) -> tuple[dict[str, Any], dict[str, tuple[list[float], list[float]]]]:
    """One seed's record (bench/tuner_bench.py: finalists with their rounds' values, picks,
    launches) scored: medians, the grid's best, the ratios, the launch shares; and its pairs
    for `pooled`."""
    rows = [{**f, "median": median_of(f["values"])} for f in s["finalists"]]
    fins = [Finalist(f["name"], None, list(f["roles"])) for f in rows]
    vals = [f["values"] for f in rows]
    best = grid_best(fins, vals, higher)
    picks = {}
    for method, p in s["picks"].items():
        i = pick_of(fins, method)
        picks[method] = {**p, "median": None if i is None else rows[i]["median"]}
    pairs = seed_pairs(fins, vals, higher)
    return {**s, "finalists": rows, "picks": picks,
            "grid_best": None if best is None else {"finalist": rows[best]["name"],
                                                    "median": rows[best]["median"]},
            "ratios": seed_ratios(pairs, higher),
            "launch_share": {m: launch_share(n, configurations)
                             for m, n in s["launches"].items()}}, pairs


def scored(res: dict[str, Any], higher: bool = True) -> dict[str, Any]:
    """The bench's result with every seed scored and the ratios pooled over seeds."""
    n_cfg = res["space"]["configurations"]
    seeds, pairs = [], []
    for s in res["seeds"]:
        one, p = score_seed(s, n_cfg, higher)
        seeds.append(one)
        pairs.append(p)
    return {**res, "seeds": seeds, "pooled": pooled(pairs, higher)}
