"""Verify the API contract of a running endpoint, with the results kept per API surface (what
the run's trials call; engine-free like the probes: the caller gives the Endpoint). Every trial is
checked before its measurement counts: the control and the baseline on every probe (the
report's route table), the other candidates on what is required. Results depend only on the
engine version, the model and the adapter's api_surface_knobs, so they are kept per machine
under $INFOPT_CACHE_DIR/contract/<key>.json (contract_cache()) with each probe's evidence, and
a trial with the same API surface (in this run or a later one) reuses them: its evidence files
are written from the cache into its own folder."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import TypeAdapter

from infopt.contract.openai_chat import BASE_REQUIRED
from infopt.contract.verify import verify_endpoint
from infopt.runs.memo import CONTRACT
from infopt.runs.rundir import atomic_write
from infopt.specs.contract import ContractCheck
from infopt.specs.endpoint import Endpoint

_CHECKS = TypeAdapter(list[ContractCheck])


def contract_cache() -> Path:
    """The machine's kept contract results (infopt.runs.memo.CONTRACT): INFOPT_CONTRACT_CACHE_DIR
    moves it (tests point it at their own folder, so every test session probes the engines it
    starts)."""
    return CONTRACT.root


def _cached(key: str, evidence_dir: Path, required: tuple[str, ...]
            ) -> list[ContractCheck] | None:
    text = CONTRACT.recall(f"{key}.json")
    if text is None:
        return None
    try:
        saved = json.loads(text)
        checks = _CHECKS.validate_python(saved["checks"])
    except (ValueError, KeyError):
        return None  # a damaged entry is probed again
    evidence_dir.mkdir(parents=True, exist_ok=True)
    must, out = set(required) | set(BASE_REQUIRED), []
    for c in checks:
        file = evidence_dir / f"{c.feature}.json"
        atomic_write(file, saved["evidence"].get(c.feature, "{}"))
        out.append(c.model_copy(update={"required": c.feature in must,
                                        "evidence": str(file)}))
    return out


def _store(key: str, checks: list[ContractCheck]) -> None:
    evidence = {c.feature: Path(c.evidence).read_text(encoding="utf-8")
                for c in checks if c.evidence and Path(c.evidence).is_file()}
    CONTRACT.keep(f"{key}.json", json.dumps({"checks": _CHECKS.dump_python(checks, mode="json"),
                                             "evidence": evidence}))


def verify_kept(endpoint: Endpoint, required: tuple[str, ...], evidence_dir: str,
                features: tuple[str, ...], key: str | None, log: logging.Logger |
                logging.LoggerAdapter) -> list[ContractCheck]:
    """The endpoint's contract checks: kept ones of the same API surface (`key`, the run's
    EngineRun.contract_key) written into `evidence_dir`, else probed and kept."""
    folder = Path(evidence_dir)
    if key is not None and (checks := _cached(key, folder, required)) is not None:
        log.info("contract: this API surface was probed before (contract/%s.json): reused",
                 key)
        return checks
    checks = verify_endpoint(endpoint, required=required, features=features,
                             evidence_dir=folder)
    for c in checks:
        log.info("contract %s %s: %s%s (%s)", c.route, c.feature, c.status.value,
                 " [required]" if c.required else "", c.detail)
    if key is not None:
        _store(key, checks)
    return checks
