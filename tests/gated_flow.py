"""A parent flow around one real approval gate (flows/gate.py), run as its own process by the
approval tests so that another process (`infopt approve`, a browser) answers it: approved ->
the action happens (a file is written); denied or timed out -> skipped; the answer is recorded
either way."""

from __future__ import annotations

import sys
from pathlib import Path

from prefect import flow

from flows.gate import ask
from infopt.specs.approval import GateKind, GateRequest

GATE = GateRequest(kind=GateKind.QUANTIZE, key="quantize-test", title="requantize a.gguf",
                   description="**llama-quantize** will write `b.gguf` (Q4_0, ~0.1 GB).",
                   details={"tool": "llama-quantize"})


@flow(name="gated-action")
def gated_action(out: str, timeout_s: int, authorize: list[str]) -> None:
    answer = ask(GATE, authorize, timeout_s)
    Path(out).with_suffix(".answer.json").write_text(answer.model_dump_json())
    if answer.approved:
        Path(out).write_text("the action happened\n")


if __name__ == "__main__":
    gated_action(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
