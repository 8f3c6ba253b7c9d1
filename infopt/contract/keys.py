"""What a configuration's API contract results depend on, as one content key (the tables kept in
the machine's memo are named by it): the engine, its build, the model, the knobs that can
change the API surface (the adapter's api_surface_knobs), the probes asked and the probes'
own code. Engine-free, like the probes: the engine's facts come as data."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import infopt.contract as contract_pkg
from infopt.specs.keys import code_digest, content_key
from infopt.specs.serving import AnyServingConfig, config_identity


@cache
def probes_digest() -> str:
    """The probes' own code: a change to any probe invalidates every kept result."""
    files = sorted(Path(contract_pkg.__file__).parent.glob("*.py"))
    return code_digest(files)


def contract_key(config: AnyServingConfig, engine_version: str, model_digest: str,
                 features: tuple[str, ...], surface_knobs: tuple[str, ...] | None) -> str:
    """What the API surface depends on: engine, version, model, the knobs that can change it
    (`surface_knobs`, the engine adapter's api_surface_knobs, given as data so the contract
    probes import no engine; None: every knob but where it listens), and the probes asked."""
    knobs = surface_knobs
    dump = config_identity(config, {"port", "host", "served_model_name"})
    surface = dump if knobs is None else {k: dump[k] for k in knobs}
    payload = {"engine": str(config.engine), "engine_version": engine_version,
               "model": model_digest, "surface": surface, "features": list(features),
               "probes": probes_digest()}
    return content_key(payload)
