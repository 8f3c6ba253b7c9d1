"""Troubleshooting: the root error of a failed engine start, known failures, upstream matches.

The `infopt diagnose --json` contract is `Diagnosis.model_dump(mode="json")`: keys are only
ever added. A remedy either preserves the user's contract (model, quantization, context,
concurrency, API) or says it does not; diagnostic-only settings are never a final config.

A remedy acts in one of three ways (`RemedyAction`): change this engine's knobs or environment
(the optimizer applies it and starts again), install another build or version of the same
engine (`engine_version`; a person or an image change does it, the optimizer cannot), or start
another engine instead (`route_to`; the optimizer moves to that engine among the plan's routes).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from .base import Spec
from .serving import EngineName


class FailureCategory(StrEnum):
    OOM = "oom"  # CUDA/CPU out of memory while loading or profiling
    KV_INSUFFICIENT = "kv_insufficient"  # KV cache cannot hold max_model_len / one request
    CONTEXT_TOO_LONG = "context_too_long"  # requested length above what the model/engine allows
    UNSUPPORTED_QUANTIZATION = "unsupported_quantization"
    UNSUPPORTED_HARDWARE = "unsupported_hardware"  # compute capability, missing kernel/ISA
    MISSING_KERNEL = "missing_kernel"  # a kernel/extension not built or not importable
    TOKENIZER = "tokenizer"  # tokenizer or chat-template errors
    PORT_IN_USE = "port_in_use"
    MODEL_NOT_FOUND = "model_not_found"  # path/repo missing, permission denied
    NOT_A_MODEL = "not_a_model"  # the file is not a model the engine can read
    BAD_ARGUMENT = "bad_argument"  # unknown/invalid CLI flag or value
    DISTRIBUTED = "distributed"  # NCCL / multi-GPU communicator set-up (shm, P2P, CUDA IPC)
    CRASH = "crash"  # segfault / illegal instruction / abort in native code
    TIMEOUT = "timeout"  # never became ready
    UNKNOWN = "unknown"


class RemedyAction(StrEnum):
    CONFIGURE = "configure"  # this engine's knobs/env (knob_changes, env_changes) or a manual step
    UPGRADE = "upgrade"  # another build or version of the same engine (engine_version says which)
    ROUTE = "route"  # another engine instead (route_to, in order of preference)


class Remedy(Spec):
    change: str  # what to change, concretely (a flag, an env var, a version)
    preserves_contract: bool  # keeps model, quantization, context, concurrency and API
    diagnostic_only: bool  # a temporary setting to find the cause, never the final config
    # Structured form when the optimizer can apply it itself: knob -> value on the config.
    knob_changes: dict[str, str | int | float | bool] = Field(default_factory=dict)
    env_changes: dict[str, str] = Field(default_factory=dict)
    action: RemedyAction = RemedyAction.CONFIGURE
    # UPGRADE: the build or release that carries the fix, as upstream states it ("a CUDA >= 12.8
    # build whose arch list includes the GPU", "vLLM >= 0.6.6").
    engine_version: str | None = None
    # ROUTE: engines that serve this model where the failing one cannot, preferred first; the
    # failing engine itself is skipped when one is picked (an "any" entry lists several).
    route_to: list[EngineName] = Field(default_factory=list)

    @model_validator(mode="after")
    def _action_fields(self) -> Remedy:
        if self.action is not RemedyAction.CONFIGURE and (self.knob_changes or self.env_changes):
            raise ValueError(f"a {self.action.value} remedy changes no knobs or environment of "
                             "the failing engine; make the knob change a configure remedy")
        if (self.action is RemedyAction.UPGRADE) != (self.engine_version is not None):
            raise ValueError("engine_version goes with action upgrade, and upgrade needs it: "
                             "say which build or release carries the fix")
        if (self.action is RemedyAction.ROUTE) != bool(self.route_to):
            raise ValueError("route_to goes with action route, and route needs it: name the "
                             "engines that serve the model instead")
        return self


class KnownFailure(Spec):
    """One curated failure, seeded from a real upstream issue."""

    id: str
    engine: str  # vllm, sglang, trtllm, llamacpp, mlx, or "any"
    category: FailureCategory
    pattern: str  # Python regex matched against the root error (and its context lines)
    # A second regex that must also match somewhere in the lines around the root error (the
    # traceback above it, a few lines below, see infopt.troubleshoot.diagnose.NEAR_BEFORE): it
    # places a generic error in one phase, e.g. a CUDA OOM raised while repacking weights.
    context_pattern: str | None = None
    summary: str  # what it means, in one sentence
    versions: str  # affected versions as reported ("0.6.x", ">= b4000", "unknown")
    urls: list[str]  # the upstream issue(s)/PR(s) it comes from
    remedies: list[Remedy]


class IssueMatch(Spec):
    title: str
    url: str
    score: float  # 0..1, higher is closer
    state: str | None = None  # open / closed
    source: str  # "catalog" or "github"


class Diagnosis(Spec):
    root_error: str  # the first cause, not the last line
    category: FailureCategory
    engine: str
    context: list[str]  # a few log lines around the root error
    matches: list[IssueMatch]
    remedies: list[Remedy]
    known_failure_ids: list[str]
    search: str  # how upstream was searched ("github: N results", "offline: catalog only")
    log_path: str | None = None
