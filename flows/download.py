"""The model's weights from the hub (the request's `model.download` patterns at `model.revision`
of `model.hub_id`), only behind the download gate; denied or unanswered, the run stops with the
answer (there is no model to serve without them)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from blocks.credentials import hf_token
from flows.gate import ask
from infopt.model.download import download_gate, fetch, select_files
from infopt.model.hub import default_cache_dir, fetch_model_facts
from infopt.specs.approval import GateAnswer
from infopt.specs.base import InputError
from infopt.specs.request import OptimizeRequest


@task(name="download-weights", cache_policy=NO_CACHE)
def download_task(facts, files, cache_dir: str, credentials_block: str | None = None) -> str:
    path = fetch(facts, files, Path(cache_dir), hf_token(credentials_block))
    get_run_logger().info("downloaded %d file(s) of %s to %s", len(files), facts.repo_id, path)
    return str(path)


def download_model(request: OptimizeRequest) -> tuple[str | None, list[GateAnswer]]:
    """(the downloaded model's local path, the gate's answer); (None, []) when nothing is to
    be downloaded."""
    m = request.model
    if not m.download:
        return None, []
    cache = default_cache_dir()
    facts = fetch_model_facts(m.hub_id, cache_dir=cache, revision=m.revision,
                              endpoint=m.hub_endpoint, token=hf_token(request.credentials_block),
                              read_weight_headers=False)
    files = select_files(facts, m.download)
    answer = ask(download_gate(facts, files, cache), request.authorize,
                 request.approval_timeout_s)
    if not answer.approved:
        raise InputError(f"the download of {m.hub_id} was not approved ({answer.source.value}: "
                         f"{answer.reason or 'no reason given'}); approve it, pre-authorize it "
                         "with --authorize download, or give model.path to a local copy")
    return download_task(facts, files, str(cache), request.credentials_block), [answer]
