"""The speed checks on real engines that `make test` no longer makes (they depend on the CPU the
suite runs on; the tests keep the behaviour and plant differences no machine can miss, see
tests/paced_build.py). Here they run against this machine's real llama-server and SmolLM2, and
each is reported with its numbers, so a machine where one does not hold is a finding about the
machine or the noise model, not a red suite:

  reproduce-band     the winner's command re-run by hand (report.reproduce) lands inside the
                     prediction interval the report printed for it;
  engine-cpu-floor   the engine's sampled CPU share during the winner's measured levels is above
                     10% of a core (it did the work; the sampler saw it);
  same-build         a new build that is the real binary unchanged is not flagged by reoptimize;
  planted-slowdown   a build of the real binary limited to one thread (--threads 1
                     --threads-batch 1) is flagged and confirmed by a second round. A thread
                     count plants no known effect: how much slower one thread is depends on the
                     CPU and the noise (0.79, interval [0.646, 0.966] on a 2-core AVX-512
                     EPYC: not confirmed), so the rule's power is measured by `--power`.

Setup: one optimize run like tests/flows/conftest.py's (the fake hub, a reduced request count)
on an ephemeral Prefect server, then `infopt accept`. About 10-15 min on 2 cores; needs
`make engines`. Results go to $INFOPT_BENCH_OUT/verdicts_bench.json (default
/tmp/infopt-bench), never into the checkout. Exit status 1 when a check does not hold.

`--power [--trials N] [--record PATH]`: the regression rule's power and false alarms
(issue 47), on slowdowns planted exactly. The accepted run is re-measured on a paced build
(tests/paced_build.py: the real llama-server behind a proxy that releases each streamed token
on a fixed schedule, ~3x slower than this machine's engine, as tests/flows/
test_reoptimize_flow.py's `paced` fixture), and those fresh trials become the baseline. Then
`reoptimize`, the whole flow with its default rule (bound 0.95, 95%, 2 fresh starts a
configuration a round, 2 rounds to confirm), runs N times against each of: another build at
the same pace (0%: a regression called there is a false alarm) and builds paced 10%, 25% and
50% slower (a performance ratio new/old of 0.90, 0.75, 0.50: every scheduled token
1/(1 - slowdown) times later; one not confirmed is a miss). The conditions rotate within each
trial, so a drift of the machine falls on all of them alike. Printed and kept in
$INFOPT_BENCH_OUT/verdicts_power.json and .md: per slowdown the decisions (regression
confirmed / no regression / undecided / error), misses, false alarms, the confirmed share with
its Clopper-Pearson 95% interval, rounds to confirm and per decision (median and range; a
confirmation takes exactly confirm_rounds rounds under this rule, so the first rounds that
flagged carry the per-round power), the measured ratios against the planted one, and the
seconds per decision. About 25 min with the default 3 trials on the 2-core AVX2-only EPYC (setup
~5 min: the flow tests' optimize run and one paced round; then ~7 min a trial: one round of 4
fresh starts for the same build, two for each confirmed slowdown, ~13 s a start at the
baseline's pace; from `make test-e2e`'s paced checks there), less on the AVX-512 EPYC. It
prints the time left after each decision; the runs stay in $INFOPT_BENCH_OUT/power-<time>.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import verdicts_power as vp

CPU_FLOOR_PERCENT = 10.0


def _optimize(runs: Path, input_tokens: int = 48, budgets=None,
              scenarios: tuple[str, ...] = ("short", "medium")):
    """The accepted run the checks start from. `budgets` (default: 2 paired rounds before a
    verdict) and `scenarios`: the power run passes the flow tests' shorter ones."""
    from flows.optimize import optimize
    from infopt.bootstrap import default_paths
    from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
    from infopt.specs.workload import fixed_levels
    from tests.hubserver import FakeHub

    wl = fixed_levels(input_tokens=input_tokens, output_tokens=16, levels=[1, 2], target=2,
                      requests=4, cooldown_s=1.0)
    with FakeHub() as hub:
        request = OptimizeRequest(
            model=ModelTarget(path=str(default_paths().gguf),
                              hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                              hub_endpoint=hub.endpoint),
            workload=wl.traffic, objective=wl.objective,
            budgets=budgets or Budgets(repeats=2), scenarios=list(scenarios),
            scenario_requests=2, quality_task_items=2,
            dimensions=["kv_precision", "scheduling"])
        return optimize(request=request, runs_dir=str(runs))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reproduce_band(report, scratch: Path) -> dict[str, Any]:
    """The report's by-hand commands, as a reader would paste them, on a free port."""
    from infopt.specs.results import BenchmarkResult, BenchResult
    from infopt.tuning.control import objective_value
    from tests.procs import end_process, pasted_command

    r = report.reproduce
    port = _free_port()
    argv, env, old = pasted_command(r.command, port)
    with (scratch / "reproduce-engine.log").open("w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        bench = shlex.split(r.bench_command.replace(f"127.0.0.1:{old}", f"127.0.0.1:{port}"))
        bench[0] = str(Path(sys.executable).with_name("infopt"))
        out = subprocess.run(bench, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            return {"ok": False, "error": out.stderr[-1000:]}
        result = BenchResult.model_validate_json(out.stdout)
        value = objective_value(BenchmarkResult(workload=report.workload,
                                                scenarios=result.scenarios))
    finally:
        end_process(proc)
    return {"ok": r.low <= value <= r.high, "value": value, "low": r.low, "high": r.high,
            "expected": r.expected, "rule": r.rule}


def engine_cpu_floor(report) -> dict[str, Any]:
    winner = next(t for t in report.trials if t.trial_id == report.winner_trial_id)
    shares = [lvl.engine_cpu_percent_mean for lvl in winner.benchmark.levels]
    return {"ok": all(s is not None and s > CPU_FLOOR_PERCENT for s in shares),
            "engine_cpu_percent_mean": shares, "floor_percent": CPU_FLOOR_PERCENT}


def _build(folder: Path, name: str, extra_args: str) -> str:
    """A wrapper "build" of the real llama-server: its own version string, the real binary
    underneath, `extra_args` appended (llama.cpp takes the last value of a repeated flag)."""
    from infopt.engines import adapter_for

    real = adapter_for("llamacpp").locate()
    path = folder / name / "llama-server"
    path.parent.mkdir(parents=True)
    path.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then
  echo "version: 0.5.1-dev (build 2, commit {name})" >&2
  exit 0
fi
exec "{real}" "$@" {extra_args}
""")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _reoptimize(root: Path, executable: str, **request):
    """The flow's report (or, when it returned none, what it returned); `request`: more
    ReoptimizeRequest fields."""
    from flows.reoptimize import reoptimize
    from infopt.specs.reoptimize import ReoptimizeRequest

    state = reoptimize(request=ReoptimizeRequest(executable=executable, **request),
                       runs_dir=str(root), return_state=True)
    return state.result(raise_on_failure=False)


def _checks_of(rep) -> list[dict[str, Any]]:
    return [{"round": r.round, "label": c.label, "verdict": c.verdict, "ratio": c.ratio,
             "interval": [c.ratio_low, c.ratio_high]} for r in rep.rounds for c in r.checks]


def same_build(root: Path, scratch: Path) -> dict[str, Any]:
    rep = _reoptimize(root, _build(scratch, "same", ""))
    return {"ok": rep.outcome in ("no change", "improvement"), "outcome": rep.outcome,
            "checks": _checks_of(rep)}


def planted_slowdown(root: Path, scratch: Path) -> dict[str, Any]:
    rep = _reoptimize(root, _build(scratch, "slow", "--threads 1 --threads-batch 1"))
    return {"ok": rep.outcome == "regression" and len(rep.rounds) == 2,
            "outcome": rep.outcome, "checks": _checks_of(rep)}


# --- the regression rule's power (--power; the pure parts: bench/verdicts_power.py) ----

def request_s(stored) -> float:
    """Seconds a streamed request took this machine's real engine at the target concurrency in
    the accepted run (the slower of winner and runner-up): what the paces scale."""
    import statistics

    from infopt.tuning.remeasure import picks

    tokens = stored.workload.traffic.output_lengths.tokens
    slowest = min(statistics.median(p.stored) for p in picks(stored))
    return stored.workload.target_concurrency * tokens / slowest


def _target_level_only(stored):
    """The accepted workload as its closed loop at the target concurrency only: the verdicts
    read that level (the sweep's other level would add paced seconds to every start)."""
    from infopt.specs.workload import ClosedLoop

    traffic = stored.workload.traffic
    return stored.workload.model_copy(update={"traffic": traffic.model_copy(update={
        "arrival": ClosedLoop(concurrency=traffic.peak_active_generations)})})


def _copy_run(root: Path, stored, run_id: str, **update):
    """Run `stored` copied under `run_id` (its quality reference and floor with it), `update`
    applied to its report."""
    shutil.copytree(root / stored.run_id, root / run_id,
                    ignore=shutil.ignore_patterns("trials", "plots"))
    copy = stored.model_copy(update={"run_id": run_id, **update})
    (root / run_id / "report.json").write_text(copy.model_dump_json())
    return copy


def paced_baseline(root: Path, stored, build: str, index_url: str) -> str:
    """The accepted run whose stored trials are fresh ones of its winner and runner-up on the
    paced build `build` (one round; its verdict against the unpaced engine is not kept), as
    the `paced` fixture of tests/flows/test_reoptimize_flow.py: the picks and the spread the
    verdicts pool are all paced. Returns its run id."""
    from infopt.tuning.remeasure import config_id

    lean = _copy_run(root, stored, f"{stored.run_id}-lean", workload=_target_level_only(stored))
    rep = _reoptimize(root, build, confirm_rounds=1, baseline_run=lean.run_id,
                      index_url=index_url)
    fresh = [t for t in getattr(rep, "trials", []) if t.objective_value is not None]
    if len(fresh) != 4 or len({config_id(t.config) for t in fresh}) != 2:
        raise RuntimeError(f"the paced baseline round measured {len(fresh)} of 4 trials of 2 "
                           f"configurations: {getattr(rep, 'summary', rep)}")
    return _copy_run(root, lean, f"{stored.run_id}-paced", engine_version=rep.installed_version,
                     winner_trial_id=fresh[0].trial_id, trials=fresh).run_id


def power(trials: int, slowdowns: tuple[float, ...], out_dir: Path,
          record: Path | None) -> dict[str, Any]:
    """N decisions of `reoptimize` per planted slowdown against one paced baseline (module
    docstring); the runs stay under out_dir/power-<time>, the result is rewritten after every
    decision (an interrupted run keeps what it decided)."""
    from prefect.testing.utilities import prefect_test_harness

    from infopt.engines import adapter_for
    from infopt.runs.accepted import accept
    from infopt.specs.reoptimize import ReoptimizeRequest
    from infopt.specs.request import Budgets
    from tests.indexserver import FakeIndex
    from tests.paced_build import write_build

    rule = ReoptimizeRequest().model_dump(include={"bound", "confidence", "repeats",
                                                   "confirm_rounds"})
    res: dict[str, Any] = {"bench": "verdicts-power", "date": time.strftime("%Y-%m-%d"),
                           "commit": _commit(), "rule": rule, "trials": trials,
                           "slowdowns": list(slowdowns)}
    decisions: list[vp.Decision] = []
    out = out_dir / "verdicts_power.json"
    folder = out_dir / f"power-{time.strftime('%Y%m%d-%H%M%S')}"
    builds, runs = folder / "builds", folder / "runs"
    t_start = time.perf_counter()

    def save() -> None:
        res.update(minutes=(time.perf_counter() - t_start) / 60,
                   rows=vp.tabulate(decisions, slowdowns),
                   decisions=[d.record() for d in decisions])
        out.write_text(json.dumps(res, indent=1) + "\n")

    with prefect_test_harness(server_startup_timeout=180), \
            FakeIndex({"llama-cpp-python": ["0.3.36"]}) as index:
        # The flow tests' short optimize run: it only has to name a winner and a runner-up.
        report = _optimize(runs, budgets=Budgets(repeats=2, max_rounds=2, max_window_scale=1.0),
                           scenarios=("short",))
        accept(runs, report.run_id, by="bench-verdicts --power")
        unit, tokens = request_s(report), report.workload.traffic.output_lengths.tokens
        real = adapter_for("llamacpp").locate()

        def build(name: str, slowdown: float) -> str:
            return write_build(builds, name, real, *vp.paced_times(unit, tokens, slowdown))

        base = paced_baseline(runs, report, build("paced", 0.0), index.url)
        res.update(accepted_run=report.run_id, baseline_run=base, request_s=unit,
                   setup_s=(setup_s := time.perf_counter() - t_start))
        print(f"[bench-verdicts --power] setup {setup_s:.0f} s: accepted {report.run_id}, "
              f"paced baseline {base} (a request {unit:.3f} s on the real engine, ~{3 * unit:.2f}"
              f" s paced); runs under {runs}", flush=True)
        paced = {s: build(f"slow{round(100 * s)}" if s else "same", s) for s in slowdowns}
        total = trials * len(slowdowns)
        for i in range(trials):
            for s in vp.rotated(slowdowns, i):
                t0 = time.perf_counter()
                rep = _reoptimize(runs, paced[s], baseline_run=base, index_url=index.url)
                d = vp.decision_of(rep, s, i + 1, time.perf_counter() - t0)
                decisions.append(d)
                save()
                left = (total - len(decisions)) * \
                    (time.perf_counter() - t_start - setup_s) / len(decisions)
                print(f"[bench-verdicts --power] trial {i + 1}, slowdown {s:.0%}: {d.decision} "
                      f"({d.outcome}; {d.rounds} round(s), ratios "
                      f"{[round(r, 3) for r in d.ratios]}, {d.wall_s:.0f} s); about "
                      f"{left / 60:.0f} min left", flush=True)
    save()
    table = vp.markdown(res["rows"])
    (out_dir / "verdicts_power.md").write_text(table + "\n")
    print(f"\n{table}\n\n{res['minutes']:.1f} min in all; {out}")
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, record)
        print(f"recorded: {record}")
    return res


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The throughput verdicts and speed checks on this "
                                 "machine's real llama-server; --power: the regression rule's "
                                 "power and false alarms on planted slowdowns.")
    ap.add_argument("--power", action="store_true",
                    help="measure the regression rule's power and false alarms on paced builds")
    ap.add_argument("--trials", type=int, default=vp.DEFAULT_TRIALS,
                    help=f"--power: decisions per slowdown (default {vp.DEFAULT_TRIALS})")
    ap.add_argument("--slowdowns", type=vp.parse_slowdowns, default=vp.SLOWDOWNS,
                    help="--power: planted slowdowns in percent (default 0,10,25,50; 0: the "
                         "same build)")
    ap.add_argument("--record", type=Path, default=None,
                    help="--power: copy the result JSON here too (e.g. "
                         "bench/results/verdicts-power-<date>.json)")
    args = ap.parse_args(argv)
    if args.power:
        if args.trials < 1:
            ap.error("--trials: at least 1")
        out_dir = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench"))
        out_dir.mkdir(parents=True, exist_ok=True)
        power(args.trials, args.slowdowns, out_dir, args.record)
        return 0
    return checks()


def checks() -> int:
    from prefect.testing.utilities import prefect_test_harness

    from infopt.runs.accepted import accept

    out = Path(os.environ.get("INFOPT_BENCH_OUT", "/tmp/infopt-bench")) / "verdicts_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="infopt-verdicts-") as tmp, \
            prefect_test_harness(server_startup_timeout=180):
        scratch, runs = Path(tmp), Path(tmp) / "runs"
        t0 = time.perf_counter()
        report = _optimize(runs)
        print(f"[bench-verdicts] optimize run {report.run_id}: "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        accept(runs, report.run_id, by="bench-verdicts")
        for name, check in (
                ("reproduce-band", lambda: reproduce_band(report, scratch)),
                ("engine-cpu-floor", lambda: engine_cpu_floor(report)),
                ("same-build", lambda: same_build(runs, scratch)),
                ("planted-slowdown", lambda: planted_slowdown(runs, scratch))):
            t0 = time.perf_counter()
            results[name] = {**check(), "wall_s": time.perf_counter() - t0}
            print(f"[bench-verdicts] {name}: {'holds' if results[name]['ok'] else 'DOES NOT HOLD'}"
                  f" {json.dumps({k: v for k, v in results[name].items() if k != 'ok'})}",
                  flush=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"[bench-verdicts] results: {out}")
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
