"""What a troubleshooting remedy does to a configuration, as a pure function: the one rule every
engine start applies (tasks/engine.py:engine_session)."""

from __future__ import annotations

from pydantic import ValidationError

from infopt.specs.diagnosis import Remedy
from infopt.specs.serving import AnyServingConfig, with_knobs


def apply_remedy(config: AnyServingConfig, remedy: Remedy) -> AnyServingConfig | None:
    """`config` with the remedy's knob and environment changes; None when one of its knobs
    does not exist on this engine (the remedy is another engine's). The environment becomes
    part of the configuration, so later trials, trial keys and rendered deployments carry it."""
    try:
        config = with_knobs(config, {**remedy.knob_changes,
                                     **{f"env.{n}": v for n, v in remedy.env_changes.items()}})
    except (ValueError, ValidationError):
        return None
    return config
