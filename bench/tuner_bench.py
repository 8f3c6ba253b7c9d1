"""The tuning ladder against an exhaustive grid over the same small real space, on llama.cpp.

Run after `make engines`: `make bench-tuner` (about 20 min on 2 cores). The space: weights
{the bundled Q4_1, a local Q8_0} x running slots {1, 2, 4} x prefill {llama.cpp's defaults,
-ub 128, -ub 256, flash attention off}: 24 configurations, the values the ladder's own rules
derive for this workload (128-token chat prompts, 64 forced output tokens, 4 concurrent
streams, throughput). The grid measures every configuration `--repeats` times (fresh engine
starts) in one interleaved campaign; the ladder runs as `infopt optimize` does, on the weights,
scheduling and prefill dimensions, with the same repeats.

Printed: the grid's best median, the grid's median for the ladder's winner (the same campaign,
so drift cannot favour either) and the ladder's own measurement, with the ratio against the
issue's 95 % bound; the ladder's engine launches (its control included) against the grid's,
against the 35 % bound. Results: $INFOPT_BENCH_OUT/tuner_bench.json (default /tmp/infopt-bench).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from pathlib import Path

from prefect import flow

from infopt.bootstrap import default_paths
from infopt.hardware.host import inventory
from infopt.model.profile import profile_model
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
from infopt.specs.serving import with_knob
from infopt.specs.trial import TrialRole, TrialSpec, changes_from, trial_key
from infopt.specs.workload import Workload, fixed_levels
from infopt.tuning.search import baseline_config, control_config, serving_target

QUALITY_BOUND, LAUNCH_BOUND = 0.95, 0.35
SLOTS = (1, 2, 4)
PREFILL = {"defaults": {}, "ubatch_tokens=128": {"ubatch_tokens": 128},
           "ubatch_tokens=256": {"ubatch_tokens": 256}, "flash_attn=off": {"flash_attn": "off"}}


def _workload(requests: int) -> Workload:
    return fixed_levels(input_tokens=128, output_tokens=64, levels=[4], target=4,
                        requests=requests, cooldown_s=1.0)


def _request(requests: int, repeats: int) -> OptimizeRequest:
    wl = _workload(requests)
    return OptimizeRequest(
        model=ModelTarget(path=str(default_paths().gguf)), workload=wl.traffic,
        objective=wl.objective, budgets=Budgets(repeats=repeats), scenarios=[],
        quality_task_items=0, requantize=["Q8_0"], authorize=["quantize"],
        dimensions=["weights", "scheduling", "prefill"], github_search=False)


def ladder(requests: int, repeats: int, runs: Path):
    from flows.optimize import optimize

    report = optimize(request=_request(requests, repeats), runs_dir=str(runs))
    q8 = next(t.config.model_path for t in report.trials if t.value == "weights=Q8_0")
    return report, q8


def _space(base, q8_path: str) -> dict[str, object]:
    out = {}
    for (w, path), slots, (p, knobs) in itertools.product(
            (("Q4_1", base.model_path), ("Q8_0", q8_path)), SLOTS, PREFILL.items()):
        cfg = with_knob(with_knob(base, "model_path", path), "parallel_slots", slots)
        for k, v in knobs.items():
            cfg = with_knob(cfg, k, v)
        out[f"{w}/slots={slots}/{p}"] = cfg
    return out


@flow(name="tuner-bench-grid")
def grid(space: dict, requests: int, repeats: int, run_dir: str) -> dict[str, list[float]]:
    from tasks.trial import TrialContext, run_trial

    model = profile_model(str(default_paths().gguf))
    hw = inventory(measure_bandwidth=False)
    wl = _workload(requests)
    ctx = TrialContext(run_dir=run_dir, model=model, hw=hw, workload=wl,
                       tokenizer_path=None, github_search=False, github_url=None)
    control = control_config("llamacpp", serving_target(model, hw, "m", None))
    values: dict[str, list[float]] = {k: [] for k in space}
    for rnd in range(1, repeats + 1):  # every configuration once per round: drift hits all
        for i, (name, cfg) in enumerate(space.items()):
            spec = TrialSpec(trial_id=f"g{i:02d}-r{rnd}", role=TrialRole.TUNING, config=cfg,
                             changes=changes_from(control, cfg), value=name, repeat=rnd)
            t = run_trial(spec, trial_key(spec, wl, "grid", "grid"), None, ctx)
            if t.objective_value is not None:
                values[name].append(t.objective_value)
            print(f"grid {name} r{rnd}: {t.objective_value}", flush=True)
    return values


def _ladder_name(cfg, q8_path: str) -> str:
    w = "Q8_0" if cfg.model_path == q8_path else "Q4_1"
    prefill = next((k for k, kn in PREFILL.items() if kn and all(
        getattr(cfg, a) == b for a, b in kn.items())), "defaults")
    return f"{w}/slots={cfg.parallel_slots}/{prefill}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8, help="measured requests per trial")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    out_dir = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench"))
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = out_dir / f"tuner-{time.strftime('%Y%m%d-%H%M%S')}"
    t0 = time.monotonic()
    report, q8 = ladder(args.requests, args.repeats, runs)
    t_ladder = time.monotonic() - t0
    model = report.model
    base = baseline_config("llamacpp", serving_target(model, report.hardware, "m", None))
    space = _space(base, q8)
    values = grid(space, args.requests, args.repeats, str(runs / "grid"))
    t_grid = time.monotonic() - t0 - t_ladder
    medians = {k: statistics.median(v) for k, v in values.items() if v}
    best = max(medians, key=medians.get)
    name = _ladder_name(report.winner_config, q8)
    ratio = medians[name] / medians[best]
    launches, grid_launches = report.ladder.launches, len(space) * args.repeats
    print(f"\n{'configuration':<34} grid median tok/s")
    for k in sorted(medians, key=medians.get, reverse=True):
        print(f"{k:<34} {medians[k]:7.2f}" + ("  <- ladder winner" if k == name else ""))
    print(f"\ngrid best: {best} {medians[best]:.2f} tok/s ({grid_launches} launches, "
          f"{t_grid / 60:.1f} min)")
    print(f"ladder winner: {report.winner_label} = {name}: {medians[name]:.2f} tok/s in the "
          f"grid's campaign, {report.gain_vs_control.winner_median:.2f} in its own "
          f"({launches} launches, {t_ladder / 60:.1f} min)")
    print(f"ratio {ratio:.3f} (bound >= {QUALITY_BOUND}): "
          f"{'PASS' if ratio >= QUALITY_BOUND else 'FAIL'}; launches "
          f"{launches / grid_launches:.0%} of the grid's (bound <= {LAUNCH_BOUND:.0%}): "
          f"{'PASS' if launches / grid_launches <= LAUNCH_BOUND else 'FAIL'}")
    (out_dir / "tuner_bench.json").write_text(json.dumps({
        "grid_medians": medians, "grid_values": values, "grid_best": best,
        "ladder_winner": name, "ladder_winner_label": report.winner_label,
        "ladder_own_median": report.gain_vs_control.winner_median, "ratio": ratio,
        "ladder_launches": launches, "grid_launches": grid_launches,
        "ladder_minutes": t_ladder / 60, "grid_minutes": t_grid / 60,
        "ladder_run": str(runs / report.run_id)}, indent=2))


if __name__ == "__main__":
    main()
