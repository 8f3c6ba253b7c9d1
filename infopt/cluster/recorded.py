"""Recorded cluster runs, and the capacity model judged on a run it was not calibrated on.

A `RecordedRun` is what one run's boundary searches measured (every probe, pooled pairs
included) and the shape it measured them at (host cores, threads a replica, prompt and output
tokens, slots, the plan's routing); `python -m bench.cluster_bench --record NAME` writes one as
tests/fixtures/cluster/NAME.json.

What is fitted to what. `calibrated_on(run)` fits the model's one free factor, the queueing
wait's stretch, to that run's one-replica bracket and to nothing else. A held-out run is then
predicted without refitting, in one of two ways:

- "remeasured": the held-out run's replica as its own one-replica probes measured it (service
  time from the completions, their variability, the light-load TTFT, the decode curve; read,
  not fitted: `calibrate` without SLOs), at its own shape (threads, cores), with the
  calibration run's wait stretch carried over. Its brackets, one replica's included, are out
  of sample. This is the one that works across shapes.
- "transferred": the calibration run's model unchanged; nothing of the held-out run is read.
  Only for the same shape; it carries the host's run-to-run drift into the error.

The error is the validation's (infopt.cluster.capacity.validate): predicted / the bracket's
reference rate - 1, the bracket's width beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from infopt.cluster.capacity import calibrate, validate
from infopt.specs.base import Spec
from infopt.specs.cluster import Boundary, PlanValidation, ReplicaModel, Routing
from infopt.specs.traffic import Slo

Mode = Literal["remeasured", "transferred"]


class RecordedRun(Spec):
    """One `make bench-cluster` run's boundary searches, as measured."""

    source: str  # where, when and how it was measured (the command, the host, the commit)
    slots: int  # requests one replica serves at once (the capacity model's servers)
    slos: list[Slo]
    start_rate_per_s: float | None = None  # where each boundary search started
    # The shape. host_cores and threads_per_replica: a CPU host (None: GPU replicas).
    host_cores: int | None = None
    threads_per_replica: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    probe_requests: int | None = None  # measured requests a probe
    routing: Routing = "pooled"  # how the plan models the router the larger counts ran behind
    boundaries: dict[int, Boundary]

    def shape(self) -> tuple[int | None, ...]:
        """What the replica's measured inputs depend on: a different shape, a different
        replica (only "remeasured" predicts across it)."""
        return (self.slots, self.host_cores, self.threads_per_replica, self.prompt_tokens,
                self.output_tokens)

    def describe(self) -> str:
        parts = [f"{self.slots} slot(s)"]
        if self.threads_per_replica is not None:
            parts.append(f"{self.threads_per_replica} thread(s) a replica on "
                         f"{self.host_cores} cores")
        if self.prompt_tokens is not None:
            parts.append(f"{self.prompt_tokens} prompt + {self.output_tokens} output tokens")
        return ", ".join(parts)


class HeldOutPrediction(Spec):
    """A run's boundaries predicted by a model calibrated on another run (or, `same_run`, on
    itself: a placeholder that validates nothing)."""

    calibration: str  # the run whose one-replica bracket the wait stretch was fitted to
    held_out: str
    mode: Mode
    same_run: bool
    model: ReplicaModel
    validations: list[PlanValidation]


def load_run(path: Path) -> RecordedRun:
    return RecordedRun.model_validate(json.loads(path.read_text()))


def write_run(run: RecordedRun, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run.model_dump_json(indent=1) + "\n")
    return path


def _one(run: RecordedRun, name: str) -> Boundary:
    if 1 not in run.boundaries:
        raise ValueError(f"{name} has no one-replica boundary: the model is calibrated on it")
    return run.boundaries[1]


def calibrated_on(run: RecordedRun, name: str = "the calibration run") -> ReplicaModel:
    """The model as the cluster flow calibrates it: the wait stretch fitted to this run's
    one-replica bracket (its only fitted number), the replica measured on the same probes."""
    return calibrate(_one(run, name), run.slots, run.slos, host_cores=run.host_cores,
                     threads_per_replica=run.threads_per_replica)


def remeasured(model: ReplicaModel, run: RecordedRun, calibration: str,
               name: str = "the held-out run") -> ReplicaModel:
    """`run`'s replica as its own one-replica probes measured it (nothing fitted), with
    `model`'s wait stretch carried over."""
    m = calibrate(_one(run, name), run.slots, None, host_cores=run.host_cores,
                  threads_per_replica=run.threads_per_replica)
    return m.model_copy(update={
        "wait_scale": model.wait_scale,
        "calibrated_from": f"{m.calibrated_from}; wait stretch x{model.wait_scale:.3g} "
                           f"carried from {calibration} (fitted to its one-replica bracket), "
                           "not refitted"})


def predict_held_out(calibration: RecordedRun, held_out: RecordedRun, *,
                     mode: Mode = "remeasured", calibration_name: str = "calibration",
                     held_out_name: str = "held-out") -> HeldOutPrediction:
    """`held_out`'s boundaries predicted from the model calibrated on `calibration`, without
    refitting anything to `held_out`."""
    fitted = calibrated_on(calibration, calibration_name)
    if mode == "transferred":
        if held_out.shape() != calibration.shape():
            raise ValueError(
                f"{held_out_name} was measured at another shape ({held_out.describe()}; "
                f"{calibration_name}: {calibration.describe()}): the calibration run's "
                "replica does not stand for it; predict it \"remeasured\"")
        model = fitted
    else:
        model = remeasured(fitted, held_out, calibration_name, held_out_name)
    same = held_out == calibration
    return HeldOutPrediction(
        calibration=calibration_name, held_out=held_out_name, mode=mode, same_run=same,
        model=model, validations=validate(model, held_out.slos, held_out.boundaries,
                                          held_out.routing, in_sample={1} if same else ()))
