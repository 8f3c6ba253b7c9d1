"""The tuning ladder against black-box search and the exhaustive grid, over the same small real
llama.cpp space, on the same engines: `make bench-tuner` (about 80 min on 2 cores for 3 seeds;
`--smoke` or INFOPT_BENCH_SMOKE=1: a few minutes on a 4-configuration space, one seed, two
finalist rounds, to check it runs).

The space: weights {the bundled Q4_1, a local Q8_0} x KV {f16, q8_0 (flash attention on)} x
running slots {1, 2, 4} x prefill {llama.cpp's defaults, -ub 128, -ub 256, flash attention off}
less the combinations llama.cpp refuses (a q8_0 V cache without flash attention): 42
configurations, the values the ladder's own rules derive for this workload (128-token chat
prompts, 64 forced output tokens, 4 concurrent streams, throughput).

Every method is a generator behind the climb's interface (infopt.tuning.climb and
infopt.tuning.blackbox), run by the same driver on the same trial task, without the quality
gate or the contract probes (the search is what is compared; gates would reject the same
configurations for each):
- the grid: every configuration `--repeats` times in one interleaved campaign, once; its search
  medians rank its finalists;
- the ladder (the optimize flow's climb, control included, with `--repeats`), once per seed;
  its pick is what the run recommends (the winner, or the defaults where the winner did not
  beat them);
- Optuna TPE and random search, each with the ladder's launch count of that seed.

After a seed's searches, its finalists (the grid's top five by search median and each method's
pick, one per configuration) are measured again in `--rounds` fresh rounds, every finalist once
per round (bench/tuner_finalists.py: the order, the prompts, the scoring): a pick is scored by
those rounds, not by the search that chose it, and the grid's best is its finalist with the best
re-measured median. Printed and kept: ladder/grid-best (against the 95 % goal), ladder/TPE (not
below 1) and ladder/random, each with its 95 % interval per seed and over seeds (both poolings
stated), and each method's launches against a one-pass grid (the number of configurations).
Results in $INFOPT_BENCH_OUT (default /tmp/infopt-bench): tuner_bench.json (the result, small;
`--record PATH` copies it into the repository, e.g. bench/results/tuner-<date>.json),
tuner_bench.md (the table for docs/measurements.md, also printed), tuner_bench_curves.json and
tuner_bench.png (the grid's search median of each method's current pick against launches)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prefect import flow

from bench import tuner_finalists as fin
from infopt.bootstrap import default_paths
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.rules import WeightVariant
from infopt.hardware.host import inventory
from infopt.model.digest import model_digest
from infopt.model.profile import profile_model
from infopt.specs.request import Budgets
from infopt.specs.results import Trial
from infopt.specs.trial import TrialSpec, trial_key
from infopt.specs.workload import Workload, fixed_levels
from infopt.tuning.blackbox import (
    SearchOutcome,
    SearchSpace,
    grid_search,
    random_search,
    tpe_search,
)
from infopt.tuning.climb import ClimbOutcome, ClimbPlan, climb, drive
from infopt.tuning.control import baseline_config, control_config, serving_target
from infopt.tuning.dimension_rules import ladder_facts, rules_for

QUALITY_BOUND, TPE_BOUND, LAUNCH_BOUND = 0.95, 1.0, 0.35
KV_Q8 = {"cache_type_k": "q8_0", "cache_type_v": "q8_0", "flash_attn": "on"}
PREFILL = {"defaults": {}, "ub128": {"ubatch_tokens": 128}, "ub256": {"ubatch_tokens": 256},
           "fa-off": {"flash_attn": "off"}}


@dataclass(frozen=True)
class Setting:
    requests: int
    repeats: int
    seeds: tuple[int, ...]
    smoke: bool
    rounds: int = 3  # finalist rounds per seed

    def workload(self) -> Workload:
        if self.smoke:  # short requests at 2 streams: a trial in seconds
            return fixed_levels(input_tokens=32, output_tokens=16, levels=[2], target=2,
                                requests=self.requests, cooldown_s=0.0)
        return fixed_levels(input_tokens=128, output_tokens=64, levels=[4], target=4,
                            requests=self.requests, cooldown_s=1.0)


def space(base: Any, q8_path: str | None, smoke: bool) -> SearchSpace:
    if smoke:
        # -ub 64: what the ladder's prefill rule derives for the smoke's short prompts.
        return SearchSpace(base, {"slots": {"1": {"parallel_slots": 1},
                                            "2": {"parallel_slots": 2}},
                                  "prefill": {"defaults": {}, "ub64": {"ubatch_tokens": 64}}})
    # The ladder's order, so a later dimension's knob wins as it does there.
    return SearchSpace(
        base, {"weights": {"Q4_1": {}, "Q8_0": {"model_path": q8_path}},
               "kv": {"f16": {}, "q8_0": KV_Q8},
               "slots": {str(n): {"parallel_slots": n} for n in (1, 2, 4)},
               "prefill": PREFILL},
        allowed=lambda c: c.cache_type_v == "f16" or c.flash_attn != "off")


def label_in(sp: SearchSpace, config: Any) -> str | None:
    """The space's label of `config` (None: the ladder went outside the grid's space)."""
    want = config.model_dump(exclude={"port"})
    return next((sp.label(c) for c in sp.choices()
                 if sp.config(c).model_dump(exclude={"port"}) == want), None)


def ladder_picks(out: ClimbOutcome, trials: list[Trial], sp: SearchSpace) -> list[str | None]:
    """The ladder's incumbent after each launch (its label in the space): the baseline once
    its first trial measured, each accepted change after its last confirming trial."""
    index = {id(t): i for i, t in enumerate(trials)}
    picks: list[str | None] = [None] * len(trials)
    for inc in out.history:
        done = index[id(inc.trials[0] if inc.label == "baseline" else inc.trials[-1])]
        for n in range(done, len(trials)):
            picks[n] = label_in(sp, inc.config)
    return picks


def ladder_pick(out: ClimbOutcome, sp: SearchSpace) -> tuple[str, Any, dict[str, Any]]:
    """What the ladder's run recommends (its winner, or the defaults when the winner did not
    beat them): (finalist name, configuration, what the JSON says of it). A configuration the
    grid does not hold (a derived value outside the space, or the defaults) is a finalist all
    the same, measured in the same rounds."""
    inc = out.chosen or out.history[-1]
    own = statistics.median(inc.values) if inc.values else None
    return (label_in(sp, inc.config) or "ladder-pick", inc.config,
            {"decided": inc.winner_label, "search_value": own,
             "winner": out.ladder.winner_label if out.ladder else None})


def search_pick(o: SearchOutcome, sp: SearchSpace) -> tuple[str, Any] | None:
    """A black-box search's pick: its best single measurement."""
    if o.best is None:
        return None
    return o.best, sp.config(next(c for c in sp.choices() if sp.label(c) == o.best))


