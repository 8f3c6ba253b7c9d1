"""One trial (tasks/trial.py runs it as the one `run-trial` Prefect task): start (issue-first
troubleshooting) -> contract -> quality -> measure -> stop, then the result written atomically
to trials/<key>/trial.json. A trial whose
trial.json is already there (a resumed run, a flow re-run with the same run id) is loaded, not
run again. A start that still fails, or an engine that dies mid-trial, gives a failed trial with
its diagnosis: the run goes on.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from infopt.analysis.records import ErrorKind
from infopt.contract.kept import verify_kept
from infopt.contract.openai_chat import BASE_REQUIRED
from infopt.contract.verify import FEATURES
from infopt.costmodel.kv_check import kv_check
from infopt.engines import adapter_for, endpoint_for, process
from infopt.engines.routing import checkpoint_format_of
from infopt.engines.session import (
    LOG,
    EnginePool,
    Logger,
    Started,
    StartFailed,
    engine_session,
)
from infopt.hardware.gpu_memory import process_group_gpu_memory
from infopt.model.profile import weights_profile
from infopt.model.shortlist import device_from_inventory
from infopt.quality.gate_run import build_long_windows, judge_quality, verdict_origin
from infopt.quality.long_context import long_check_reason
from infopt.quality.long_run import judge_long_context, windows_missing
from infopt.runs.engine_run import EngineRun
from infopt.runs.load_evidence import (
    LoadLog,
    kernel_check,
    load_start,
    needs_load_start,
    own_log,
)
from infopt.runs.measure import benchmark
from infopt.runs.rundir import load_trial, trial_dir, write_trial
from infopt.specs.base import InfoptError, InputError
from infopt.specs.contract import ContractCheck
from infopt.specs.endpoint import Endpoint
from infopt.specs.fit import CeilingRatio, KvCheck, MemoryFit, OffloadObservation
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.quality import LongContextCheck, QualityVerdict
from infopt.specs.results import BenchmarkResult, RunningEngine, Trial
from infopt.specs.serving import AnyServingConfig
from infopt.specs.trial import TrialRole, TrialSpec
from infopt.troubleshoot.diagnose import diagnose_file
from infopt.tuning.candidates import level_ceilings
from infopt.tuning.control import objective_value, trial_measures
from infopt.tuning.level_steps import mean_context
from infopt.tuning.prefill_ceiling import prefill_ceilings

# How long a trial whose requests failed waits for its engine to be reaped before calling it
# alive: SIGKILL closes the sockets a moment before the process can be waited for.
DEATH_GRACE_S = 5.0


def _died(running: RunningEngine, dropped: bool) -> tuple[str, int | None] | None:
    """(why the engine is gone, the signal that ended it), if it exited while we were
    measuring. `dropped`: a request failed, so a dying engine is given DEATH_GRACE_S to end."""
    code = process.exit_status(running.pid, DEATH_GRACE_S if dropped else 0.0)
    if code is None:
        return None
    how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
    return f"the engine {how} during the trial", (-code if code < 0 else None)


# Failures a dying engine gives its clients (a refused or reset connection, a cut stream); a
# 4xx is the request's fault and a stall is judged by _hung.
_DROPS = frozenset(ErrorKind) - {ErrorKind.HTTP_4XX, ErrorKind.TIMEOUT}


def _dropped(bench: BenchmarkResult | None) -> bool:
    """Whether a measured request failed the way a dying engine's requests fail."""
    return bench is not None and any(s.errors_by_kind.get(k.value, 0)
                                     for s in bench.scenarios for k in _DROPS)


def _hung(running: RunningEngine, bench: BenchmarkResult | None, ctx: EngineRun) -> str | None:
    """Why the trial is void when a request got nothing from a live engine for the stall
    timeout (the engine is ended when its session ends), else None."""
    stalled = sum(s.errors_by_kind.get(ErrorKind.TIMEOUT.value, 0)
                  for s in (bench.scenarios if bench is not None else []))
    if not stalled:
        return None
    state = process.run_state(running.pid)
    return (f"the engine stopped answering: {stalled} request(s) got nothing for "
            f"{ctx.stall_timeout_s:.0f} s (budgets.stall_timeout_s) while its process was "
            f"{state}; infopt ended it. Engine log: {running.log_path}")


