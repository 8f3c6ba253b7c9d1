"""One run context (issue 48): what every trial and session of one engine in a run shares, built
once per engine (EngineRun.of) from the request and the facts the run established (the engine
build, the model's digest, the quality reference), then read everywhere: the trials, the
winner's confirmation, a fan-out worker (it travels as JSON) and reoptimize's re-measurement.
Its methods are the keys a configuration's results are kept under, so no caller computes one
with other inputs than another."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infopt.contract.keys import contract_key
from infopt.contract.verify import required_for
from infopt.engines import adapter_for
from infopt.engines.session import CATALOG_ONLY, Troubleshooting
from infopt.model.profile import weights_profile
from infopt.quality.keys import quality_key
from infopt.specs.hardware import HardwareInventory
from infopt.specs.model import ModelProfile
from infopt.specs.request import OptimizeRequest
from infopt.specs.serving import AnyServingConfig
from infopt.specs.workload import Workload


@dataclass(frozen=True)
class LongWindowsSource:
    """The quality reference's configuration and its weights' size: started again, then
    restarted for the floor, when the first trial needs the long-context windows."""

    config: AnyServingConfig
    weights_bytes: int


@dataclass(frozen=True)
class EngineRun:
    run_dir: str
    model: ModelProfile
    hw: HardwareInventory
    workload: Workload
    tokenizer_path: str | None
    # The run's issue-first troubleshooting (the request's github_* settings and credentials
    # block): every engine session of the run uses it.
    troubleshoot: Troubleshooting = CATALOG_ONLY
    # Contract features the request requires beyond what the load generator needs.
    contract_required: tuple[str, ...] = ()
    # Probe every trial (results reused per API surface, infopt.contract.kept); False: only the
    # trials marked with_contract.
    contract_every_trial: bool = False
    # The quality gate (tasks.quality): the reference file, None when the gate cannot run.
    quality_reference: str | None = None
    quality_tolerance: float = 0.02
    quality_max_prompts: int = 32  # the request's: the most prompts the gate may add to decide
    engine_version: str = ""
    model_digest: str = ""
    stall_timeout_s: float = 600.0  # the request's budgets.stall_timeout_s
    # The context the run serves when shorter than the model's native one (the request's
    # min_context_tokens, infopt.tuning.start_shape); None: the native context.
    context_tokens: int | None = None
    # What starts the quality reference again when the first trial needs the long-context
    # check's windows (infopt.quality.gate_run.build_long_windows); None: no check.
    long_windows_from: LongWindowsSource | None = None

    @property
    def served_context_tokens(self) -> int:
        return self.context_tokens or self.model.native_context_tokens

    @classmethod
    def of(cls, request: OptimizeRequest, run_dir: str, model: ModelProfile,
           hw: HardwareInventory, workload: Workload, *, engine_version: str,
           model_digest: str, quality_reference: str | None,
           troubleshoot: Troubleshooting, context_tokens: int | None = None,
           long_windows_from: LongWindowsSource | None = None) -> EngineRun:
        """The one place a run's request becomes its engine's run context (the optimize flow's
        engines and reoptimize's re-measurement alike), so no setting is dropped on the way.
        `troubleshoot`: the request's (blocks.credentials.troubleshooting, which reads the
        token's block when a search runs)."""
        return cls(run_dir=run_dir, model=model, hw=hw, workload=workload,
                   contract_required=required_for([str(r) for r in request.api.routes],
                                                  request.api.features),
                   tokenizer_path=tokenizer_path(model), troubleshoot=troubleshoot,
                   contract_every_trial=True, quality_reference=quality_reference,
                   quality_tolerance=request.quality_tolerance,
                   quality_max_prompts=request.quality_max_prompts,
                   engine_version=engine_version, model_digest=model_digest,
                   stall_timeout_s=request.budgets.stall_timeout_s,
                   context_tokens=context_tokens, long_windows_from=long_windows_from)

    def quality_key(self, config: AnyServingConfig) -> str:
        """The key a configuration's quality scores are kept under in this run: the run's
        prompt budget, as its reference's key (so the control's task sets are the reference's
        when the winner is the control)."""
        return quality_key(config, self.engine_version, self.model_digest,
                           self.quality_max_prompts)

    def contract_key(self, config: AnyServingConfig, features: tuple[str, ...]) -> str:
        """The key a configuration's contract table is kept under (its API surface)."""
        return contract_key(config, self.engine_version, self.model_digest, features,
                            adapter_for(config.engine).api_surface_knobs)

    def weights_bytes(self, config: AnyServingConfig) -> int:
        """The size of the weights `config` serves: its own file or checkpoint folder when it
        changes the weights (a variant, a downloaded checkpoint), else the profiled model's."""
        return weights_profile(self.model, config.model_path).file_bytes


def tokenizer_path(model: ModelProfile) -> str | None:
    """The checkpoint's tokenizer.json, for exact prompts on engines without a tokenize route."""
    p = Path(model.path)
    return str(p / "tokenizer.json") if (p / "tokenizer.json").is_file() else None