def finalist_rounds(sp: SearchSpace, medians: dict[str, float], control: Any,
                    out: ClimbOutcome, tpe: SearchOutcome, rnd: SearchOutcome, seed: int,
                    rounds: int, run: Callable[[TrialSpec], list[Trial]]) -> dict[str, Any]:
    """One seed's finalists (the grid's top five by search median, each method's pick)
    measured in `rounds` fresh rounds with `run`: the seed's record for the JSON."""
    ranked = [(lb, sp.config(c)) for lb in fin.ranked_by(medians)
              for c in sp.choices() if sp.label(c) == lb]
    lad_name, lad_cfg, lad_info = ladder_pick(out, sp)
    picks = {"ladder": (lad_name, lad_cfg), "tpe": search_pick(tpe, sp),
             "random": search_pick(rnd, sp)}
    finalists = fin.select(ranked, picks)
    got, _ = drive(fin.remeasure(finalists, control, rounds, seed), run)
    name_of = {m: next((f.name for f in finalists if m in f.roles), None) for m in picks}
    return {
        "seed": seed,
        "launches": {"ladder": out.launches, "tpe": tpe.launches, "random": rnd.launches},
        "picks": {"ladder": {"finalist": name_of["ladder"], **lad_info},
                  "tpe": {"finalist": name_of["tpe"], "search_value": tpe.best_value},
                  "random": {"finalist": name_of["random"], "search_value": rnd.best_value}},
        "finalists": [{"name": f.name, "roles": f.roles, "search_median": medians.get(f.name),
                       "values": got[i]} for i, f in enumerate(finalists)],
        "orders": [[finalists[i].name for i in fin.round_order(len(finalists), r)]
                   for r in range(rounds)],
        "prompt_seeds": [fin.round_seed(seed, r) for r in range(rounds)]}


