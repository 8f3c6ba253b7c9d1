"""The ladder's weight candidates behind their gates (flows/weights.py: shortlisted hub
checkpoints behind the download gate, variants made here behind the quantize gate), asked
beside the control and the baseline when no answer can change them.

The control and the baseline are judged against the quality reference, and only a downloaded
checkpoint of higher precision than the served one changes the reference
(infopt.tuning.hub_weights.may_raise_reference). When no shortlisted checkpoint could, the gates
are asked in a submitted task while the reference, the control and the baseline run, and the
ladder waits for the answers only when it needs the candidates; otherwise they are asked first,
as before. Either way each wait that paused for a person is recorded with what ran meanwhile
(the report's "Decisions and waits"). A run that stops while a gate still waits (a broken
baseline) withdraws it: the gate is denied by the run, so nobody is asked about a run that
ended and the run does not wait out the gate's timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prefect import get_run_logger, runtime, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture

from flows.gate import withdraw
from flows.weights import (
    NO_REFERENCE_ASK,
    AskGate,
    ReferenceAsk,
    asker,
    hub_variants,
    weight_variants,
)
from infopt.engines.rules import WeightVariant
from infopt.specs.approval import AnswerSource, GateAnswer, GateRequest
from infopt.specs.checkpoint import Shortlist
from infopt.specs.decision import GateWait
from infopt.specs.ladder import Dimension
from infopt.specs.model import ModelProfile
from infopt.specs.request import OptimizeRequest
from infopt.tuning.dimension_rules import climbs
from infopt.tuning.hub_weights import (
    may_raise_reference,
    pick_checkpoints,
    reference_checkpoint,
    served_precision,
)
from infopt.tuning.weights import BITS_PER_WEIGHT

# What ran beside gates asked in the background: the main thread's work until the ladder
# needed the candidates.
MEANWHILE = "the quality reference, the control and the baseline"


@dataclass
class WeightCandidates:
    variants: tuple[WeightVariant, ...] = ()
    approvals: dict[str, GateAnswer] = field(default_factory=dict)  # path -> approved answer
    answers: list[GateAnswer] = field(default_factory=list)  # every gate asked, for the report
    notes: list[str] = field(default_factory=list)  # what was not tried, and why


def weight_candidates(request: OptimizeRequest, shortlist: Shortlist | None,
                      model: ModelProfile, engine: str, version: str, digest: str,
                      ask_gate: AskGate, reference: ReferenceAsk = NO_REFERENCE_ASK
                      ) -> WeightCandidates:
    """Shortlisted hub checkpoints (download gate; with `reference`, the unquantized base as
    the quality reference) then variants made here (quantize gate); nothing is downloaded or
    made when the request skips the weights dimension."""
    if not climbs(request, Dimension.WEIGHTS):
        return WeightCandidates()
    hub, hub_answers, notes = hub_variants(request, shortlist, engine, digest, ask_gate,
                                           reference)
    notes = [reference.note, *notes] if reference.note else notes
    made, answers, made_notes = weight_variants(request, model, engine, version, digest,
                                                ask_gate)
    return WeightCandidates(
        variants=tuple(hub) + tuple(WeightVariant(fmt, str(path), BITS_PER_WEIGHT.get(fmt))
                                    for fmt, path in made.items()),
        approvals={**{str(path): answers[fmt] for fmt, path in made.items() if fmt in answers},
                   **{k: a for k, a in hub_answers.items() if a.approved}},
        answers=list(hub_answers.values()) + list(answers.values()), notes=notes + made_notes)


@dataclass
class _Asked:
    """The gates' record, kept by the task's thread: each wait for a person, and when it
    ended (time.monotonic)."""

    waits: list[tuple[GateWait, float]] = field(default_factory=list)
    reference: ReferenceAsk = NO_REFERENCE_ASK  # the reference ask the gates go with


def _timed(request: OptimizeRequest, stop: threading.Event, asked: _Asked) -> AskGate:
    """flows.gate.ask, each wait for a person recorded; after `stop`, every further gate is
    withdrawn unasked."""
    ask = asker(request)

    def ask_gate(gate: GateRequest) -> GateAnswer:
        if stop.is_set():
            return GateAnswer(kind=gate.kind, key=gate.key, title=gate.title, approved=False,
                              source=AnswerSource.WITHDRAWN, answered_at=time.strftime(
                                  "%Y-%m-%dT%H:%M:%S%z"),
                              reason="not asked: the run stopped before this gate")
        t0 = time.monotonic()
        answer = ask(gate)
        if answer.source is not AnswerSource.PRE_AUTHORIZED:
            ended = time.monotonic()
            asked.waits.append((GateWait(gate_key=gate.key, waited_s=round(ended - t0, 1)),
                                ended))
        return answer
    return ask_gate


@task(name="weight-gates", cache_policy=NO_CACHE)
def weight_gates_task(request: OptimizeRequest, shortlist: Shortlist | None,
                      model: ModelProfile, engine: str, version: str, digest: str,
                      stop: threading.Event, asked: _Asked) -> WeightCandidates:
    # Asked in the background only when no base is asked for as the reference (so only
    # why not, when the report should say, can be carried here).
    return weight_candidates(request, shortlist, model, engine, version, digest,
                             _timed(request, stop, asked), asked.reference)


class PendingWeights(Mapping[str, GateAnswer]):
    """The weight candidates, asked for in the background or already known. As a mapping it
    is the ladder's approvals (weights path -> the answer that let it be tried), read only
    after the candidates (ClimbPlan.facts); either read waits for the answers."""

    def __init__(self, future: PrefectFuture | None, known: WeightCandidates | None,
                 asked: _Asked, stop: threading.Event) -> None:
        self._future, self._known, self._asked, self._stop = future, known, asked, stop
        self._needed_at: float | None = None  # when the ladder asked (time.monotonic)

    @property
    def background(self) -> bool:
        return self._future is not None

    def candidates(self) -> WeightCandidates:
        if self._known is None:
            assert self._future is not None
            self._needed_at = time.monotonic()
            if not self._future.state.is_final():
                get_run_logger().info("the ladder waits for the weight candidates' gates")
            self._known = self._future.result()
        return self._known

    def __getitem__(self, path: str) -> GateAnswer:
        return self.candidates().approvals[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.candidates().approvals)

    def __len__(self) -> int:
        return len(self.candidates().approvals)

    def waits(self) -> list[GateWait]:
        """Each gate that paused for a person, with what ran meanwhile: in the background, the
        reference, control and baseline (finished while it waited when the ladder asked
        before its answer); asked first, nothing."""
        if not self.background:
            return [w for w, _ in self._asked.waits]
        needed = self._needed_at
        return [w.model_copy(update={"ran_meanwhile": [
            f"{MEANWHILE} (finished while waiting; the ladder then waited "
            f"{ended - needed:.1f} s)" if needed is not None and ended > needed
            else f"{MEANWHILE} (still running at the answer)"]})
            for w, ended in self._asked.waits]

    def withdraw(self, why: str) -> None:
        """The run stops: no further gate is asked, and those waiting are denied by the run."""
        if self._future is None or self._future.state.is_final():
            return
        self._stop.set()
        run_id = str(runtime.flow_run.id)
        while not self._future.state.is_final():
            answered = withdraw(run_id, f"withdrawn: the run stopped ({why})")
            if answered:
                get_run_logger().warning("withdrew gate(s) %s: the run stopped (%s)",
                                         ", ".join(answered), why)
            time.sleep(1.0)
        self._known = self._future.result()


def ask_weight_gates(request: OptimizeRequest, shortlist: Shortlist | None,
                     model: ModelProfile, engine: str, version: str, digest: str,
                     capacity_bytes: int) -> PendingWeights:
    """The weight candidates' gates: asked in the background when no answer can change the
    quality reference (so the control and the baseline start at once), else first. When the
    served checkpoint is 8-bit or less and the shortlist's unquantized base fits some layout
    of the host (`capacity_bytes`), its download gate is asked too, as the reference."""
    if not climbs(request, Dimension.WEIGHTS):
        return PendingWeights(None, WeightCandidates(), _Asked(), threading.Event())
    served_fmt, served_bits = served_precision(model) or (None, None)
    base, note = reference_checkpoint(shortlist, engine, served_bits, capacity_bytes)
    asked, stop = _Asked(reference=ReferenceAsk(base, served_fmt, note)), threading.Event()
    picked = pick_checkpoints(request, shortlist, engine)[0] + ([base] if base else [])
    if may_raise_reference(served_bits, picked):
        get_run_logger().info("a shortlisted checkpoint of higher precision may become the "
                              "quality reference: its gates are asked before the control")
        known = weight_candidates(request, shortlist, model, engine, version, digest,
                                  _timed(request, stop, asked), asked.reference)
        return PendingWeights(None, known, asked, stop)
    future = weight_gates_task.submit(request, shortlist, model, engine, version, digest,
                                      stop, asked)
    return PendingWeights(future, None, asked, stop)
