"""The quality gate inside a run (infopt.quality): the reference is started once, builds its
greedy continuations and is stopped; a fresh restart at another batch size scores them for the
noise floor; then every trial's configuration is judged once, while its engine runs, before its
measurement counts. Everything is persisted under runs/<id>/quality/ and kept per machine under
$INFOPT_CACHE_DIR/quality/, keyed by what determines it (configuration, engine version, model
digest, prompt set), so a resumed run or a later run of the same model re-measures nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
from functools import cache
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

import infopt.quality as quality_pkg
from infopt.bootstrap import cache_root
from infopt.engines import scoring
from infopt.engines import adapter_for, endpoint_for
from infopt.quality.check import load_reference, save_reference
from infopt.quality.gate import quality_verdict
from infopt.quality.prompts import FIDELITY_PROMPTS
from infopt.quality.taskrun import run_tasksets
from infopt.quality.tasksets import all_items
from infopt.quality.teacher import DEFAULT_TOKENS, DEFAULT_TOP_K, build_reference, score_candidate
from infopt.report.rundir import atomic_write
from infopt.specs.base import EngineStartError
from infopt.specs.quality import FidelityResult, QualityVerdict, TaskSetResult
from infopt.specs.results import RunningEngine
from infopt.specs.serving import with_knob
from infopt.troubleshoot.diagnose import contract_preserving_remedy, diagnose_file
from tasks.engine import start_engine, stop_engine


@cache
def scoring_digest() -> str:
    """The scoring's own code (teacher forcing, measures, verdict, the engines' scoring): a
    change invalidates every kept reference, floor and verdict."""
    files = [Path(scoring.__file__)] + sorted(Path(quality_pkg.__file__).parent.glob("*.py"))
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]


def quality_key(config, engine_version: str, model_digest: str) -> str:
    """What a configuration's scores depend on; the port and the served name do not."""
    payload = {"config": config.model_dump(mode="json", exclude={"port", "served_model_name"}),
               "engine_version": engine_version, "model": model_digest,
               "prompts": FIDELITY_PROMPTS, "tokens": DEFAULT_TOKENS, "top_k": DEFAULT_TOP_K,
               "code": scoring_digest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _recall(path: Path) -> bool:
    """Whether `path` is there, copying it from the machine's cache when only that has it."""
    if path.is_file():
        return True
    kept = cache_root() / "quality" / path.name
    if not kept.is_file():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kept, path)
    return True


def _keep(path: Path) -> None:
    kept = cache_root() / "quality" / path.name
    kept.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(kept, path.read_text(encoding="utf-8"))


def _floor_config(config):
    """The reference at another batch size: two running requests where it had one, else one."""
    knob = adapter_for(config.engine).concurrency_knob
    return with_knob(config, knob, 1 if getattr(config, knob) not in (None, 1) else 2)


@task(name="quality-reference", cache_policy=NO_CACHE)
def quality_reference(config, quality_dir: str, weights_bytes: int, key: str,
                      weights_why: str | None = None) -> tuple[str | None, str]:
    """Build (or find) the reference and its floor. Returns (the reference file, or None when
    the gate cannot run; what the report says about it). `weights_why`: why the reference
    serves other weights than the checkpoint's own."""
    log, d = get_run_logger(), Path(quality_dir)
    ref_path, floor_path = d / f"reference-{key}.json", d / f"floor-{key}.json"
    weights = (f"the weights of {weights_why}" if weights_why else
               "the checkpoint's own weights, the highest precision this run's candidates share")
    what = (f"Reference: the control configuration ({weights}, the engine's default KV "
            f"precision); floor: a fresh restart of it at {adapter_for(config.engine).concurrency_knob}"
            f"={getattr(_floor_config(config), adapter_for(config.engine).concurrency_knob)} "
            "scoring two sequences at once. Files: quality/.")
    if _recall(ref_path) and _recall(floor_path):
        log.info("quality reference %s: built earlier, reused", ref_path.name)
        return str(ref_path), what
    if adapter_for(config.engine).token_scoring is None:
        return None, (f"The quality gate was NOT run: {config.engine} offers no exact teacher "
                      "forcing that infopt knows, so no candidate's answers were compared.")
    d.mkdir(parents=True, exist_ok=True)
    try:
        remedy, reference = None, load_reference(ref_path)
        if reference is None:
            reference, config, remedy = _build(config, d, key, weights_bytes)
        save_reference(reference, ref_path)
        floor = _floor(config, reference, d, key, weights_bytes)
    except EngineStartError as exc:
        return None, (f"The quality gate was NOT run: the reference configuration did not "
                      f"start ({str(exc).splitlines()[0][:200]}).")
    if remedy is not None:
        what += (f" The engine's defaults did not start here; the reference runs them with "
                 f"the known failure's contract-preserving remedy: {remedy.change}")
    atomic_write(floor_path, floor.model_dump_json(indent=2))
    _keep(ref_path)
    _keep(floor_path)
    log.info("quality floor: top-1 agreement %.1f%% over %d tokens",
             100 * floor.top1_agreement, floor.positions)
    return str(ref_path), what