def _judge(running: RunningEngine, spec: TrialSpec, config: AnyServingConfig, ctx: EngineRun,
           logger: Logger) -> tuple[QualityVerdict | None, str | None]:
    """(verdict | None, why it could not be scored | None); no reference: no gate. A candidate
    is paired against the incumbent it modifies (spec.incumbent)."""
    if ctx.quality_reference is None:
        return None, None
    inc = ctx.quality_key(spec.incumbent) if spec.incumbent is not None else None
    try:
        return judge_quality(running, config, ctx.quality_reference, ctx.quality_key(config),
                             ctx.quality_tolerance, incumbent_key=inc,
                             max_prompts=ctx.quality_max_prompts,
                             origin=verdict_origin(ctx.run_dir, spec.trial_id),
                             log=logger), None
    except InfoptError as exc:  # the server did not score what was asked: not judged, not kept
        return None, f"its tokens could not be scored ({exc})"


@dataclass
class _Gated:
    """What the gates before the measurement found: the contract, the quality verdict, the
    long-context check and, when the trial is rejected, why. `needs_windows`: it needs the
    long-context check and no trial has built its windows yet (run_trial builds them, then
    runs the trial again)."""

    checks: list[ContractCheck] = field(default_factory=list)
    verdict: QualityVerdict | None = None
    long: LongContextCheck | None = None
    rejected: str | None = None
    needs_windows: bool = False


def _gates(running: RunningEngine, spec: TrialSpec, config: AnyServingConfig, ctx: EngineRun,
           trial_key: str, logger: Logger) -> _Gated:
    """The contract, then the quality gate, then (for a change of KV precision or weights)
    the long-context check, before the measurement counts."""
    checks = []
    if ctx.contract_every_trial or spec.with_contract:
        # The control and the baseline on every probe (the report's route table); the other
        # candidates on what the run requires.
        full = spec.role in (TrialRole.CONTROL, TrialRole.BASELINE) or spec.with_contract
        features = FEATURES if full else tuple(dict.fromkeys(
            (*BASE_REQUIRED, *ctx.contract_required)))
        key = ctx.contract_key(config, features) if ctx.contract_every_trial else None
        checks = verify_kept(_endpoint(running, config), ctx.contract_required,
                             str(trial_dir(Path(ctx.run_dir), trial_key) / "contract"),
                             features, key, logger)
        if broken := [c for c in checks if c.required and not c.ok]:
            return _Gated(checks, rejected="rejected by the API contract: " + "; ".join(
                f"{c.feature} ({c.status.value}): {c.detail[:120]}" for c in broken))
    verdict, unscorable = _judge(running, spec, config, ctx, logger)
    if unscorable is not None:
        return _Gated(checks, rejected=f"rejected by the quality gate: {unscorable}")
    if verdict is not None and verdict.decision == "undecided":
        return _Gated(checks, verdict, rejected=f"undecided by the quality gate (not "
                                                f"accepted): {verdict.summary}")
    if verdict is not None and not verdict.passed:
        return _Gated(checks, verdict, rejected=f"rejected by the quality gate: {verdict.summary}")
    if verdict is not None and _needs_windows(spec, ctx):
        return _Gated(checks, verdict, needs_windows=True)
    long, why = _judge_long(running, spec, config, ctx, logger) if verdict else (None, None)
    return _Gated(checks, verdict, long, why)


def _needs_windows(spec: TrialSpec, ctx: EngineRun) -> bool:
    return (ctx.long_windows_from is not None and ctx.quality_reference is not None
            and long_check_reason(spec.config, spec.incumbent) is not None
            and windows_missing(ctx.quality_reference, ctx.served_context_tokens))


