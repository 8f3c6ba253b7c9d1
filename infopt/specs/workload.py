"""The traffic the optimize flow tunes for: closed-loop concurrency levels at fixed lengths.

Each level runs as a closed-loop `TrafficSpec` through the load generator (exact prompt lengths,
warm-up, cool-down); richer traffic shapes are measured on the winner as scenarios.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from .base import Spec
from .traffic import RouteName


class Objective(StrEnum):
    # Aggregate output tokens/s at the target concurrency (higher is better).
    THROUGHPUT = "throughput"
    # Median inter-token latency of a single stream (lower is better).
    LATENCY = "latency"


class Workload(Spec):
    name: str = Field("chat", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    input_tokens: int = Field(128, ge=1, le=10_000_000, description="whole prompt, template "
                              "included (exact when the engine has a tokenizer route)")
    output_tokens: int = Field(64, ge=2, le=1_000_000,
                               description="forced with ignore_eos + max_tokens")
    concurrency_levels: list[int] = Field(default_factory=lambda: [1, 4], min_length=1,
                                          max_length=16)
    target_concurrency: int = Field(4, ge=1, le=4096)
    requests_per_level: int = Field(12, ge=1, le=100_000,
                                    description="measured requests per concurrency level")
    warmup_requests: int | None = Field(
        None, ge=0, le=10_000,
        description="discarded requests before each level; default = the level")
    cooldown_s: float = Field(1.0, ge=0, le=3600, description="idle pause after each level, s")
    route: RouteName = Field(RouteName.CHAT_COMPLETIONS,
                             description="the API route the levels are measured on (streamed)")
    objective: Objective = Objective.THROUGHPUT

    @model_validator(mode="after")
    def _target_is_measured(self) -> "Workload":
        if any(not 1 <= c <= 4096 for c in self.concurrency_levels):
            raise ValueError("concurrency_levels must each be between 1 and 4096")
        if self.target_concurrency not in self.concurrency_levels:
            raise ValueError(f"target_concurrency {self.target_concurrency} must be one of "
                             f"concurrency_levels {self.concurrency_levels}")
        if self.objective is Objective.LATENCY and 1 not in self.concurrency_levels:
            raise ValueError("objective 'latency' needs concurrency level 1 (single stream)")
        return self

    def warmup_for(self, concurrency: int) -> int:
        return concurrency if self.warmup_requests is None else self.warmup_requests
