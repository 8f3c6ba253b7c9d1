"""The report's "reproduce it by hand": the winner's exact command, `infopt bench` on the run's
own workload file (written beside the report), and the band its repeats make plausible."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from infopt.model.digest import model_digest
from infopt.runs.rundir import atomic_write
from infopt.specs.results import Reproduction, Trial, WeightsIdentity
from infopt.specs.workload import OBJECTIVE_UNIT, Workload
from infopt.tuning.pareto import config_label
from infopt.tuning.reproduce import reproduction_band


def reproduction(run_dir: Path, workload: Workload, winner: Trial, trials: list[Trial],
                 run_trials: list[Trial]) -> Reproduction:
    """`trials`: the winner's repeats; `run_trials`: every trial of its engine, whose repeated
    configurations give the start-to-start noise."""
    wf = run_dir / "workload.yaml"
    atomic_write(wf, yaml.safe_dump(workload.traffic.model_dump(mode="json", exclude_none=True),
                                    sort_keys=False))
    values = [t.objective_value for t in trials if t.objective_value is not None]
    groups: dict[str, list[float]] = {}
    for t in run_trials:
        if t.objective_value is not None:
            groups.setdefault(config_label(t), []).append(t.objective_value)
    expected, low, high, rule = reproduction_band(values, list(groups.values()))
    engine = winner.engine
    assert engine is not None  # the winner is a measured trial: its engine started
    bench = ["infopt", "bench", "--endpoint", f"http://127.0.0.1:{engine.port}",
             "--model", winner.config.served_model_name, "--workload", str(wf),
             "--engine", winner.config.engine.value, "--json"]
    return Reproduction(
        command=engine.command, bench_command=shlex.join(bench),
        workload_file=wf.name, objective=workload.objective.value,
        unit=OBJECTIVE_UNIT[workload.objective], trial_ids=[t.trial_id for t in trials],
        expected=expected, low=low, high=high, rule=rule)


def weights_identity(path: str, hub_id: str | None, revision: str | None) -> WeightsIdentity:
    """The winner's weights: digest, and where a downloaded file came from (the hub cache keeps
    .../models--ORG--NAME/snapshots/SHA/FILE)."""
    parts = Path(path).parts
    source = "local file"
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] == "snapshots":
            repo = part.removeprefix("models--").replace("--", "/", 1)
            source = f"hub {repo} at revision {parts[i + 2]}"
            break
    else:
        if hub_id:
            source = (f"local file; its model is hub {hub_id}"
                      + (f" at revision {revision}" if revision else ""))
    return WeightsIdentity(path=path, digest=model_digest(path), source=source)

