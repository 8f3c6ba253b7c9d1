"""The tuning ladder against black-box search and the exhaustive grid, over the same small real
llama.cpp space, on the same engines: `make bench-tuner` (about an hour on 2 cores; `--smoke`
or INFOPT_BENCH_SMOKE=1: a few minutes on a 4-configuration space, to check it runs).

The space: weights {the bundled Q4_1, a local Q8_0} x KV {f16, q8_0 (flash attention on)} x
running slots {1, 2, 4} x prefill {llama.cpp's defaults, -ub 128, -ub 256, flash attention off}
less the combinations llama.cpp refuses (a q8_0 V cache without flash attention): 42
configurations, the values the ladder's own rules derive for this workload (128-token chat
prompts, 64 forced output tokens, 4 concurrent streams, throughput).

Every method is a generator behind the climb's interface (infopt.tuning.climb and
infopt.tuning.blackbox), run by the same driver on the same trial task, without the quality
gate or the contract probes (the search is what is compared; gates would reject the same
configurations for each):
- the grid: every configuration `--repeats` times in one interleaved campaign; its medians are
  the ground truth every method's pick is scored by (the same campaign, so drift cannot
  favour one);
- the ladder (the optimize flow's climb, control included, with `--repeats`), once per seed;
- Optuna TPE and random search, each with the ladder's launch count of that seed.

Printed per seed and on average: the grid median of each method's final pick over the grid's
best (ladder/grid, against the 95 % bound), ladder/TPE and ladder/random, and the ladder's
launches against the grid's (against the 35 % bound). Plotted: the grid median of each method's
current pick against engine launches. Results: $INFOPT_BENCH_OUT/tuner_bench.{json,png}
(default /tmp/infopt-bench)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow

from infopt.bootstrap import default_paths
from infopt.engines import llamacpp
from infopt.engines.ladder import WeightVariant
from infopt.hardware.host import inventory
from infopt.model.digest import model_digest
from infopt.model.profile import profile_model
from infopt.specs.request import Budgets
from infopt.specs.results import Trial
from infopt.specs.trial import TrialSpec, trial_key
from infopt.specs.workload import Workload, fixed_levels
from infopt.tuning.blackbox import SearchSpace, grid_search, random_search, tpe_search
from infopt.tuning.climb import ClimbOutcome, ClimbPlan, climb, drive
from infopt.tuning.control import baseline_config, control_config, serving_target
from infopt.tuning.ladder import ladder_facts, rules_for

QUALITY_BOUND, LAUNCH_BOUND = 0.95, 0.35
KV_Q8 = {"cache_type_k": "q8_0", "cache_type_v": "q8_0", "flash_attn": "on"}
PREFILL = {"defaults": {}, "ub128": {"ubatch_tokens": 128}, "ub256": {"ubatch_tokens": 256},
           "fa-off": {"flash_attn": "off"}}


@dataclass(frozen=True)
class Setting:
    requests: int
    repeats: int
    seeds: tuple[int, ...]
    smoke: bool

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


@flow(name="tuner-bench")
def bench(setting: Setting, out_dir: str) -> dict:
    from tasks.trial import TrialContext, run_attempts
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
        ctx = TrialContext(run_dir=str(Path(out_dir) / name), model=model, hw=hw, workload=wl,
                           tokenizer_path=None, github_search=False, github_url=None)

        def run(spec: TrialSpec) -> list[Trial]:
            # No contract probes (the ladder asks them of its first baseline): the gates are
            # off for every method alike.
            spec = spec.model_copy(update={"with_contract": False})
            got = run_attempts(spec, trial_key(spec, wl, version, digest), None, ctx, 1)
            print(f"{name} {spec.trial_id}: {got[-1].objective_value}", flush=True)
            return got
        return run

    grid, _ = drive(grid_search(sp, control, setting.repeats), runner("grid"))
    values: dict[str, list[float]] = {}
    for label, v in grid.history:
        values.setdefault(label, []).extend([v] if v is not None else [])
    medians = {k: statistics.median(v) for k, v in values.items() if v}
    first_round = len(sp.choices())
    curves: dict[str, list[list[str | None]]] = {
        "grid": [[grid.best_after(n, True) for n in range(1, first_round + 1)]]}
    ladder_out = []
    dims = ["scheduling", "prefill"] if setting.smoke else [
        "weights", "kv_precision", "scheduling", "prefill"]
    variants = () if q8 is None else (WeightVariant("Q8_0", q8, 8.5),)
    for seed in setting.seeds:
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
        ladder_out.append({"seed": seed, "launches": budget, "winner": out.ladder.winner_label,
                           "own_median": statistics.median(out.history[-1].values)})
    return {"medians": medians, "grid_values": values, "curves": curves,
            "ladder": ladder_out, "grid_launches": grid.launches}


def summarize(res: dict, out_dir: Path) -> None:
    medians, curves = res["medians"], res["curves"]
    best = max(medians, key=medians.get)
    score = (lambda label: medians.get(label) if label else None)  # noqa: E731
    print(f"\n{'configuration':<48} grid median tok/s")
    for k in sorted(medians, key=medians.get, reverse=True):
        print(f"{k:<48} {medians[k]:7.2f}")
    print(f"\ngrid best: {best} {medians[best]:.2f} tok/s ({res['grid_launches']} launches)")
    ratios = []
    for i, lad in enumerate(res["ladder"]):
        finals = {m: score(curves[m][i][-1]) if curves[m][i] else None
                  for m in ("ladder", "tpe", "random")}
        # A ladder rule can derive a value the grid does not hold (a thread count on a host
        # with hyperthreads): its pick is then scored by its own measured median, and said so.
        outside = finals["ladder"] is None and lad.get("own_median") is not None
        lv = lad["own_median"] if outside else finals["ladder"]
        r = {"seed": lad["seed"], "launches": lad["launches"],
             "ladder/grid": lv / medians[best] if lv else None,
             "ladder/tpe": lv / finals["tpe"] if lv and finals["tpe"] else None,
             "ladder/random": lv / finals["random"] if lv and finals["random"] else None}
        ratios.append(r)
        pick = (f"outside the grid, its own median {lv:.2f} tok/s" if outside
                else curves['ladder'][i][-1])
        print(f"seed {lad['seed']}: ladder {lad['winner']} ({lad['launches']} launches) = "
              f"{pick}; TPE -> {curves['tpe'][i][-1]}; random -> "
              f"{curves['random'][i][-1]}; " + ", ".join(
                  f"{k} {v:.3f}" for k, v in r.items() if k.startswith("ladder/") and v))
    mean = {k: statistics.mean(r[k] for r in ratios if r[k]) for k in ratios[0]
            if k.startswith("ladder/") and any(r[k] for r in ratios)}
    launch_share = statistics.mean(r["launches"] for r in ratios) / res["grid_launches"]
    lg = mean.get("ladder/grid", 0.0)
    print("mean: " + ", ".join(f"{k} {v:.3f}" for k, v in mean.items())
          + f"; ladder/grid bound >= {QUALITY_BOUND}: {'PASS' if lg >= QUALITY_BOUND else 'FAIL'}"
          f"; launches {launch_share:.0%} of the grid's (bound <= {LAUNCH_BOUND:.0%}): "
          f"{'PASS' if launch_share <= LAUNCH_BOUND else 'FAIL'}")
    (out_dir / "tuner_bench.json").write_text(json.dumps(
        {**res, "grid_best": best, "ratios": ratios, "mean_ratios": mean}, indent=2))
    plot(res, out_dir / "tuner_bench.png", medians[best])


def plot(res: dict, path: Path, grid_best: float) -> None:
    """The grid median of each method's current pick against engine launches, per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    medians = res["medians"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = {"ladder": "C0", "tpe": "C1", "random": "C2", "grid": "C7"}
    for method, runs in res["curves"].items():
        for i, picks in enumerate(runs):
            xs = [n + 1 for n, p in enumerate(picks) if p in medians]
            ax.step(xs, [medians[picks[n - 1]] for n in xs], where="post",
                    color=colours[method], alpha=0.8, label=method if i == 0 else None)
    ax.axhline(grid_best, color="k", ls=":", lw=1, label="grid best")
    ax.set_xlabel("engine launches")
    ax.set_ylabel("grid median of the current pick (output tokens/s)")
    ax.set_title(f"Best-found configuration against launches ({len(res['ladder'])} seed(s) "
                 "each)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=None, help="measured requests per trial")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    default=os.environ.get("INFOPT_BENCH_SMOKE") == "1")
    args = ap.parse_args()
    setting = Setting(requests=args.requests or (2 if args.smoke else 8),
                      repeats=args.repeats, seeds=tuple(range(1 if args.smoke else args.seeds)),
                      smoke=args.smoke)
    out_dir = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench"))
    runs = out_dir / f"tuner-{time.strftime('%Y%m%d-%H%M%S')}"
    runs.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    res = bench(setting, str(runs))
    print(f"\n{(time.monotonic() - t0) / 60:.1f} min; trials under {runs}")
    summarize(res, out_dir)


if __name__ == "__main__":
    main()
