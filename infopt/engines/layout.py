"""How an engine spells a multi-GPU layout: the config fields for tensor, pipeline, data and
expert parallelism, declared by each adapter as data (the layout matrix and the ladder's
parallel-layout rule ask it, never an engine name). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infopt.specs.fit import Layout


@dataclass(frozen=True)
class LayoutKnobs:
    """Config fields per axis; None: the engine has no such axis in one server, and `missing`
    says what it offers instead."""

    tp: str | None = None
    pp: str | None = None
    dp: str | None = None
    ep: str | None = None
    ep_is_flag: bool = False  # vLLM: a switch over the TP (x DP) ranks; others: a size
    missing: str = ""
    # Where the engine places its ranks on GPUs (`rank_placement` computes it): the source
    # that shows TP ranks adjacent, pipeline stages strided by TP and replicas outermost.
    rank_order: str = ""

    def changes(self, layout: Layout) -> dict[str, Any] | str:
        """The knob changes that run `layout` (axes at 1 are left at the engine's default), or
        why this engine cannot run it as one server."""
        out: dict[str, Any] = {}
        for axis, field, size in (("TP", self.tp, layout.tp), ("PP", self.pp, layout.pp),
                                  ("DP", self.dp, layout.dp)):
            if size > 1:
                if field is None:
                    return f"no {axis} in one server: {self.missing}"
                out[field] = size
        if layout.ep:
            if self.ep is None:
                return f"no expert parallelism: {self.missing}"
            out[self.ep] = True if self.ep_is_flag else layout.tp * layout.dp
        return out

    def changes_from(self, config: Any, layout: Layout) -> dict[str, Any] | str:
        """`changes(layout)` for an incumbent `config`: an axis the layout leaves at 1 that
        `config` sets is reset to the field's default (None, or a switch's False), so the
        candidate runs `layout` and not its product with the incumbent's (TP1_PP8 from a TP=4
        incumbent is 8 GPUs, not 32)."""
        out = self.changes(layout)
        if isinstance(out, str):
            return out
        for field in (self.tp, self.pp, self.dp, self.ep):
            if field is not None and field not in out and is_set(getattr(config, field, None)):
                out[field] = type(config).model_fields[field].default
        return out


def rank_placement(layout: Layout) -> list[str]:
    """Which GPUs (by visible index) each replica's pipeline stages run on: TP ranks adjacent,
    PP groups strided by TP, DP replicas outermost, the order vLLM, SGLang and TensorRT-LLM
    share (each adapter's `LayoutKnobs.rank_order` cites its source). One line per replica."""
    out = []
    for replica in range(layout.dp):
        first = replica * layout.tp * layout.pp
        stages = [",".join(str(first + s * layout.tp + r) for r in range(layout.tp))
                  for s in range(layout.pp)]
        where = (f"GPUs {stages[0]}" if layout.pp == 1 else
                 "; ".join(f"stage {s} on GPUs {g}" for s, g in enumerate(stages)))
        out.append(f"replica {replica}: {where}")
    return out


def is_set(value: Any) -> bool:
    """An axis knob away from its default: a size above 1, or a switch on (True == 1 in
    Python, so a switch is not a size)."""
    return bool(value) if isinstance(value, bool) else (value or 1) > 1


def running_sequences(cap: int, concurrency: int, dp: int) -> int:
    """The sequences a server runs at once at `concurrency`: `cap` is its running-sequence cap
    (MemoryShape.max_sequences), and a DP server's cap (vLLM's max_num_seqs, SGLang's max
    running requests) holds per replica, each replica having its own scheduler."""
    return min(concurrency, cap * dp)


def replica_sequences(cap: int, target_concurrency: int, dp: int) -> int:
    """The sequences one replica is sized for: the config's cap (what it allocates, already
    bounded by the target where the engine allocates as it goes), or a DP replica's share of
    what the server runs at the target."""
    return cap if dp == 1 else -(-running_sequences(cap, target_concurrency, dp) // dp)