def _with_windows(spec: TrialSpec, key: str, fit: MemoryFit | None, ctx: EngineRun,
                  pool: EnginePool | None, logger: Logger) -> Trial:
    """The trial again once the long-context windows are built: its engine (and any the pool
    kept up) is stopped first, since the reference runs alone, as on a GPU it must."""
    source, reference = ctx.long_windows_from, ctx.quality_reference
    assert source is not None and reference is not None  # _needs_windows said so
    logger.info("%s: passed the short gate and needs the long-context check, whose windows no "
                "trial has built yet: its engine is stopped, the reference builds them, and "
                "the trial runs again", spec.trial_id)
    if pool is not None:
        pool.close()
    build_long_windows(source.config, reference, source.weights_bytes,
                       ctx.served_context_tokens, ctx.troubleshoot, logger)
    return run_trial(spec, key, fit, ctx, pool, logger)


def _judge_long(running: RunningEngine, spec: TrialSpec, config: AnyServingConfig,
                ctx: EngineRun, logger: Logger) -> tuple[LongContextCheck | None, str | None]:
    """(the long-context check | None, why it rejects the trial | None): run only when the
    trial changes KV precision or weights against its incumbent."""
    reason = long_check_reason(spec.config, spec.incumbent)
    if reason is None or ctx.quality_reference is None:
        return None, None
    logger.info("%s: long-context check (%s)", spec.trial_id, reason)
    try:
        long = judge_long_context(_endpoint(running, config), ctx.quality_reference,
                                  ctx.served_context_tokens, ctx.quality_key(config),
                                  ctx.quality_tolerance, reason,
                                  verdict_origin(ctx.run_dir, spec.trial_id), logger.info)
    except InfoptError as exc:
        return None, f"rejected by the long-context check: its tokens could not be scored ({exc})"
    if long is None or long.verdict.decision == "pass":
        return long, None
    what = "undecided by" if long.verdict.decision == "undecided" else "rejected by"
    return long, (f"{what} the long-context check ({reason}; prompts of "
                  f"{min(long.prompt_tokens):,}+ tokens): {long.verdict.summary}")


def _endpoint(running: RunningEngine, config: AnyServingConfig) -> Endpoint:
    return endpoint_for(running.engine, running.base_url, config.served_model_name, running.pid)


