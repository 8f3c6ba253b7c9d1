"""A trial as data: `TrialSpec` (a configuration and its typed changes from the control) in, a
`Trial` result out, persisted under a key that changes whenever anything that could change the
measurement changes (configuration, workload, engine version, model file, seed, repeat).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from infopt.specs.keys import content_key

from .approval import GateAnswer
from .base import Spec
from .ladder import Dimension
from .serving import AnyServingConfig, KnobValue, ServingConfig, config_identity
from .workload import Workload


class TrialRole(StrEnum):
    CONTROL = "control"  # the engine's out-of-the-box defaults: every gain is stated against it
    BASELINE = "baseline"  # the simplest correct configuration at the full native context
    TUNING = "tuning"  # a candidate of a ladder dimension (or the incumbent re-measured)


class TuningDimension(Spec):
    """One performance dimension: the knob, the values to try, and why they are tried."""

    knob: str
    values: list[KnobValue]
    why: str


class KnobChange(Spec):
    """One knob that differs from the control: what the control runs and what this trial runs
    (None: the engine's own default, the flag left off)."""

    knob: str
    control: KnobValue
    value: KnobValue


# What a trial's value belongs to: a ladder dimension, a black-box search's point
# (infopt.tuning.blackbox), the re-measurement of an accepted run's pick (flows/remeasure) or
# the final paired comparison of the winner with the control ("decision"); None for the
# control and the baseline.
TrialDimension = Dimension | Literal["search", "reoptimize", "decision"]


class TrialSpec(Spec):
    trial_id: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._=-]*$")
    role: TrialRole
    config: ServingConfig
    changes: list[KnobChange]  # relative to the control; empty for the control itself
    dimension: TrialDimension | None = None  # what its value belongs to (decision grouping)
    value: str | None = None
    repeat: int = Field(1, ge=1)
    seed: int = Field(0, ge=0)
    with_contract: bool = False  # check the API contract before measuring
    approvals: list[GateAnswer] = Field(default_factory=list)  # the gates that let it run
    # The configuration this candidate modifies (the ladder's incumbent): the quality gate
    # judges the candidate paired against it (same prompts, same positions). None for the
    # control and the baseline, which are judged against the reference directly.
    incumbent: ServingConfig | None = None
    # The measurement window: the target scenario's measured requests (None: the workload's
    # own), sized by the climb from the noise measured at the start of the run.
    measured_requests: int | None = Field(None, ge=1)

    def workload_for(self, workload: Workload) -> Workload:
        """What this trial measures: the run's workload with this round's prompts (its seed
        added to the workload's, so an engine kept up between rounds never meets a prompt it
        has cached) and this window's measured requests."""
        t = workload.traffic
        update: dict[str, Any] = {"seed": t.seed + self.seed}
        if self.measured_requests is not None:
            update["measured_requests"] = self.measured_requests
        return workload.model_copy(update={"traffic": t.model_copy(update=update)})


def changes_from(control: AnyServingConfig, config: AnyServingConfig) -> list[KnobChange]:
    """The knobs `config` sets differently from `control` (same engine), in field order."""
    a, b = control.model_dump(), config.model_dump()
    if a.get("engine") != b.get("engine"):
        raise ValueError(f"a change is relative to a control of the same engine "
                         f"({a.get('engine')} vs {b.get('engine')})")
    skip = {"engine", "model_path", "served_model_name", "host", "port", "env"}
    flat_a = _flat({k: v for k, v in a.items() if k not in skip})
    flat_b = _flat({k: v for k, v in b.items() if k not in skip})
    knobs = [KnobChange(knob=k, control=flat_a.get(k), value=v) for k, v in flat_b.items()
             if flat_a.get(k) != v]
    knobs += [KnobChange(knob=k, control=v, value=None) for k, v in flat_a.items()
              if k not in flat_b and v is not None]
    # An environment variable is a change of its own: `env.NAME` (None: not set).
    env_a, env_b = a.get("env") or {}, b.get("env") or {}
    return knobs + [KnobChange(knob=f"env.{k}", control=env_a.get(k), value=env_b.get(k))
                    for k in sorted(env_a.keys() | env_b.keys()) if env_a.get(k) != env_b.get(k)]


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested option blocks (TensorRT-LLM's LLM API options) as dotted knobs, as with_knob
    takes them: {"a": {"b": 1}} -> {"a.b": 1}; an unset block adds nothing."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def trial_key(spec: TrialSpec, workload: Workload, engine_version: str,
              model_digest: str, gate: str = "") -> str:
    """`<trial-id>-<12 hex>`: the folder a trial's files and trial.json live in. The hash covers
    everything that could change the measurement, so a resumed run reuses a trial only when
    the same trial would be run again; the port is left out (a free one is picked anyway).
    `gate`: what the trial's quality gate compares against (reference key and tolerance)."""
    config = config_identity(spec.config)
    payload = {"config": config, "workload": workload.model_dump(mode="json"),
               "engine_version": engine_version, "model": model_digest, "seed": spec.seed,
               "repeat": spec.repeat, "contract": spec.with_contract, "gate": gate}
    if spec.measured_requests is not None:
        payload["measured_requests"] = spec.measured_requests
    if spec.incumbent is not None:  # the quality verdict is paired against it
        payload["incumbent"] = config_identity(spec.incumbent)
    return f"{spec.trial_id}-{content_key(payload)}"
