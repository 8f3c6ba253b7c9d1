"""Verify the API contract of a running engine (infopt.contract.verify). Every trial is
checked before its measurement counts, but a trial whose configuration shares its API surface
with one already probed (the same engine version, model and the adapter's api_surface_knobs)
reuses those results: runs/<id>/contract/<key>.json. The evidence of each probe goes to the
folder of the trial that ran it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from pydantic import TypeAdapter

from infopt.contract.verify import FEATURES, verify_endpoint
from infopt.engines import adapter_for, endpoint_for
from infopt.specs.contract import ContractCheck
from infopt.specs.results import RunningEngine

_CHECKS = TypeAdapter(list[ContractCheck])


def contract_key(config, engine_version: str, model_digest: str) -> str:
    """What the API surface depends on: engine, version, model, the knobs that can change it
    (an adapter that names none: every knob but where it listens)."""
    knobs = adapter_for(config.engine).api_surface_knobs
    dump = config.model_dump(mode="json", exclude={"port", "host", "served_model_name"})
    surface = dump if knobs is None else {k: dump[k] for k in knobs}
    payload = {"engine": str(config.engine), "engine_version": engine_version,
               "model": model_digest, "surface": surface, "features": FEATURES}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


@task(name="verify-contract", cache_policy=NO_CACHE)
def verify_contract(running: RunningEngine, served_model_name: str, required: tuple[str, ...],
                    evidence_dir: str, cache_file: str | None = None) -> list[ContractCheck]:
    log = get_run_logger()
    cached = Path(cache_file) if cache_file else None
    if cached is not None and cached.is_file():
        checks = _CHECKS.validate_json(cached.read_text(encoding="utf-8"))
        log.info("contract: the same API surface was probed earlier (%s): reused", cached.name)
        return [c.model_copy(update={"required": c.required or c.feature in required})
                for c in checks]
    checks = verify_endpoint(endpoint_for(running.engine, running.base_url, served_model_name,
                                          running.pid),
                             required=required, evidence_dir=Path(evidence_dir))
    for c in checks:
        log.info("contract %s %s: %s%s (%s)", c.route, c.feature, c.status.value,
                 " [required]" if c.required else "", c.detail)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(cached.name + ".tmp")
        tmp.write_bytes(_CHECKS.dump_json(checks, indent=2))
        tmp.replace(cached)
    return checks
