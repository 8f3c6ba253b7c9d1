"""The long-context check inside a run (infopt.quality.long_context says what and why): the
reference's long windows are built when the first trial needs them (gate_run.build_long_windows),
kept beside the reference per machine; a trial that changes KV precision or
weights is judged on them while its engine runs, after its short verdict passed. Files under
quality/: long-<reference>-<context>.json (the windows, or why there are none),
long-scores-<candidate>-<context>.json (kept as scored, so a crash loses nothing),
long-verdict-<candidate>-<hash>.json."""

from __future__ import annotations

from pathlib import Path

from infopt.runs.memo import QUALITY
from infopt.runs.rundir import atomic_write
from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint
from infopt.specs.keys import content_key
from infopt.specs.quality import (
    LongContextCheck,
    LongContextReference,
    ScoredSequence,
    VerdictOrigin,
)

from .fidelity import fidelity
from .kept import load_floor, load_scores, save_scores
from .long_context import FIRST_LOOK_WINDOWS, WINDOWS, build_long_reference
from .sequential import GateSettings, sequential_verdict
from .teacher import Progress, score_sequences

LONG_TIMEOUT_S = 900.0  # one request prefills half the context: minutes on a slow CPU
_BUDGET = f"the long-context check's {WINDOWS} windows"


def long_reference_path(reference_path: str | Path, context_tokens: int) -> Path:
    ref = Path(reference_path)
    return ref.with_name(ref.stem.replace("reference-", "long-", 1) + f"-{context_tokens}.json")


def ensure_long_reference(endpoint: Endpoint, path: Path, context_tokens: int,
                          progress: Progress | None = None) -> LongContextReference:
    """The long windows on the running reference (kept; recalled when built earlier). When
    none can be scored, the file records why, and trials go without the check."""
    if (kept := _kept(path)) is not None:
        return kept
    try:
        long = build_long_reference(endpoint, context_tokens, timeout_s=LONG_TIMEOUT_S,
                                    progress=progress)
    except (ValueError, InputError) as exc:
        record_no_windows(path, context_tokens, str(exc))
        return LongContextReference(reference=None, served_context_tokens=context_tokens,
                                    prompt_tokens=[], unavailable=str(exc))
    atomic_write(path, long.model_dump_json())
    QUALITY.keep_from(path)
    return long


def record_no_windows(path: Path, context_tokens: int, why: str) -> None:
    """Kept as the windows' file: trials go without the check, and the report says why."""
    atomic_write(path, LongContextReference(reference=None, served_context_tokens=context_tokens,
                                            prompt_tokens=[], unavailable=why).model_dump_json())
    QUALITY.keep_from(path)


def windows_missing(reference_path: str, context_tokens: int) -> bool:
    """Whether no trial has built (or tried to build) the windows yet, here or earlier on this
    machine."""
    return _kept(long_reference_path(reference_path, context_tokens)) is None


def _kept(path: Path) -> LongContextReference | None:
    if not QUALITY.recall_into(path):
        return None
    return LongContextReference.model_validate_json(path.read_text(encoding="utf-8"))


def ensure_long_floor(endpoint: Endpoint, path: Path, progress: Progress | None = None) -> None:
    """The floor's restart scores the windows, two at once (as the short floor scores the
    pool), and the result is kept in the windows' file."""
    long = _kept(path)
    if long is None or long.reference is None or long.floor is not None:
        return
    ref = long.reference
    scored = score_sequences(endpoint, ref, ref.sequences, timeout_s=LONG_TIMEOUT_S,
                             progress=progress, label="long-context floor", concurrency=2)
    floor = fidelity(ref, scored, endpoint.base_url)
    atomic_write(path, long.model_copy(update={"floor": floor}).model_dump_json())
    QUALITY.keep_from(path)


def long_note(path: Path) -> str | None:
    """What the report says about the check at the run's level (None: nothing was built)."""
    if not path.is_file():
        return None
    long = LongContextReference.model_validate_json(path.read_text(encoding="utf-8"))
    if long.reference is None:
        return (f"The long-context check could NOT run ({long.unavailable}): changes of KV "
                "precision or weights were judged on the short pool only.")
    shortened = f" (shortened: {long.shortened})" if long.shortened else ""
    floor = (f"; their floor (the restart scoring them two at once): top-1 agreement "
             f"{long.floor.top1_agreement:.1%} over {long.floor.positions} tokens"
             if long.floor else "")
    return (f"Long-context check: a change of KV precision or weights is also judged on "
            f"{len(long.prompt_tokens)} prompts of {min(long.prompt_tokens):,}-"
            f"{max(long.prompt_tokens):,} tokens of the {long.served_context_tokens:,}-token "
            f"served context{shortened}, {FIRST_LOOK_WINDOWS} then {WINDOWS} until "
            f"decided{floor}.")


def judge_long_context(endpoint: Endpoint, reference_path: str, context_tokens: int, key: str,
                       tolerance: float, reason: str, origin: VerdictOrigin | None = None,
                       progress: Progress | None = None) -> LongContextCheck | None:
    """The candidate's long-context check (None: the run has no long windows, whose file
    says why). Judged against the reference like the short gate, with the short gate's
    floor; decided once per candidate, reference and tolerance."""
    path = long_reference_path(reference_path, context_tokens)
    long = _kept(path)
    if long is None or long.reference is None:
        return None
    ref = long.reference
    settings = GateSettings(tolerance=tolerance, budget=WINDOWS, first=FIRST_LOOK_WINDOWS,
                            budget_source=_BUDGET)
    tag = content_key({"long": path.stem, "candidate": key, "tolerance": tolerance})
    out = path.with_name(f"long-verdict-{key}-{tag}.json")
    if QUALITY.recall_into(out):
        return LongContextCheck.model_validate_json(out.read_text(encoding="utf-8"))
    floor = long.floor or load_floor(reference_path)  # windows kept before their floor
    scores_path = path.with_name(f"long-scores-{key}-{context_tokens}.json")
    scores = load_scores(scores_path)

    def score_first(n: int) -> list[ScoredSequence]:
        nonlocal scores
        if len(scores) < n:
            scores = scores + score_sequences(endpoint, ref, ref.sequences[len(scores):n],
                                              timeout_s=LONG_TIMEOUT_S, progress=progress,
                                              label="long-context")
            save_scores(scores_path, scores)  # a crash keeps what was scored
        return scores[:n]

    verdict = sequential_verdict(ref, floor, settings, score_first, endpoint=endpoint.base_url)
    verdict = verdict.model_copy(update={"made_by": origin})
    check = LongContextCheck(reason=reason, served_context_tokens=long.served_context_tokens,
                             prompt_tokens=long.prompt_tokens, shortened=long.shortened,
                             verdict=verdict)
    atomic_write(out, check.model_dump_json(indent=2))
    QUALITY.keep_from(out)
    return check
