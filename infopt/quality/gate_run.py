"""The quality gate inside a run, as plain functions taking a logger (tasks/quality.py wraps
each public one as a Prefect task): the reference is started once, builds its
greedy continuations of the gate's prompts (the request's budget of the pool) and is stopped; a
fresh restart at another batch size scores them for the noise floor; then every trial's
configuration is judged while its engine runs, before its measurement counts: sequentially,
paired against the incumbent it modifies (infopt.quality.sequential). Everything is persisted
under runs/<id>/quality/ and kept per machine (quality_cache()), keyed by what determines it
(configuration, engine version, model digest, prompt set, this machine's CPU/GPU, the scoring
code; a verdict also by the reference, the incumbent, the tolerance and the budget), so a
resumed run or a later run of the same model re-measures nothing, and says so."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from infopt.engines import adapter_for, endpoint_for
from infopt.engines.session import (
    CATALOG_ONLY,
    LOG,
    Logger,
    Started,
    Troubleshooting,
    engine_session,
)
from infopt.quality.check import load_reference, save_reference
from infopt.quality.kept import load_floor, load_scores, save_scores
from infopt.quality.keys import DEFAULT_MAX_PROMPTS
from infopt.quality.long_run import (
    ensure_long_floor,
    ensure_long_reference,
    long_note,
    long_reference_path,
    record_no_windows,
)
from infopt.quality.prompts import pool_prefix
from infopt.quality.sequential import GateSettings, sequential_verdict
from infopt.quality.taskrun import run_tasksets
from infopt.quality.tasksets import all_items
from infopt.quality.teacher import (
    build_reference,
    score_candidate,
    score_sequences,
)
from infopt.runs.memo import QUALITY
from infopt.runs.rundir import atomic_write
from infopt.specs.base import EngineStartError
from infopt.specs.diagnosis import Remedy
from infopt.specs.endpoint import Endpoint
from infopt.specs.keys import content_key
from infopt.specs.quality import (
    FidelityResult,
    QualityVerdict,
    ReferenceSet,
    ScoredSequence,
    TaskSetResult,
    VerdictOrigin,
)
from infopt.specs.results import RunningEngine
from infopt.specs.serving import AnyServingConfig, with_knob


def quality_cache() -> Path:
    """The machine's kept references, floors, scores and verdicts (infopt.runs.memo.QUALITY):
    INFOPT_QUALITY_CACHE_DIR moves it (tests point it at their own folder, so no verdict comes
    from an earlier run)."""
    return QUALITY.root



def _floor_config(config: AnyServingConfig) -> AnyServingConfig:
    """The reference at another batch size: two running requests where it had one, else one."""
    knob = adapter_for(config.engine).concurrency_knob
    return with_knob(config, knob, 1 if getattr(config, knob) not in (None, 1) else 2)


def quality_reference(config: AnyServingConfig, quality_dir: str, weights_bytes: int, key: str,
                      weights_why: str | None = None, prompts: int = DEFAULT_MAX_PROMPTS,
                      troubleshoot: Troubleshooting = CATALOG_ONLY, log: Logger = LOG
                      ) -> tuple[str | None, str]:
    """Build (or find) the reference and its floor. Returns (the reference file, or None when
    the gate cannot run; what the report says about it). `weights_why`: why the reference
    serves other weights than the checkpoint's own; `troubleshoot`: the run's, for their
    engine starts. The long-context check's windows are built later, by the first trial that
    needs them (build_long_windows)."""
    d = Path(quality_dir)
    ref_path, floor_path = d / f"reference-{key}.json", d / f"floor-{key}.json"
    weights = (f"the weights of {weights_why}" if weights_why else
               "the checkpoint's own weights, the highest precision this run's candidates share")
    what = (f"Reference: the control configuration ({weights}, the engine's default KV "
            f"precision); floor: a fresh restart of it at {adapter_for(config.engine).concurrency_knob}"
            f"={getattr(_floor_config(config), adapter_for(config.engine).concurrency_knob)} "
            f"scoring two sequences at once; {prompts} prompts of the pool, a candidate scored on "
            "8, 16, ... of them until its verdict is decided. Files: quality/.")
    if QUALITY.recall_into(ref_path) and QUALITY.recall_into(floor_path):
        log.info("quality reference %s: built earlier, reused", ref_path.name)
        return str(ref_path), what
    adapter = adapter_for(config.engine)
    if adapter.token_scoring is None:
        return None, (f"The token-level quality gate was NOT run on {config.engine}: "
                      f"{adapter.no_token_scoring_why}; so the ladder's candidates were not "
                      "gated per trial. The winner is confirmed on the generative task sets "
                      "against the control's answers instead, when the request asks for task "
                      "items (quality_task_items).")
    d.mkdir(parents=True, exist_ok=True)
    try:
        remedy, reference = None, load_reference(ref_path)
        if reference is None:
            reference, config, remedy = _build(config, d, key, weights_bytes, prompts,
                                               troubleshoot, log)
        save_reference(reference, ref_path)
        floor = _floor(config, reference, d, key, weights_bytes, troubleshoot, log)
    except EngineStartError as exc:
        return None, (f"The quality gate was NOT run: the reference configuration did not "
                      f"start ({str(exc).splitlines()[0][:200]}).")
    if remedy is not None:
        what += (f" The engine's defaults did not start here; the reference runs them with "
                 f"the known failure's contract-preserving remedy: {remedy.change}")
    atomic_write(floor_path, floor.model_dump_json(indent=2))
    QUALITY.keep_from(ref_path)
    QUALITY.keep_from(floor_path)
    log.info("quality floor: top-1 agreement %.1f%% over %d tokens",
             100 * floor.top1_agreement, floor.positions)
    return str(ref_path), what


def with_long_note(what: str, reference_path: str | None, context_tokens: int) -> str:
    """The reference's note, with the long-context check's windows when a trial built them."""
    note = (long_note(long_reference_path(reference_path, context_tokens))
            if reference_path else None)
    return f"{what} {note}" if note else what


def _build(config: AnyServingConfig, d: Path, key: str, weights_bytes: int, prompts: int,
           troubleshoot: Troubleshooting, log: Logger
           ) -> tuple[ReferenceSet, AnyServingConfig, Remedy | None]:
    """(reference, the configuration that ran it, the remedy it needed): when the defaults do
    not start and the catalog knows the failure with a contract-preserving remedy (memory
    knobs such as an explicit CPU KV space: the numerics stay the control's), the session
    applies it once."""
    with engine_session(config, d / f"reference-{key}.log", weights_bytes,
                        troubleshoot=troubleshoot, log=log) as s:
        _say_remedy(s, "quality reference", log)
        reference = build_reference(_endpoint(s.running, s.config),
                                    prompts=pool_prefix(prompts), progress=log.info)
        return reference, s.config, s.remedy


def _say_remedy(s: Started, what: str, log: Logger) -> None:
    if s.remedy is not None:
        assert s.diagnosis is not None  # a session applies a remedy only to a diagnosed failure
        log.warning("%s: the defaults did not start (%s); applied %s", what,
                    s.diagnosis.root_error[:160], s.remedy.change)


def _floor(config: AnyServingConfig, reference: ReferenceSet, d: Path, key: str, weights_bytes: int,
           troubleshoot: Troubleshooting, log: Logger) -> FidelityResult:
    """The short pool's floor, on a restart of the reference at another batch size."""
    with engine_session(_floor_config(config), d / f"floor-{key}.log", weights_bytes,
                        troubleshoot=troubleshoot, log=log) as s:
        return score_candidate(_endpoint(s.running, s.config), reference, concurrency=2,
                               label="floor")


def build_long_windows(config: AnyServingConfig, reference_path: str, weights_bytes: int,
                       context_tokens: int, troubleshoot: Troubleshooting = CATALOG_ONLY,
                       log: Logger = LOG) -> None:
    """The long-context check's windows (infopt.quality.long_run), built when the first trial
    needs them rather than with the short pool: they prefill half the served context per
    window (minutes on a CPU), and a run whose candidates of KV precision or weights all fail
    the short gate never needs them. The reference is started for them (the caller has
    stopped the trial's engine: a GPU holds one engine), then restarted at another batch size
    to score them for their floor. A reference that does not start records why, and trials go
    without the check."""
    ref = Path(reference_path)
    key = ref.stem.removeprefix("reference-")
    path = long_reference_path(ref, context_tokens)
    log.info("long-context check: building its windows at half the %s-token served context "
             "on the reference", f"{context_tokens:,}")
    try:
        with engine_session(config, ref.with_name(f"long-reference-{key}.log"), weights_bytes,
                            troubleshoot=troubleshoot, log=log) as s:
            _say_remedy(s, "long-context reference", log)
            long = ensure_long_reference(_endpoint(s.running, s.config), path, context_tokens,
                                         progress=log.info)
            config = s.config
        if long.reference is not None:
            with engine_session(_floor_config(config), ref.with_name(f"long-floor-{key}.log"),
                                weights_bytes, troubleshoot=troubleshoot, log=log) as s:
                ensure_long_floor(_endpoint(s.running, s.config), path, progress=log.info)
    except EngineStartError as exc:
        record_no_windows(path, context_tokens, "the reference configuration did not start ("
                          f"{str(exc).splitlines()[0][:200]})")


def _endpoint(running: RunningEngine, config: AnyServingConfig) -> Endpoint:
    return endpoint_for(running.engine, running.base_url, config.served_model_name, running.pid)


def _scores_file(reference_path: Path, key: str) -> Path:
    return reference_path.with_name(
        reference_path.stem.replace("reference-", "scores-", 1) + f"-{key}.json")


def verdict_key(reference_path: Path, key: str, incumbent_key: str | None,
                settings: GateSettings) -> str:
    """Everything a verdict depends on beyond the two configurations' own keys (which cover
    the engine build, model, prompts, machine and code): the reference and its floor, the
    incumbent it is paired against, the tolerance and the prompt budget."""
    payload = {"reference": reference_path.stem, "candidate": key, "incumbent": incumbent_key,
               "tolerance": settings.tolerance, "budget": settings.budget}
    return content_key(payload)


def _recalled_verdict(out: Path, origin: VerdictOrigin | None, log: Logger = LOG
                      ) -> QualityVerdict | None:
    """A verdict made earlier: by this run (kept as it is), or by another run on this machine
    (then it says which run and trial made it)."""
    here = out.is_file()
    if not QUALITY.recall_into(out):
        return None
    verdict = QualityVerdict.model_validate_json(out.read_text(encoding="utf-8"))
    made = verdict.made_by
    if not here and made is not None and (origin is None or made.run_id != origin.run_id):
        verdict = verdict.model_copy(update={"reused_from": made})
        atomic_write(out, verdict.model_dump_json(indent=2))
        log.info("quality verdict reused from run %s, trial %s (%s)", made.run_id,
                 made.trial_id, made.made_at)
    return verdict


def judge_quality(running: RunningEngine, config: AnyServingConfig, reference_path: str, key: str,
                  tolerance: float, *, incumbent_key: str | None = None,
                  max_prompts: int = DEFAULT_MAX_PROMPTS,
                  origin: VerdictOrigin | None = None, log: Logger = LOG) -> QualityVerdict:
    """This configuration's verdict against the reference and floor, paired against the
    incumbent's scores when `incumbent_key` has them (once per verdict key: repeats and
    resumed runs reuse it). `origin`: the run and trial judging it, recorded in the verdict."""
    ref_path = Path(reference_path)
    settings = GateSettings(tolerance=tolerance, budget=max_prompts)
    out = ref_path.with_name(ref_path.stem.replace("reference-", "verdict-", 1)
                             + f"-{key}-{verdict_key(ref_path, key, incumbent_key, settings)}"
                             ".json")
    if (kept := _recalled_verdict(out, origin, log)) is not None:
        return kept
    reference = load_reference(ref_path)
    assert reference is not None  # reference_path is the file quality_reference saved
    floor = load_floor(ref_path)
    endpoint = _endpoint(running, config)
    scores_path = _scores_file(ref_path, key)
    scores = load_scores(scores_path)

    def score_first(n: int) -> list[ScoredSequence]:
        nonlocal scores
        if len(scores) < n:
            scores = scores + score_sequences(endpoint, reference,
                                              reference.sequences[len(scores):n])
            save_scores(scores_path, scores)  # a crash keeps what was scored
        return scores[:n]

    incumbent = load_scores(_scores_file(ref_path, incumbent_key)) if incumbent_key else None
    verdict = sequential_verdict(reference, floor, settings, score_first, incumbent or None,
                                    incumbent_key if incumbent else None, endpoint.base_url)
    if origin is not None:
        verdict = verdict.model_copy(update={"made_by": origin})
    atomic_write(out, verdict.model_dump_json(indent=2))
    QUALITY.keep_from(out)
    log.info("quality %s: %s (prompts scored per look: %s)", key, verdict.summary,
             verdict.looks)
    return verdict


def verdict_origin(run_dir: str, trial_id: str) -> VerdictOrigin:
    return VerdictOrigin(run_id=Path(run_dir).name, trial_id=trial_id,
                         made_at=datetime.now(UTC).isoformat(timespec="seconds"))


def _sets_file(quality_dir: str, key: str, items_per_set: int) -> Path:
    return Path(quality_dir) / f"tasks-{key}-{items_per_set}.json"


def _kept_sets(out: Path) -> list[TaskSetResult] | None:
    if not QUALITY.recall_into(out):
        return None
    rows = json.loads(out.read_text(encoding="utf-8"))
    return [TaskSetResult.model_validate(r) for r in rows]


def _run_sets(endpoint: Endpoint, out: Path, items_per_set: int, log: Logger) -> list[TaskSetResult]:
    items = all_items(items_per_set)
    log.info("task sets: %d items on %s", len(items), endpoint.base_url)
    results = run_tasksets(endpoint, items)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps([r.model_dump(mode="json") for r in results], indent=2))
    QUALITY.keep_from(out)
    return results


def reference_task_sets(config: AnyServingConfig, quality_dir: str, weights_bytes: int, key: str,
                        items_per_set: int, troubleshoot: Troubleshooting = CATALOG_ONLY,
                        log: Logger = LOG) -> list[TaskSetResult]:
    """The reference's answers on the generative task sets (its engine started for them
    unless they were kept from an earlier run)."""
    out = _sets_file(quality_dir, key, items_per_set)
    if (kept := _kept_sets(out)) is not None:
        return kept
    with engine_session(config, Path(quality_dir) / f"tasks-{key}.log", weights_bytes,
                        troubleshoot=troubleshoot, log=log) as s:
        return _run_sets(_endpoint(s.running, s.config), out, items_per_set, log)


def task_sets(running: RunningEngine, config: AnyServingConfig, quality_dir: str, key: str,
              items_per_set: int, log: Logger = LOG) -> list[TaskSetResult]:
    """A running configuration's answers on the same items (kept by its quality key)."""
    out = _sets_file(quality_dir, key, items_per_set)
    if (kept := _kept_sets(out)) is not None:
        return kept
    return _run_sets(_endpoint(running, config), out, items_per_set, log)
