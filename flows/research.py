"""Work that does not depend on any gate's answer (the hub shortlist, the drafter search), run as
submitted Prefect tasks so that it goes on while a download or decision gate waits for a
person; and the record of each wait: how long, and which of that work ran meanwhile (the
report's "while waiting" lines)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prefect.futures import PrefectFuture

from infopt.specs.decision import GateWait

T = TypeVar("T")


@dataclass
class Research:
    futures: dict[str, PrefectFuture] = field(default_factory=dict)  # task name -> its run
    waits: list[GateWait] = field(default_factory=list)

    def result(self, name: str) -> Any:  # noqa: ANN401 - the task's own result type
        """The task's result (waiting for it), None when it was not submitted."""
        f = self.futures.get(name)
        return None if f is None else f.result()

    def during(self, gate_key: str, wait: Callable[[], T], paused: Callable[[T], bool]) -> T:
        """`wait()`'s answer; when it paused for a person (`paused(answer)`), the wait and the
        submitted work that was still running when it began are recorded."""
        running = [n for n, f in self.futures.items() if not f.state.is_final()]
        t0 = time.monotonic()
        answer = wait()
        if paused(answer):
            self.waits.append(GateWait(gate_key=gate_key,
                                       waited_s=round(time.monotonic() - t0, 1),
                                       ran_meanwhile=[self._said(n) for n in running]))
        return answer

    def _said(self, name: str) -> str:
        done = self.futures[name].state.is_final()
        return f"{name} ({'finished while waiting' if done else 'still running at the answer'})"
