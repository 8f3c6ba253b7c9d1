"""`infopt quality` against bare URLs: which engine serves each (its adapter brings the exact
scoring), the reference (built, or read from a saved file so re-runs stay cheap), the floor
(the reference's tokens scored by a restart of the reference, when one is given) and the
candidate, then the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import ValidationError

from infopt.engines import endpoint_for, identify_engine
from infopt.runs.rundir import atomic_write
from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint
from infopt.specs.quality import (
    MeasureVerdict,
    QualityVerdict,
    ReferenceSet,
    ScoredSequence,
    TaskSetResult,
)

from .gate import quality_verdict
from .lmeval import metric_verdicts, run_lm_eval
from .prompts import pool_prefix
from .sequential import GateSettings, sequential_verdict
from .taskrun import run_tasksets
from .tasksets import all_items
from .teacher import (
    DEFAULT_TOKENS,
    DEFAULT_TOP_K,
    Progress,
    build_reference,
    score_candidate,
    score_sequences,
)


def served_model(base_url: str, timeout_s: float = 10.0) -> str:
    """The one model a server lists on /v1/models (ask for --model when it lists several)."""
    try:
        r = httpx.get(base_url.rstrip("/") + "/v1/models", timeout=timeout_s)
        ids = [m["id"] for m in r.json()["data"]] if r.status_code == 200 else []
    except httpx.TransportError as exc:
        raise InputError(f"cannot reach {base_url} ({exc}); give the base URL of a running "
                         "llama-server or vLLM server, e.g. http://127.0.0.1:8000") from None
    except (ValueError, KeyError, TypeError):
        ids = []
    if len(ids) != 1:
        raise InputError(f"{base_url} lists {len(ids)} models on /v1/models ({ids[:5]}); name "
                         "the one to score with --model")
    return ids[0]


def quality_endpoint(base_url: str, model: str | None, engine: str | None, *,
                     tasks_only_ok: bool = False) -> Endpoint:
    """The endpoint with its engine's exact scoring; a server of no known engine gets the
    generic endpoint (no scoring) when the task sets can judge it alone."""
    name = engine or identify_engine(base_url)
    if name is None and not tasks_only_ok:
        raise InputError(
            f"{base_url} is neither a llama-server (GET /props), a vLLM server (GET "
            "/version) nor an SGLang server (GET /get_model_info), the engines whose exact "
            "token scoring infopt knows; if it is one "
            "behind a proxy, name it with --reference-engine / --candidate-engine, or compare "
            "on the generative task sets alone with --tasks N")
    model = model or served_model(base_url)
    return endpoint_for(name, base_url, model) if name else Endpoint(base_url, model)


def _unscored(*endpoints: Endpoint | None) -> str | None:
    """Why token fidelity cannot be measured (None: it can)."""
    if bad := [e.base_url for e in endpoints if e is not None and e.scoring is None]:
        return (f"{', '.join(bad)} offers no exact token scoring infopt knows (neither "
                "llama-server, vLLM nor SGLang), so token fidelity was not measured")
    return None


def load_reference(path: Path) -> ReferenceSet | None:
    """A saved reference, or None when the file is not there yet (it is then built)."""
    if not path.is_file():
        return None
    try:
        return ReferenceSet.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not a reference saved by `infopt quality` ({exc}"[:300]
                         + "); delete it to build the reference again") from None


def save_reference(reference: ReferenceSet, path: Path) -> None:
    atomic_write(path, reference.model_dump_json())  # a crash leaves the old file or none


@dataclass(frozen=True)
class LmEvalRequest:
    """lm-evaluation-harness tasks to run on both servers (infopt.quality.lmeval)."""

    tasks: list[str]
    out_dir: Path  # each server's results in its own subfolder
    limit: int | None = None
    include: Path | None = None


def check_quality(reference: Endpoint, candidate: Endpoint, *, floor: Endpoint | None = None,
                  tolerance: float = 0.02, tokens: int = DEFAULT_TOKENS,
                  top_k: int = DEFAULT_TOP_K, reference_file: Path | None = None,
                  api_key: str | None = None, progress: Progress | None = None,
                  task_items: int = 0, lm_eval: LmEvalRequest | None = None,
                  max_prompts: int = 32) -> tuple[ReferenceSet | None, QualityVerdict]:
    """task_items > 0 also runs that many items of each generative task set on the reference
    and the candidate, `lm_eval` lm-eval's tasks; they alone decide when a server has no
    exact token scoring (the returned reference is then None). The candidate is scored on 8,
    16, ... of the reference's prompts (at most `max_prompts`) until the verdict is decided
    (infopt.quality.sequential)."""
    why = _unscored(reference, candidate, floor)
    if why is not None and (floor is not None or not (task_items or lm_eval)):
        raise InputError(why + ("; a noise floor (--floor) is a token-fidelity measure: drop it"
                                if floor is not None else
                                "; compare on the generative task sets with --tasks N"))
    extra = _lm_eval(reference, candidate, lm_eval, tolerance, api_key, progress)
    if why is not None:
        ref_tasks, cand_tasks = (_tasks(reference, candidate, task_items, api_key, progress)
                                 if task_items else (None, None))
        return None, quality_verdict(None, None, tolerance, ref_tasks, cand_tasks,
                                     fidelity_note=why, extra_measures=extra)
    ref = load_reference(reference_file) if reference_file else None
    if ref is None:
        ref = build_reference(reference, tokens=tokens, top_k=top_k, api_key=api_key,
                              prompts=pool_prefix(max_prompts), progress=progress)
        if reference_file:
            save_reference(ref, reference_file)
    # The floor scores two sequences at once: a restart *and* another batch size.
    floor_result = (score_candidate(floor, ref, api_key=api_key, progress=progress,
                                    label="floor", concurrency=2)
                    if floor else None)
    scored: list[ScoredSequence] = []  # scored so far, in the reference's order

    def score_first(n: int) -> list[ScoredSequence]:
        scored.extend(score_sequences(candidate, ref, ref.sequences[len(scored):n],
                                      api_key=api_key, progress=progress))
        return scored[:n]

    tokens_verdict = sequential_verdict(ref, floor_result,
                                           GateSettings(tolerance, max_prompts), score_first,
                                           endpoint=candidate.base_url)
    if not (task_items or extra):
        return ref, tokens_verdict
    ref_tasks, cand_tasks = (_tasks(reference, candidate, task_items, api_key, progress)
                             if task_items else (None, None))
    full = quality_verdict(tokens_verdict.candidate, floor_result, tolerance, ref_tasks,
                           cand_tasks, extra_measures=extra)
    return ref, full.model_copy(update={"looks": tokens_verdict.looks,
                                        "prompt_budget": tokens_verdict.prompt_budget})


def _lm_eval(reference: Endpoint, candidate: Endpoint, req: LmEvalRequest | None,
             tolerance: float, api_key: str | None, progress: Progress | None
             ) -> list[MeasureVerdict]:
    if req is None:
        return []
    runs = []
    for label, end in (("reference", reference), ("candidate", candidate)):
        if progress:
            progress(f"lm-eval {','.join(req.tasks)} on the {label} ({end.base_url})")
        runs.append(run_lm_eval(end, req.tasks, req.out_dir / label, limit=req.limit,
                                include=req.include, api_key=api_key))
    return metric_verdicts(runs[0], runs[1], tolerance)


def _tasks(reference: Endpoint, candidate: Endpoint, task_items: int, api_key: str | None,
           progress: Progress | None) -> tuple[list[TaskSetResult], list[TaskSetResult]]:
    items = all_items(task_items)
    if progress:
        progress(f"task sets: {len(items)} items on the reference, then the candidate")
    return (run_tasksets(reference, items, api_key=api_key),
            run_tasksets(candidate, items, api_key=api_key))
