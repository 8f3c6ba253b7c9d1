"""What an adapter declares for the tuning ladder: one rule per dimension it can change, each
deriving candidate values from the incumbent configuration and the facts of this run (device,
fit, ceilings' inputs, workload), never from a fixed grid. A rule returns its candidates, or a
sentence saying why this dimension has nothing to try here. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infopt.specs.drafters import Drafter
from infopt.specs.fit import LayoutFamily
from infopt.specs.ladder import LADDER_ORDER, Dimension, LadderCandidate


@dataclass(frozen=True)
class WeightVariant:
    """A weight file of the exact model this run may try: made here behind the quantize gate,
    or a shortlisted hub checkpoint downloaded behind the download gate (`source`: its
    repository, and why the shortlist verified it); `fmt` is its format name (GGUF type)."""

    fmt: str
    path: str
    bits_per_weight: float | None
    source: str | None = None  # "org/name" of a hub checkpoint; None: made on this machine
    why: str | None = None  # the shortlist's verification, for a hub checkpoint

    @property
    def label(self) -> str:
        # Labels name trial folders ([A-Za-z0-9._=-]): "weights=Q4_0-hub-org.name".
        return f"weights={self.fmt}" + (f"-hub-{self.source.replace('/', '.')}"
                                         if self.source else "")


@dataclass(frozen=True)
class LadderFacts:
    """The run's facts a rule may derive values from."""

    target_concurrency: int
    usable_cpus: int
    physical_cores: int | None
    gpu_count: int
    mean_prompt_tokens: int
    mean_output_tokens: int
    prefix_reuse: bool  # the workload declares shared prompt prefixes
    # Per decoded token at the workload's mean context: KV bytes read over weight bytes read,
    # at the 16-bit KV type (the roofline's decode traffic split; None: not computed).
    kv_read_share: float | None
    weight_variants: tuple[WeightVariant, ...] = ()
    weights_note: str | None = None  # why no (more) weight variants exist, when none do
    current_weights: str | None = None  # the format of the checkpoint the run started from
    current_bits_per_weight: float | None = None  # that checkpoint's bits per weight
    drafters: tuple[Drafter, ...] = ()  # the drafter search's verified drafters
    # The KV pool the baseline's engine logged, in tokens per replica (None: not logged).
    kv_pool_tokens: int | None = None
    # The host RAM the user allows for reusable KV prefixes (request.kv_prefix_budget; None:
    # not given, so a tier is measured at the engine's own size, never grown past it).
    kv_prefix_ram_bytes: int | None = None
    # The parallel-layout matrix's layouts with their reasons (infopt.costmodel.layouts), when
    # the run has several GPUs; the TP=1 control first.
    layouts: tuple[tuple[Any, str], ...] = ()
    # The first GPU's memory and CUDA compute capability ("9.0") as NVML reported them (None:
    # no GPU, or not reported): engines derive their per-GPU defaults from these.
    gpu_memory_bytes: int | None = None
    gpu_compute_capability: str | None = None
    mla: bool = False  # the model caches a latent (MLA), not per-head K and V
    # Whether a configuration fits this host's GPU by infopt's fit (None: no GPU here): the
    # offload rules search their own knobs with it (llama.cpp's -ngl and --n-cpu-moe).
    fits_gpu: Callable[[Any], bool] | None = None
    num_layers: int = 0  # the model's decoder layers
    moe: bool = False  # the model routes tokens to experts

Derive = Callable[[Any, LadderFacts], "list[LadderCandidate] | str"]


@dataclass(frozen=True)
class DimensionRule:
    dimension: Dimension
    derive: Derive
    notes: tuple[str, ...] = field(default_factory=tuple)  # sources of the rule's numbers


def candidate(dimension: Dimension, changes: dict[str, Any], why: str,
              series: str | None = None, label: str | None = None,
              family: LayoutFamily | None = None) -> LadderCandidate:
    """A candidate labelled by its changes ("parallel_slots=4"; several: joined by "_")."""
    name = label or "_".join(f"{k}={v}" for k, v in changes.items())
    return LadderCandidate(dimension=dimension, label=name, changes=changes, why=why,
                           series=series, family=family)


def powers_below(limit: int, start: int = 2) -> list[int]:
    out, v = [], start
    while v < limit:
        out.append(v)
        v *= 2
    return out


def ladder_rules(*derives: Derive) -> tuple[DimensionRule, ...]:
    """One rule per dimension, the derive functions given in the specification's order."""
    return tuple(DimensionRule(d, f) for d, f in zip(LADDER_ORDER, derives, strict=True))