def run_trial(spec: TrialSpec, key: str, fit: MemoryFit | None, ctx: EngineRun,
              pool: EnginePool | None = None, logger: Logger = LOG) -> Trial:
    """One trial: start (issue-first troubleshooting) -> contract -> quality -> measure ->
    stop, written to trials/<key>/trial.json. `pool`: engines kept up between trials
    (flows/climb.run_climb); None: the trial starts and stops its own."""
    run_dir = Path(ctx.run_dir)
    done = load_trial(run_dir, key)
    if done is not None:
        logger.info("%s: completed earlier (trials/%s/trial.json): not run again",
                    spec.trial_id, key)
        return done
    if fit is not None:
        logger.info("%s: fit %s: %s (KV %.2f GiB needed of %.2f GiB budget)", spec.trial_id,
                    spec.config.engine,
                    "fits" if fit.fits else f"does not fit, {fit.gap_bytes / 2**30:.2f} GiB short",
                    fit.required_kv_bytes_per_gpu / 2**30, fit.kv_budget_bytes_per_gpu / 2**30)
    log = trial_dir(run_dir, key) / "engine.log"
    common: dict[str, Any] = dict(trial_id=spec.trial_id, role=spec.role.value, dimension=spec.dimension,
                  value=spec.value, repeat=spec.repeat, fit=fit, key=key,
                  changes=spec.changes, approvals=spec.approvals)
    checks: list[ContractCheck] = []
    verdict: QualityVerdict | None = None
    gated = _Gated()
    bench: BenchmarkResult | None = None
    error: Exception | None = None
    rejected: str | None = None
    gpu_bytes: dict[int, int] | None = None
    weights = weights_profile(ctx.model, spec.config.model_path)
    loaded = (load_start(spec.config, run_dir, weights.file_bytes, pool,
                         fits_beside(fit, weights.file_bytes), ctx.troubleshoot, logger)
              if needs_load_start(spec.config, bool(ctx.hw.gpus)) else None)
    try:
        with _session(spec, log, weights.file_bytes, fit, ctx, pool, logger) as started:
            running, config = started.running, started.config
            try:
                gated = _gates(running, spec, config, ctx, key, logger)
                checks, verdict, rejected = gated.checks, gated.verdict, gated.rejected
                if rejected is None and not gated.needs_windows:
                    bench = benchmark(running, config.served_model_name,
                                      spec.workload_for(ctx.workload),
                                      str(run_dir), key,
                                      max_input_tokens=ctx.served_context_tokens,
                                      tokenizer_path=ctx.tokenizer_path,
                                      stall_timeout_s=ctx.stall_timeout_s, logger=logger)
                    gpu_bytes = (process_group_gpu_memory(running.pid) if ctx.hw.gpus
                                 else None)
            # The engine stopped answering (a probe reports an unreachable endpoint as
            # InputError); a dead engine makes a failed trial below, a live one re-raises.
            except (httpx.HTTPError, OSError, InputError) as exc:
                error = exc
            died = _died(running, error is not None or _dropped(bench))
            hung = _hung(running, bench, ctx) if died is None else None
    except StartFailed as failed:
        diag = failed.diagnosis
        trial = Trial(**common, config=failed.config, diagnosis=diag, remedy=failed.remedy,
                      engine=None, benchmark=None, objective_value=None,
                      failed=f"{diag.category.value}: {diag.root_error[:300]}")
        write_trial(run_dir, key, trial)
        return trial
    if pool is not None and (error is not None or died is not None or hung is not None):
        pool.discard(config)  # the next trial of it starts afresh
    if error is not None and died is None:
        raise error
    if gated.needs_windows and died is None:
        return _with_windows(spec, key, fit, ctx, pool, logger)
    common.update(config=config, diagnosis=started.diagnosis, remedy=started.remedy)
    read = loaded if loaded is not None else own_log(running.log_path, run_dir)
    text = read.text if isinstance(read, LoadLog) else ""
    common.update(engine=running, benchmark=bench, contract=checks, quality=verdict,
                  long_context=gated.long,
                  kv=logged_kv(running.engine, text, fit, logger),
                  offload=logged_offload(running.engine, text, logger),
                  kernels=kernel_check(config, read, checkpoint_format_of(weights),
                                       device_from_inventory(ctx.hw)),
                  gpu_memory_bytes=sum(gpu_bytes.values()) if gpu_bytes else None,
                  gpu_memory_by_device_bytes=gpu_bytes)
    if died is None and rejected is not None:
        trial = Trial(**common, objective_value=None, failed=rejected[:600])
    elif hung is not None:
        logger.warning("%s: %s", spec.trial_id, hung)
        trial = Trial(**common, objective_value=None, failed=hung)
    elif died is not None:
        d = diagnose_file(running.log_path, str(config.engine))
        last = process.tail(Path(running.log_path), 3).replace("\n", " | ")
        why, signum = died
        logger.warning("%s: %s; root error: %s", spec.trial_id, why, d.root_error[:200])
        trial = Trial(**{**common, "diagnosis": d}, objective_value=None, killed_by_signal=signum,
                      failed=f"{why}; root error: {d.root_error[:200] or 'none in the log'}; "
                             f"last log lines: {last[-300:]}")
    else:
        assert bench is not None  # not rejected, no error, alive: it was measured
        ceilings = _ceilings(weights, ctx.hw, config, bench, logger)
        common["prefill_ceilings"] = prefill_ceilings(weights, ctx.hw, config, bench)
        if bench.validation_passed is False:  # measured, but the records failed their checks
            trial = Trial(**common, objective_value=None, ceilings=ceilings,
                          failed="record validation: " + "; ".join(
                              bench.validation_failures)[:300])
        else:
            trial = Trial(**common, objective_value=objective_value(bench),
                          ceilings=ceilings, measures=trial_measures(bench))
    write_trial(run_dir, key, trial)
    return trial


