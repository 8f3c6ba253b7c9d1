"""The drafter search's verified hub drafters, downloaded behind the download gate so the
speculative step can run them (infopt.model.drafters found and verified them). Only with
downloads pre-authorized (`authorize: [download]`): a drafter is an optional extra, so a run
never stops to ask for one; without it, or denied, the ladder names the drafter and moves on.
At most the best EAGLE head and the best draft model are fetched."""

from __future__ import annotations

from prefect import get_run_logger

from blocks.credentials import hf_token
from flows.download import download_task
from flows.gate import ask
from infopt.model.download import download_gate
from infopt.model.drafters import best_drafters
from infopt.model.hub import default_cache_dir, fetch_model_facts
from infopt.specs.drafters import DrafterSearch
from infopt.specs.request import Authorization, OptimizeRequest
from infopt.tuning.hub_weights import hf_checkpoint_files


def fetch_drafters(request: OptimizeRequest, search: DrafterSearch) -> dict[str, str]:
    """{repository: its downloaded folder} for the drafters the gate let through."""
    log = get_run_logger()
    picks = best_drafters(search)
    if not picks:
        return {}
    if Authorization.DOWNLOAD not in request.authorize:
        log.info("drafters %s: not downloaded (downloads were not authorized; pre-authorize "
                 "with `authorize: [download]`)", ", ".join(f.repo_id for f in picks))
        return {}
    cache, out = default_cache_dir(), {}
    for f in picks:
        facts = fetch_model_facts(f.repo_id, cache_dir=cache, revision=f.commit_sha,
                                  endpoint=search.endpoint,
                                  token=hf_token(request.credentials_block),
                                  read_weight_headers=False)
        files = hf_checkpoint_files(facts.files)
        answer = ask(download_gate(facts, files, cache), request.authorize,
                     request.approval_timeout_s)
        if not answer.approved:
            log.info("drafter %s: not downloaded (%s)", f.repo_id, answer.source.value)
            continue
        out[f.repo_id] = download_task(facts, files, str(cache), request.credentials_block)
        log.info("drafter %s (%s): %s", f.repo_id, f.kind, out[f.repo_id])
    return out
