"""Shortlisted hub checkpoints of the exact model, downloaded only behind the download gate, as
the ladder's weight candidates (infopt.tuning.hub_weights picks them). Denied or unanswered, a
checkpoint is skipped and the answer recorded; the run goes on with the others."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger

from blocks.credentials import hf_token
from flows.download import download_task
from flows.gate import ask
from infopt.engines.ladder import WeightVariant
from infopt.model.download import download_gate
from infopt.model.hub import default_cache_dir, fetch_model_facts
from infopt.specs.approval import GateAnswer
from infopt.specs.checkpoint import Shortlist
from infopt.specs.request import OptimizeRequest
from infopt.tuning.hub_weights import (
    checkpoint_files,
    identical_to,
    pick_checkpoints,
    spec_of,
    variant_format,
    why_tried,
)


def hub_variants(request: OptimizeRequest, shortlist: Shortlist | None, engine: str,
                 local_digest: str) -> tuple[list[WeightVariant], dict[str, GateAnswer],
                                             list[str]]:
    """(the downloaded checkpoints as variants, model path -> its gate's answer, notes)."""
    picked, why_none = pick_checkpoints(request, shortlist, engine)
    variants, answers, notes = [], {}, [why_none] if why_none else []
    cache = default_cache_dir()
    for c in picked:
        facts = fetch_model_facts(c.repo_id, cache_dir=cache, revision=c.commit_sha,
                                  endpoint=shortlist.endpoint,
                                  token=hf_token(request.credentials_block),
                                  read_weight_headers=False)
        files = checkpoint_files(c, facts.files)
        if identical_to(files, local_digest):  # the hub's LFS hash: nothing fetched to know
            notes.append(f"shortlisted {spec_of(c)}: byte-identical to the served checkpoint "
                         f"(sha256 {local_digest[7:19]}…), not downloaded")
            continue
        answer = ask(download_gate(facts, files, cache), request.authorize,
                     request.approval_timeout_s)
        if not answer.approved:
            notes.append(f"shortlisted {spec_of(c)}: not downloaded (the download gate was "
                         f"not approved: {answer.source.value})")
            answers[spec_of(c)] = answer
            continue
        path = download_task(facts, files, str(cache), request.credentials_block)
        fmt, bits = variant_format(c)
        variants.append(WeightVariant(fmt, path, bits, source=c.repo_id, why=why_tried(c)))
        answers[path] = answer
        get_run_logger().info("weight candidate %s from %s: %s", fmt, c.repo_id, Path(path))
    return variants, answers, notes