@flow(name="tuner-bench")
def bench(setting: Setting, out_dir: str) -> dict:
    from infopt.runs.engine_run import EngineRun
    from tasks.trial import run_trial
    from tasks.weights import requantize_task

    gguf = str(default_paths().gguf)
    model, hw = profile_model(gguf), inventory(measure_bandwidth=False)
    wl = setting.workload()
    adapter = llamacpp.ADAPTER
    version, digest = adapter.detect_version(adapter.locate()), model_digest(gguf)
    target = serving_target(model, hw, "m", None)
    control, base = control_config("llamacpp", target), baseline_config("llamacpp", target)
    q8 = None if setting.smoke else requantize_task(gguf, digest, version, "Q8_0")
    sp = space(base, q8, setting.smoke)

    def runner(name: str):
        ctx = EngineRun(run_dir=str(Path(out_dir) / name), model=model, hw=hw, workload=wl,
                           tokenizer_path=None)

        def run(spec: TrialSpec) -> list[Trial]:
            # No contract probes (the ladder asks them of its first baseline): the gates are
            # off for every method alike.
            spec = spec.model_copy(update={"with_contract": False})
            got = [run_trial(spec, trial_key(spec, wl, version, digest), None, ctx)]
            print(f"{name} {spec.trial_id}: {got[-1].objective_value}", flush=True)
            return got
        return run

    t0 = time.perf_counter()
    grid, _ = drive(grid_search(sp, control, setting.repeats), runner("grid"))
    values: dict[str, list[float]] = {}
    for label, v in grid.history:
        values.setdefault(label, []).extend([v] if v is not None else [])
    medians = {k: statistics.median(v) for k, v in values.items() if v}
    first_round = len(sp.choices())
    curves: dict[str, list[list[str | None]]] = {
        "grid": [[grid.best_after(n, True) for n in range(1, first_round + 1)]]}
    seeds: list[dict[str, Any]] = []
    minutes = {"grid": (time.perf_counter() - t0) / 60, "searches": 0.0, "finalists": 0.0}
    dims = ["scheduling", "prefill"] if setting.smoke else [
        "weights", "kv_precision", "scheduling", "prefill"]
    variants = () if q8 is None else (WeightVariant("Q8_0", q8, 8.5),)
    for seed in setting.seeds:
        t0 = time.perf_counter()
        plan = ClimbPlan(
            control=control, baseline=base, engine="llamacpp",
            rules=rules_for(adapter, dims),
            facts=lambda t: ladder_facts(model, hw, wl, t, variants, None, "Q4_1"),
            objective=wl.objective.value, higher=True,
            budgets=Budgets(repeats=setting.repeats), seed=seed)
        out, trials = drive(climb(plan), runner(f"ladder-s{seed}"))
        budget = out.launches
        tpe, _ = drive(tpe_search(sp, control, budget, seed=seed), runner(f"tpe-s{seed}"))
        rnd, _ = drive(random_search(sp, control, budget, seed=seed),
                       runner(f"random-s{seed}"))
        curves.setdefault("ladder", []).append(ladder_picks(out, trials, sp))
        for name, o in (("tpe", tpe), ("random", rnd)):
            curves.setdefault(name, []).append(
                [o.best_after(n, True) for n in range(1, o.launches + 1)])
        t1 = time.perf_counter()
        minutes["searches"] += (t1 - t0) / 60
        seeds.append(finalist_rounds(sp, medians, control, out, tpe, rnd, seed,
                                     setting.rounds, runner(f"final-s{seed}")))
        minutes["finalists"] += (time.perf_counter() - t1) / 60
    return {"setting": {**asdict(setting), "workload": wl.model_dump(mode="json")},
            "host": {"cpu_model": hw.host.cpu_model, "usable_cpus": hw.host.usable_cpus},
            "engine_version": version,
            "space": {"configurations": first_round, "grid_launches": grid.launches},
            "grid_medians": medians, "grid_values": values, "seeds": seeds,
            "minutes": minutes, "curves": curves}


