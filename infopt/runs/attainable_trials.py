"""The project's own GPU trials as cases for the attainable fit, beside the published results:
every measured level of every measured trial of a run on a GPU (its report.json), at the batch
the engine really ran, with its ITL p50 as the measured step time. The case id names the run,
trial and level, so each fitted number can be traced to its records
(runs/<run>/trials/<key>/requests.jsonl).

A run on a CPU is not used: there the calibrated envelope is itself measured (this host's
bandwidth and GEMM rate), and the published results are all GPUs. Nor is a run (or a trial) of
a simulated engine (tests/sim: its version ends "+simulated"): its step times are a model's, not
a GPU's, and would fit the estimate to that model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from infopt.costmodel.attainable import gpu_family, terms
from infopt.costmodel.attainable_data import DATA, Case
from infopt.costmodel.attainable_fit import build
from infopt.specs.base import InputError
from infopt.specs.results import OptimizationReport
from infopt.tuning.candidates import run_device
from infopt.tuning.level_steps import level_steps, mean_lengths, theoretical_rows
from infopt.tuning.remeasure import config_id  # repeats are held out together


def _report(path: Path) -> OptimizationReport:
    from pydantic import ValidationError

    file = path / "report.json" if path.is_dir() else path
    try:
        return OptimizationReport.model_validate_json(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--runs {path}: cannot read {file} ({exc.strerror}); give a run "
                         "folder with a report.json, or the report.json itself.") from None
    except ValidationError as exc:
        raise InputError(f"--runs {path}: {file} is not an infopt report.json "
                         f"({exc.errors()[0]['msg']}).") from None


SIMULATED_MARK = "simulated"  # in the version the simulated engines report (tests/sim)


def _simulated(version: str | None) -> bool:
    return version is not None and SIMULATED_MARK in version.lower()


def _engine_versions(r: OptimizationReport) -> dict[str, str]:
    """Each engine the run tuned, by name: its version (the routed one's and the comparator's)."""
    versions = {str(r.engine): r.engine_version}
    for e in r.engines.results if r.engines else ():
        if e.engine_version:
            versions[str(e.engine)] = e.engine_version
    return versions


def trial_cases(path: Path) -> tuple[list[Case], list[str]]:
    """(cases from the run's measured GPU trials, why anything was left out)."""
    r = _report(path)
    versions = _engine_versions(r)
    if all(_simulated(v) for v in versions.values()):
        named = ", ".join(sorted(set(versions.values())))
        return [], [f"run {r.run_id}: simulated engines ({named}), not measured on a GPU"]
    device, is_cpu = run_device(r.hardware)
    family = gpu_family(device.compute_capability)
    if is_cpu or family is None:
        return [], [f"run {r.run_id}: not a GPU run (on a CPU the calibrated envelope is "
                    "measured instead)"]
    m = r.model.inspection
    cases: list[Case] = []
    left: list[str] = []
    for t in r.trials:
        if t.failed or t.benchmark is None:
            left.append(f"run {r.run_id} trial {t.trial_id}: not measured")
            continue
        version = t.engine.version if t.engine else versions.get(str(t.config.engine))
        if _simulated(version):
            left.append(f"run {r.run_id} trial {t.trial_id}: a simulated engine ({version}), "
                        "not measured on a GPU")
            continue
        if t.config.speculates:  # several tokens a step: not the one-token step model's case
            left.append(f"run {r.run_id} trial {t.trial_id}: speculative decoding, not a "
                        "case of the step model")
            continue
        prompt, output = mean_lengths(t.benchmark)
        for step in level_steps(m, device, False, t.config, t.benchmark,
                                r.model.native_context_tokens):
            if step.layout.pp > 1:
                # The fit's terms model one TP replica's step; a pipeline's ITL spans its
                # stages and their bubbles.
                left.append(f"run {r.run_id} trial {t.trial_id}: pipeline parallel "
                            f"({step.layout.label}), not a case of the step model")
                break
            decode, prefill = theoretical_rows(m, device, step, prompt + output // 2, prompt,
                                               r.model.file_bytes or None)
            if decode is None:
                left.append(f"run {r.run_id} trial {t.trial_id}: no theoretical rates")
                continue
            cases.append(Case(
                f"run {r.run_id} trial {t.trial_id} c{step.concurrency}",
                (str(t.config.engine), family), f"run {r.run_id}|{config_id(t.config)}",
                step.replica_batch, terms(decode, m, step.tp, prefill.t_compute_s if prefill else 0.0,
                                  output or None),
                step.measured_step_s, decode.tokens_per_s))
    return cases, left


def own_trials(runs: list[Path]) -> tuple[list[Case], dict[str, Any]]:
    """The cases of every run's measured GPU levels, and what was used and left out (each
    report's path and sha256), for build()'s record."""
    cases: list[Case] = []
    used: list[dict[str, str | int]] = []
    left: list[str] = []
    for run in runs:
        got, why = trial_cases(run)
        cases += got
        left += why
        if got:
            file = run / "report.json" if run.is_dir() else run
            used.append({"report": str(run), "cases": len(got),
                         "sha256": hashlib.sha256(file.read_bytes()).hexdigest()})
    return cases, {"runs": used, "rows_used": len(cases), "rows_left_out": left}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fit the attainable estimate on published results "
                                 "and, with --runs, this project's measured GPU trials.")
    ap.add_argument("--configs", type=Path, default=Path("tests/fixtures/model_configs"))
    ap.add_argument("--runs", type=Path, nargs="*", default=[],
                    help="run folders (or their report.json) whose measured GPU trials join "
                         "the published results")
    ap.add_argument("--out", type=Path, default=DATA / "attainable_fit.json")
    args = ap.parse_args(argv)
    try:
        result = build(args.configs, own_trials=own_trials(list(args.runs)))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("leave_one_out", "leave_one_configuration_out")}))
    for why in result["data"]["own_trials"]["rows_left_out"]:
        print(f"left out: {why}")
    for key, g in result["groups"].items():
        held = g["leave_one_configuration_out"]
        loco = f"{held['median_abs_error']:.1%} over {held['rows']}" if held else "answers none"
        print(f"{key:18} rows {g['rows']:4}  loco median {loco}  "
              f"bw {g['bandwidth_fraction']:.2f}  dense layer {g['t_dense_layer_s'] * 1e6:.0f} us"
              f"  moe layer {g['t_moe_layer_s'] * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