def _start_or_remedy(config, log: Path, weights_bytes: int):
    """(running, config, remedy): the reference configuration started. When it does not start
    and the catalog knows the failure with a contract-preserving knob remedy (memory knobs such
    as an explicit CPU KV space: the numerics stay the control's), that remedy is applied once;
    a start that still fails raises."""
    try:
        return start_engine(config, str(log), weights_bytes), config, None
    except EngineStartError as exc:
        diag = diagnose_file(exc.log_path or str(log), str(config.engine), search=False)
        remedy = contract_preserving_remedy(diag)
        if remedy is None or remedy.env_changes or not remedy.knob_changes:
            raise
    get_run_logger().warning("quality reference: the defaults did not start (%s); applying "
                             "%s", diag.root_error[:160], remedy.change)
    for knob, value in remedy.knob_changes.items():
        config = with_knob(config, knob, value)
    return (start_engine(config, str(log.with_name(log.stem + ".remedied.log")),
                         weights_bytes), config, remedy)


def _build(config, d: Path, key: str, weights_bytes: int):
    running, config, remedy = _start_or_remedy(config, d / f"reference-{key}.log",
                                               weights_bytes)
    try:
        return build_reference(_endpoint(running, config),
                               progress=get_run_logger().info), config, remedy
    finally:
        stop_engine(running)


def _floor(config, reference, d: Path, key: str, weights_bytes: int) -> FidelityResult:
    cfg = _floor_config(config)
    running = start_engine(cfg, str(d / f"floor-{key}.log"), weights_bytes)
    try:
        return score_candidate(_endpoint(running, cfg), reference, concurrency=2,
                               label="floor")
    finally:
        stop_engine(running)


def _endpoint(running: RunningEngine, config):
    return endpoint_for(running.engine, running.base_url, config.served_model_name, running.pid)


@task(name="judge-quality", cache_policy=NO_CACHE)
def judge_quality(running: RunningEngine, config, reference_path: str, key: str,
                  tolerance: float) -> QualityVerdict:
    """This configuration's verdict against the reference and floor (once per reference and
    configuration key: repeats and resumed runs reuse it)."""
    ref_path = Path(reference_path)
    out = ref_path.with_name(ref_path.stem.replace("reference-", "verdict-", 1) + f"-{key}.json")
    if _recall(out):
        return QualityVerdict.model_validate_json(out.read_text(encoding="utf-8"))
    reference = load_reference(ref_path)
    floor_file = ref_path.with_name(ref_path.name.replace("reference-", "floor-", 1))
    floor = FidelityResult.model_validate_json(floor_file.read_text(encoding="utf-8"))
    verdict = quality_verdict(score_candidate(_endpoint(running, config), reference),
                              floor, tolerance)
    atomic_write(out, verdict.model_dump_json(indent=2))
    _keep(out)
    get_run_logger().info("quality %s: %s", key, verdict.summary)
    return verdict


def _sets_file(quality_dir: str, key: str, items_per_set: int) -> Path:
    return Path(quality_dir) / f"tasks-{key}-{items_per_set}.json"


def _kept_sets(out: Path) -> list[TaskSetResult] | None:
    if not _recall(out):
        return None
    rows = json.loads(out.read_text(encoding="utf-8"))
    return [TaskSetResult.model_validate(r) for r in rows]


def _run_sets(endpoint, out: Path, items_per_set: int) -> list[TaskSetResult]:
    items = all_items(items_per_set)
    get_run_logger().info("task sets: %d items on %s", len(items), endpoint.base_url)
    results = run_tasksets(endpoint, items)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, json.dumps([r.model_dump(mode="json") for r in results], indent=2))
    _keep(out)
    return results


@task(name="reference-task-sets", cache_policy=NO_CACHE)
def reference_task_sets(config, quality_dir: str, weights_bytes: int, key: str,
                        items_per_set: int) -> list[TaskSetResult]:
    """The reference's answers on the generative task sets (its engine started for them
    unless they were kept from an earlier run)."""
    out = _sets_file(quality_dir, key, items_per_set)
    if (kept := _kept_sets(out)) is not None:
        return kept
    running = start_engine(config, str(Path(quality_dir) / f"tasks-{key}.log"), weights_bytes)
    try:
        return _run_sets(_endpoint(running, config), out, items_per_set)
    finally:
        stop_engine(running)


@task(name="task-sets", cache_policy=NO_CACHE)
def task_sets(running: RunningEngine, config, quality_dir: str, key: str,
              items_per_set: int) -> list[TaskSetResult]:
    """A running configuration's answers on the same items (kept by its quality key)."""
    out = _sets_file(quality_dir, key, items_per_set)
    if (kept := _kept_sets(out)) is not None:
        return kept
    return _run_sets(_endpoint(running, config), out, items_per_set)