def _session(spec: TrialSpec, log: Path, weights_bytes: int, fit: MemoryFit | None,
             ctx: EngineRun, pool: EnginePool | None, logger: Logger
             ) -> AbstractContextManager[Started]:
    """The trial's engine: the pool's (kept up for the next round) or its own."""
    if pool is None:
        return engine_session(spec.config, log, weights_bytes, troubleshoot=ctx.troubleshoot,
                              log=logger)
    return _own_log_slice(pool.session(spec.config, log, weights_bytes,
                                       fits_beside=fits_beside(fit, weights_bytes), log=logger),
                          log)


@contextmanager
def _own_log_slice(session: AbstractContextManager[Started], log: Path) -> Iterator[Started]:
    """An engine kept up from an earlier trial writes to that trial's log: what it writes
    during this trial is copied to this trial's engine.log, after the engine's first lines (its
    command and banner: a simulated engine says so there), so every trial's folder holds its
    engine's lines."""
    with session as started:
        source = Path(started.running.log_path)
        if source == log:  # started for this trial: its log is already here
            yield started
            return
        offset = source.stat().st_size if source.exists() else 0
        try:
            yield started
        finally:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(source, "rb") as src, open(log, "wb") as out:
                head = b"".join(src.readline() for _ in range(SLICE_HEAD_LINES))
                out.write(f"# infopt: engine pid {started.running.pid} kept up from an earlier "
                          f"trial (its whole log: {source}); its first lines:\n".encode())
                out.write(head + b"# infopt: its lines during this trial:\n")
                src.seek(offset)
                shutil.copyfileobj(src, out)


SLICE_HEAD_LINES = 3  # the command line and the engine's first lines of its own (its banner)


def _ceilings(model: ModelProfile, hw: HardwareInventory, config: AnyServingConfig,
              bench: BenchmarkResult, logger: Logger) -> list[CeilingRatio]:
    """Each measured level as a fraction of its ceiling (computed inside the trial, not a task
    of its own); one far below or above it is said in the run's log."""
    ratios = level_ceilings(model, hw, config, bench, mean_context(bench))
    for r in ratios:
        if r.flagged:
            logger.warning("%s: %.2f of the %s ceiling — %s", r.metric, r.ratio,
                           r.envelope.value, r.note)
    return ratios


def fits_beside(fit: MemoryFit | None, weights_bytes: int) -> bool:
    """Whether this host's free memory holds one more engine of this fit next to those up, with
    half of it again to spare: its weights, the KV it allocates (capacity x bytes per token;
    not the budget, which on a CPU host is the whole free RAM) and its runtime."""
    need = (fit.weights_bytes_per_gpu + fit.runtime_overhead_bytes_per_gpu
            + int(fit.kv_capacity_tokens * fit.kv_bytes_per_token_per_gpu)
            ) if fit is not None else 2 * weights_bytes
    return psutil.virtual_memory().available > 1.5 * need


def logged_offload(engine: str, text: str, logger: Logger = LOG) -> OffloadObservation | None:
    """The offload the engine says it achieved (its load log), not the one asked for; a
    partial one is said in the run's log."""
    read = adapter_for(engine).offload_from_log
    got = read(text) if read is not None else None
    if got is not None and not got.full:
        logger.warning("offload: the engine put %d of %d layers on the GPU (%s); the rest run "
                       "from host memory", got.layers_offloaded, got.layers_total, got.line)
    return got


def logged_kv(engine: str, text: str, fit: MemoryFit | None, logger: Logger = LOG
              ) -> KvCheck | None:
    """The KV capacity the engine logged at start against the fit (infopt.costmodel.kv_check);
    said in the run's log when the two disagree beyond the stop threshold."""
    check = kv_check(adapter_for(engine).kv_from_log(text), fit)
    if check is not None and check.stops_ladder:
        logger.warning("KV capacity: the engine logged %s %s, the fit predicted %s (%+.0f%%)",
                       f"{check.observed:,}", check.unit, f"{check.predicted:,}",
                       100 * check.error)
    return check


