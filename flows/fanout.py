"""Trials that outgrow one machine, fanned out over a work pool: one run of the `trial`
deployment per trial (on a Kubernetes GPU pool, one Job and so one GPU node per trial), created
with Prefect's `run_deployment` and waited on through the Prefect API. Prefect schedules them;
infopt only submits and collects.

Each child run writes its trial.json like any trial (and through the results store, when one is
named, so a pod's result reaches the parent); the parent reads the trials back by key. A child
run that ends without one gives a failed trial naming its state. The idempotency key is the
run id and the trial's key (another run may re-measure the same configuration under the same
trial key), so a resumed parent never submits a trial twice; a trial already completed is not
submitted at all.

Measure on identical, otherwise idle machines: trials that share a machine contend for it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

from prefect import flow, get_run_logger
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment

from blocks.named import open_results_store, restore_run
from infopt.runs.engine_run import EngineRun
from infopt.runs.rundir import load_trial
from infopt.specs.fit import MemoryFit
from infopt.specs.results import Trial
from infopt.specs.trial import TrialSpec
from tasks.trial import run_trial

POLL_S = 2.0


@flow(name="trial")
def trial(spec: TrialSpec, key: str, ctx: EngineRun, fit: MemoryFit | None = None,
          results_store: str | None = None) -> str:
    """One trial on the worker that picked this run up; returns its key."""
    open_results_store(results_store, Path(ctx.run_dir))
    t = run_trial(spec, key, fit, ctx)
    return f"{key}: {t.failed or f'objective {t.objective_value:.4g}'}"


def fan_out(items: list[tuple[TrialSpec, str, MemoryFit | None]], ctx: EngineRun,
            deployment: str, results_store: str | None = None,
            job_variables: dict | None = None) -> list[Trial]:
    """Run each (spec, key, fit) as its own run of `deployment`, all at once; the trials in
    the order given. `job_variables` go to each run's job (a ClusterTarget's namespace, GPU
    node selector and tolerations on the Kubernetes pool)."""
    log, run_dir = get_run_logger(), Path(ctx.run_dir)
    runs: dict[str, FlowRun] = {}
    for spec, key, fit in items:
        if load_trial(run_dir, key) is not None:
            continue  # completed earlier (a resumed run)
        runs[key] = cast(FlowRun, run_deployment(  # called from a flow: a FlowRun, not awaited
            deployment, timeout=0, as_subflow=True, idempotency_key=f"{run_dir.name}/{key}",
            flow_run_name=spec.trial_id, job_variables=job_variables,
            parameters={"spec": spec.model_dump(mode="json"), "key": key,
                        "ctx": _ctx_json(ctx), "results_store": results_store,
                        "fit": fit.model_dump(mode="json") if fit else None}))
    log.info("fan-out: %d trial run(s) of %s submitted, %d completed earlier", len(runs),
             deployment, len(items) - len(runs))
    states = _wait({key: r.id for key, r in runs.items()})
    if results_store:  # the children may have run on machines whose disks are gone
        restore_run(results_store, run_dir)
    return [load_trial(run_dir, key) or _lost(spec, key, states.get(key))
            for spec, key, _ in items]


def _ctx_json(ctx: EngineRun) -> dict:
    from pydantic import TypeAdapter

    return TypeAdapter(EngineRun).dump_python(ctx, mode="json")


def _wait(ids: dict) -> dict:
    """Each child run's final state (polled through the API: the workers may be anywhere)."""
    final: dict = {}
    with get_client(sync_client=True) as client:
        while len(final) < len(ids):
            for key, run_id in ids.items():
                if key not in final:
                    state = client.read_flow_run(run_id).state
                    if state is not None and state.is_final():
                        final[key] = state
            if len(final) < len(ids):
                time.sleep(POLL_S)
    return final


def _lost(spec: TrialSpec, key: str, state) -> Trial:
    what = f"{state.type.value}: {(state.message or '')[:200]}" if state else "never ran"
    return Trial(trial_id=spec.trial_id, role=spec.role, dimension=spec.dimension,
                 value=spec.value, repeat=spec.repeat, config=spec.config, key=key,
                 changes=spec.changes, engine=None, benchmark=None, objective_value=None,
                 failed=f"its fan-out run ended without a trial ({what})")
