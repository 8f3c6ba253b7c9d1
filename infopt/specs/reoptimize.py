"""Re-optimization after an engine upgrade: what the `reoptimize` deployment takes (its
parameter schema, so the Prefect UI shows a typed form) and what it finds."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .approval import GateAnswer
from .base import HttpUrlText, Spec
from .results import Trial

RegressionVerdict = Literal["regression", "improvement", "no change"]
Outcome = Literal["no upgrade", "no change", "improvement", "suspected regression",
                  "regression"]


class ReoptimizeRequest(Spec):
    baseline_run: str | None = Field(
        None, description="run id of the accepted run to re-measure; None: the runs folder's "
        "accepted run (`infopt accept RUN_ID`)")
    executable: str | None = Field(
        None, description="the engine's executable or interpreter after the upgrade; None: "
        "where infopt finds it (its $INFOPT_* override, else the per-machine cache)")
    engine_runtime: str | None = Field(
        None, description="an EngineRuntime block's name: the upgraded build (its binary or "
        "venv); instead of `executable`")
    results_store: str | None = Field(
        None, description="a ResultsStore block's name: the accepted run is read from it when "
        "it is not on this machine, and this run's trials and report are written there too")
    fan_out: str | None = Field(
        None, description="a deployment (FLOW/NAME, e.g. trial/trial-gpu) to run each fresh "
        "trial as its own run on that deployment's work pool, all of a round at once; None: "
        "one after another here. Use machines alike and otherwise idle")
    cluster_target: str | None = Field(
        None, description="a ClusterTarget block's name: its namespace, GPU node selector and "
        "tolerations go to each fanned-out trial's job (the Kubernetes GPU pool)")
    index_url: HttpUrlText = Field("https://pypi.org/pypi", description="package index JSON API base "
                           "(PEP 691 servers and PyPI mirrors answer GET <base>/<pkg>/json)")
    repeats: int = Field(2, ge=2, le=20, description="fresh starts per configuration per round")
    # A regression must be at least this much worse, with the confidence below, to be
    # flagged: nightly dashboards flag ratio bounds (e.g. 0.95) rather than any drop.
    bound: float = Field(0.95, gt=0.5, lt=1.0, description="new/old performance ratio under "
                         "which a confident drop is a regression")
    confidence: float = Field(0.95, ge=0.5, lt=1.0)
    confirm_rounds: int = Field(2, ge=1, le=5, description="consecutive measurement rounds "
                                "(fresh starts each) that must all flag the regression")
    force: bool = Field(False, description="re-measure even when the version did not change")
    retune: bool = Field(False, description="on a confirmed regression, run the optimizer "
                         "again with the stored request; its winner is promoted only "
                         "through the promote approval gate")
    authorize: list[Literal["promote"]] = Field(default_factory=list)
    approval_timeout_s: int = Field(3600, ge=1, le=7 * 86400)

    @model_validator(mode="after")
    def _one_build(self) -> "ReoptimizeRequest":
        if self.executable and self.engine_runtime:
            raise ValueError("give the upgraded build once: `executable` (a path) or "
                             "`engine_runtime` (an EngineRuntime block), not both")
        return self


class ReleaseCheck(Spec):
    package: str | None  # the package index name; None: the engine is not on an index
    installed: str | None  # the installed package's version, as the index spells it
    newest: str | None = None
    newer_available: bool | None = None
    index_url: str
    note: str = ""


class RegressionCheck(Spec):
    """One configuration's fresh trials against its stored ones. Ratios are performance
    ratios (new/old for a higher-is-better objective, old/new otherwise): below 1 is worse."""

    label: str
    stored: list[float]
    fresh: list[float]
    ratio: float  # of the medians
    ratio_low: float
    ratio_high: float
    relative_sd: float  # start-to-start, pooled over both runs' repeated configurations
    dof: int
    verdict: RegressionVerdict
    rule: str


class ReoptimizeRound(Spec):
    round: int
    checks: list[RegressionCheck]

    @property
    def regressed(self) -> bool:
        return any(c.verdict == "regression" for c in self.checks)


class ReoptimizeReport(Spec):
    kind: Literal["reoptimize"] = "reoptimize"
    run_id: str
    created_at: str
    baseline_run: str
    engine: str
    stored_version: str
    installed_version: str
    upgraded: bool
    release: ReleaseCheck
    objective: str
    higher_is_better: bool
    configs: list[str]  # the labels re-measured: the winner first, then the runner-up
    rounds: list[ReoptimizeRound] = Field(default_factory=list)
    trials: list[Trial] = Field(default_factory=list)
    outcome: Outcome
    summary: str
    retune_run: str | None = None
    promoted: bool | None = None
    promotion: GateAnswer | None = None  # the promote gate's answer, when a re-tune ran
    notes: list[str] = Field(default_factory=list)
