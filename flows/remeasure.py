"""The re-measurement inside the `reoptimize` flow: the accepted run's winner and runner-up
started afresh on the installed engine build with the accepted run's own request (workload,
API contract, quality gate against the accepted run's reference), in rounds of interleaved
fresh starts, each round judged against the stored trials (infopt.tuning.regression)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from prefect import get_run_logger

from blocks.credentials import troubleshooting
from blocks.named import load_cluster_target
from flows.fanout import fan_out
from infopt.model.digest import model_digest
from infopt.quality.keys import quality_key
from infopt.runs.engine_run import EngineRun
from infopt.specs.reoptimize import RegressionCheck, ReoptimizeRequest, ReoptimizeRound
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport, Trial
from infopt.specs.trial import TrialRole, TrialSpec, changes_from, trial_key
from infopt.tuning.control import higher_is_better
from infopt.tuning.plan_run import fit_of
from infopt.tuning.regression import judge, needs_another_round
from infopt.tuning.remeasure import Pick, as_stored, stored_spread_groups
from tasks.trial import run_trial


@dataclass
class Remeasure:
    stored_dir: Path
    run_dir: Path
    report: OptimizationReport
    request: OptimizeRequest
    version: str  # the installed build's version
    picks: list[Pick]
    notes: list[str] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)


def _reference(m: Remeasure, digest: str) -> tuple[str | None, str]:
    """The accepted run's quality reference and floor, copied into this run's quality/ so the
    new build's answers are judged against what the accepted run served (None: not found)."""
    src = m.stored_dir / "quality"
    key = quality_key(m.report.control_config, m.report.engine_version, digest) \
        if m.report.control_config is not None else None
    refs = sorted(src.glob("reference-*.json")) if src.is_dir() else []
    ref = next((r for r in refs if key and r.name == f"reference-{key}.json"), None)
    if ref is None and len(refs) == 1:
        ref = refs[0]
    floor = ref.with_name(ref.name.replace("reference-", "floor-", 1)) if ref else None
    if ref is None or floor is None or not floor.is_file():
        return None, ("the quality gate was NOT re-run: the accepted run kept no quality "
                      f"reference in {src}")
    dst = m.run_dir / "quality"
    dst.mkdir(parents=True, exist_ok=True)
    for f in (ref, floor):
        shutil.copy2(f, dst / f.name)
    return str(dst / ref.name), (f"quality gate: each configuration on the new build against "
                                 f"the accepted run's reference ({ref.name}) and its floor")


def context(m: Remeasure) -> tuple[EngineRun, str, str]:
    """(what every re-measured trial shares, the model digest, the quality gate's key)."""
    digest = model_digest(m.report.model.path)
    reference, note = _reference(m, digest)
    m.notes.append(note)
    req = m.request
    ctx = EngineRun.of(req, str(m.run_dir), m.report.model, m.report.hardware,
                       m.report.workload, engine_version=m.version, model_digest=digest,
                       quality_reference=reference, troubleshoot=troubleshooting(req))
    gate = f"{Path(reference).stem.removeprefix('reference-')}:{req.quality_tolerance}" \
        if reference else ""
    return ctx, digest, gate


def _round(m: Remeasure, ctx: EngineRun, digest: str, gate: str, rnd: int,
           req: ReoptimizeRequest) -> dict[str, list[Trial]]:
    """`repeats` fresh starts of each pick, interleaved (winner, runner-up, winner, ...), so a
    drift of the machine during the round touches both alike; with `fan_out`, all at once,
    one run of that deployment each (flows/fanout.py)."""
    control = m.report.control_config or m.picks[0].config
    items = []
    for i in range(1, req.repeats + 1):
        for p in m.picks:
            spec = TrialSpec(trial_id=f"round{rnd}-{p.slot}-r{i}", role=TrialRole.TUNING,
                             config=p.config, changes=changes_from(control, p.config),
                             dimension="reoptimize", value=p.label,
                             repeat=(rnd - 1) * req.repeats + i, seed=m.request.seed,
                             with_contract=i == 1)
            fit = fit_of(m.report.model, m.report.hardware, p.config,
                         ctx.workload.target_concurrency)
            items.append((p.slot, spec, trial_key(spec, ctx.workload, m.version, digest, gate),
                          fit))
    if req.fan_out:
        cluster = load_cluster_target(req.cluster_target) if req.cluster_target else None
        trials = fan_out([(spec, key, fit) for _, spec, key, fit in items], ctx, req.fan_out,
                         req.results_store, cluster.job_variables() if cluster else None)
    else:
        trials = [run_trial(spec, key, fit, ctx) for _, spec, key, fit in items]
    fresh: dict[str, list[Trial]] = {p.slot: [] for p in m.picks}
    for (slot, *_), trial in zip(items, trials, strict=True):
        m.trials.append(trial)
        fresh[slot].append(trial)
    return fresh


def _failed_check(p: Pick, trials: list[Trial], rule_of_bound: str) -> RegressionCheck:
    """Nothing measured on the new build (it failed to start, its contract or quality gate):
    the worst regression there is; the ratio is 0 because it served nothing."""
    why = "; ".join(sorted({(t.failed or "no objective")[:160] for t in trials}))
    return RegressionCheck(label=p.label, stored=p.stored, fresh=[], ratio=0.0, ratio_low=0.0,
                           ratio_high=0.0, relative_sd=0.0, dof=0, verdict="regression",
                           rule=f"no fresh trial measured ({why}); {rule_of_bound}")


def rounds(m: Remeasure, req: ReoptimizeRequest) -> list[ReoptimizeRound]:
    """Rounds until one is clean or `confirm_rounds` in a row flag a regression."""
    log = get_run_logger()
    ctx, digest, gate = context(m)
    higher = higher_is_better(m.report.workload.objective)
    stored_groups = stored_spread_groups(m.report)
    fresh_groups: list[list[float]] = []
    out: list[ReoptimizeRound] = []
    while True:
        rnd = len(out) + 1
        fresh = _round(m, ctx, digest, gate, rnd, req)
        by_slot = {p.slot: p for p in m.picks}
        values = {slot: [v for t in ts if (v := as_stored(t, by_slot[slot])) is not None]
                  for slot, ts in fresh.items()}
        fresh_groups += [v for v in values.values() if v]
        checks = []
        for p in m.picks:
            if not values[p.slot]:
                checks.append(_failed_check(p, fresh[p.slot], f"bound {req.bound:g}"))
                continue
            checks.append(judge(p.label, p.stored, values[p.slot],
                                stored_groups + fresh_groups, higher_is_better=higher,
                                bound=req.bound, confidence=req.confidence))
        out.append(ReoptimizeRound(round=rnd, checks=checks))
        for c in checks:
            log.info("round %d, %s: %s, ratio %.3f [%.3f, %.3f]", rnd, c.label, c.verdict,
                     c.ratio, c.ratio_low, c.ratio_high)
        if not needs_another_round(out, req.confirm_rounds):
            return out
