"""Verify the API contract of a running engine."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from infopt.contract.chat import check_chat_contract
from infopt.engines import endpoint_for
from infopt.specs.results import ContractCheck, RunningEngine


@task(name="verify-contract", cache_policy=NO_CACHE)
def verify_contract(running: RunningEngine, served_model_name: str) -> list[ContractCheck]:
    checks = check_chat_contract(endpoint_for(running.engine, running.base_url,
                                              served_model_name, running.pid))
    for c in checks:
        get_run_logger().info("contract %s stream=%s: %s (%s)", c.route, c.stream,
                              "pass" if c.ok else "FAIL", c.detail)
    return checks