METHOD = {
    "finalists": f"the grid's top {fin.TOP} configurations by their search medians and each "
                 "method's pick (the ladder's recommendation; TPE's and random search's best "
                 "single measurement), one per configuration",
    "rounds": "every finalist once per round, rounds in mirrored pairs (the second reversed, "
              "each pair starting one finalist later), each round with its own prompts",
    "scores": "a pick's median over the finalist rounds; the grid's best: the grid finalist "
              "with the best re-measured median (chosen on the same rounds: conservative for "
              "ladder/grid)",
    "ratios": "per seed: Student's t on the per-round log ratios (paired_compare), "
              f"{fin.CONFIDENCE:.0%} intervals",
    "pooled": fin.POOLING,
    "launch_share": "launches over the number of configurations (a one-pass grid)",
}


def commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def summarize(res: dict, out_dir: Path, record: Path | None = None) -> dict:
    curves = res.pop("curves")
    res = fin.scored(res)
    res = {"bench": "tuner", "date": time.strftime("%Y-%m-%d"), "commit": commit(),
           "method": METHOD, **res}
    medians = res["grid_medians"]
    print(f"\n{'configuration':<48} grid search median tok/s")
    for k in fin.ranked_by(medians):
        print(f"{k:<48} {medians[k]:7.2f}")
    n_cfg = res["space"]["configurations"]
    for s in res["seeds"]:
        print(f"\nseed {s['seed']}: finalists over {len(s['prompt_seeds'])} rounds "
              "(search median -> re-measured median):")
        for f in s["finalists"]:
            print(f"  {f['name']:<46} {','.join(f['roles']):<22} "
                  f"{_num(f['search_median'])} -> {_num(f['median'])}")
        lad = s["picks"]["ladder"]
        print(f"  ladder decided {lad['decided']} ({s['launches']['ladder']} launches, "
              f"{s['launch_share']['ladder']:.0%} of a one-pass {n_cfg}-configuration grid); "
              f"TPE -> {s['picks']['tpe']['finalist']}; random -> "
              f"{s['picks']['random']['finalist']}; grid best re-measured -> "
              f"{(s['grid_best'] or {}).get('finalist')}")
        print("  " + "; ".join(f"{k} {fin.fmt(v)}" for k, v in s["ratios"].items()))
    for how, text in fin.POOLING.items():
        p = {k: v[how] for k, v in res["pooled"].items()}
        print(f"\nover seeds, {text}:\n  " + "; ".join(f"{k} {fin.fmt(v)}" for k, v in p.items()))
    head = res["pooled"]
    share = statistics.fmean(s["launch_share"]["ladder"] for s in res["seeds"])
    goals = {"ladder/grid": fin.against(head["ladder/grid"]["rounds"], QUALITY_BOUND),
             "ladder/tpe": fin.against(head["ladder/tpe"]["rounds"], TPE_BOUND),
             "launch_share": f"{share:.0%} of a one-pass grid (the earlier bound <= "
                             f"{LAUNCH_BOUND:.0%}: {'met' if share <= LAUNCH_BOUND else 'not met'})"}
    res["goals"] = goals
    print(f"\ngoals, on the rounds pooled: ladder/grid (>= {QUALITY_BOUND:g}) "
          f"{goals['ladder/grid']}; ladder/TPE (not below {TPE_BOUND:g}) {goals['ladder/tpe']}; "
          f"launches {goals['launch_share']}")
    table = fin.markdown(res)
    print("\n" + table)
    m = res["minutes"]
    print(f"\ntime: grid {m['grid']:.1f} min, searches {m['searches']:.1f} min, finalist "
          f"rounds {m['finalists']:.1f} min")
    out = out_dir / "tuner_bench.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    (out_dir / "tuner_bench.md").write_text(table + "\n")
    (out_dir / "tuner_bench_curves.json").write_text(json.dumps(curves) + "\n")
    plot(curves, medians, out_dir / "tuner_bench.png", len(res["seeds"]))
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, record)
        print(f"recorded: {record}")
    return res


