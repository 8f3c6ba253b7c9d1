"""Verify the API contract of a running engine (infopt.contract.openai_chat); the evidence of
each check goes to the trial's folder."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.contract.openai_chat import verify_chat
from infopt.engines import endpoint_for
from infopt.specs.contract import ContractCheck
from infopt.specs.results import RunningEngine


@task(name="verify-contract", cache_policy=NO_CACHE)
def verify_contract(running: RunningEngine, served_model_name: str, required: tuple[str, ...],
                    evidence_dir: str) -> list[ContractCheck]:
    checks = verify_chat(endpoint_for(running.engine, running.base_url, served_model_name,
                                      running.pid),
                         required=required, evidence_dir=Path(evidence_dir))
    for c in checks:
        get_run_logger().info("contract %s %s: %s%s (%s)", c.route, c.feature, c.status.value,
                              " [required]" if c.required else "", c.detail)
    return checks