def _num(v: float | None) -> str:
    return "    -  " if v is None else f"{v:7.2f}"


def plot(curves: dict, medians: dict, path: Path, seeds: int) -> None:
    """The grid's search median of each method's current pick against engine launches, per
    seed (search medians: the top of the grid is inflated by its own noise; the finalist
    rounds score the picks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = {"ladder": "C0", "tpe": "C1", "random": "C2", "grid": "C7"}
    for method, runs in curves.items():
        for i, picks in enumerate(runs):
            xs = [n + 1 for n, p in enumerate(picks) if p in medians]
            ax.step(xs, [medians[picks[n - 1]] for n in xs], where="post",
                    color=colours[method], alpha=0.8, label=method if i == 0 else None)
    ax.axhline(max(medians.values()), color="k", ls=":", lw=1,
               label="grid best (search median)")
    ax.set_xlabel("engine launches")
    ax.set_ylabel("grid search median of the current pick (output tokens/s)")
    ax.set_title(f"Best-found configuration against launches ({seeds} seed(s) each)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def not_resumable(folder: Path) -> str | None:
    """Why `folder` is not a tuner bench's trials folder to go on with, or None."""
    if (folder / "grid" / "trials").is_dir():
        return None
    return (f"--resume {folder}: not a tuner bench's trials folder (no grid/trials in it). "
            "Give the folder a run printed at its start, $INFOPT_BENCH_OUT/tuner-<date>-<time>")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=None, help="measured requests per trial")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=None,
                    help="finalist rounds per seed (default 3; 2 with --smoke)")
    ap.add_argument("--record", type=Path, default=None,
                    help="copy the result JSON here too (e.g. bench/results/tuner-<date>.json)")
    ap.add_argument("--smoke", action="store_true",
                    default=os.environ.get("INFOPT_BENCH_SMOKE") == "1")
    ap.add_argument("--resume", type=Path, default=None,
                    help="an earlier run's trials folder (tuner-<date>-<time>, printed at its "
                         "start): every trial it completed is reloaded by key, not run again, "
                         "so a run cut short (a session's end) goes on where it stopped; give "
                         "the same other options")
    args = ap.parse_args()
    if args.resume and (why := not_resumable(args.resume)):
        ap.error(why)
    rounds = args.rounds or (2 if args.smoke else 3)
    if rounds < 2:
        ap.error(f"--rounds {rounds}: an interval needs at least 2 rounds (3 or more)")
    setting = Setting(requests=args.requests or (2 if args.smoke else 8),
                      repeats=args.repeats, seeds=tuple(range(1 if args.smoke else args.seeds)),
                      smoke=args.smoke, rounds=rounds)
    out_dir = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench"))
    runs = args.resume or out_dir / f"tuner-{time.strftime('%Y%m%d-%H%M%S')}"
    runs.mkdir(parents=True, exist_ok=True)
    print(f"trials under {runs} (resume with --resume {runs})", flush=True)
    t0 = time.monotonic()
    res = bench(setting, str(runs))
    print(f"\n{(time.monotonic() - t0) / 60:.1f} min; trials under {runs}")
    summarize(res, out_dir, args.record)


if __name__ == "__main__":
    main()
