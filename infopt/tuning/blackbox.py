"""Black-box searches behind the climb's interface (infopt.tuning.climb): generators that yield
a `TrialSpec` and receive its `Trial`, so the same driver runs them and the ladder on the same
engines at the same launch budget (bench/tuner_bench.py measures the ladder against them).

- `random_search`: distinct configurations of the space in a seeded random order.
- `tpe_search`: Optuna's tree-structured Parzen estimator over the space's categorical
  dimensions (Optuna is the `bench` extra, imported only here, only when called). A proposal it
  already measured is answered from memory without a launch, so the budget counts launches.
- `grid_search`: every configuration `repeats` times, one configuration each per round so
  drift hits all alike (the reference the others are scored against).

Each measures a configuration once (no repeats: these baselines spend their whole budget on
coverage) and returns a `SearchOutcome`: the best single measurement and the launch history.
A failed trial (did not start, a gate rejected it) counts as a launch with no value."""

from __future__ import annotations

import importlib
import itertools
import logging
import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from infopt.specs.results import Trial
from infopt.specs.serving import AnyServingConfig, KnobValue, with_knob
from infopt.specs.trial import TrialRole, TrialSpec, changes_from

LOG = logging.getLogger("infopt.tuning.blackbox")

Choice = dict[str, str]  # dimension -> option name


def _allowed(config: AnyServingConfig) -> bool:
    return True


@dataclass(frozen=True)
class SearchSpace:
    """The configurations a search may launch: each dimension's named options, each a set of
    knob changes applied to `base` in dimension order; `allowed` drops combinations the
    engine refuses (llama.cpp: a quantized V cache needs flash attention)."""

    base: Any
    dimensions: dict[str, dict[str, dict[str, KnobValue]]]
    allowed: Callable[[AnyServingConfig], bool] = _allowed

    def config(self, choice: Choice) -> Any:
        cfg = self.base
        for dim, options in self.dimensions.items():
            for knob, value in options[choice[dim]].items():
                cfg = with_knob(cfg, knob, value)
        return cfg

    def choices(self) -> list[Choice]:
        """Every allowed combination, in product order."""
        names = list(self.dimensions)
        out = [dict(zip(names, combo, strict=True))
               for combo in itertools.product(*(list(o) for o in self.dimensions.values()))]
        return [c for c in out if self.allowed(self.config(c))]

    def label(self, choice: Choice) -> str:
        # A trial-id fragment ([A-Za-z0-9._=-]): "weights=Q8_0-slots=2-prefill=ub128-kv=f16".
        return "-".join(f"{d}={choice[d]}" for d in self.dimensions)


@dataclass
class SearchOutcome:
    best: str | None  # the label of the best single measurement; None: nothing measured
    best_value: float | None
    launches: int
    # One entry per launch, in order: (label, objective value or None when it failed).
    history: list[tuple[str, float | None]] = field(default_factory=list)

    def best_after(self, n: int, higher: bool) -> str | None:
        """The configuration this search would recommend after its first `n` launches."""
        measured = [(lb, v) for lb, v in self.history[:n] if v is not None]
        if not measured:
            return None
        return (max if higher else min)(measured, key=lambda lv: lv[1])[0]


Search = Generator[TrialSpec, Trial, SearchOutcome]


class _Book:
    """The launches so far, and the specs they ran under."""

    def __init__(self, space: SearchSpace, control: Any, prefix: str, seed: int,
                 higher: bool) -> None:
        self.space, self.control, self.prefix, self.seed = space, control, prefix, seed
        self.higher = higher
        self.outcome = SearchOutcome(best=None, best_value=None, launches=0)

    def spec(self, choice: Choice, repeat: int = 1) -> TrialSpec:
        cfg = self.space.config(choice)
        label = self.space.label(choice)
        return TrialSpec(trial_id=f"{self.prefix}{self.outcome.launches:02d}-{label}-r{repeat}",
                         role=TrialRole.TUNING, config=cfg,
                         changes=changes_from(self.control, cfg), dimension="search",
                         value=label, repeat=repeat, seed=self.seed)

    def record(self, label: str, trial: Trial) -> float | None:
        o, v = self.outcome, trial.objective_value
        o.launches += 1
        o.history.append((label, v))
        if v is not None and (o.best_value is None or
                              (v > o.best_value if self.higher else v < o.best_value)):
            o.best, o.best_value = label, v
        return v


def random_search(space: SearchSpace, control: Any, budget: int, *, seed: int = 0,
                  higher: bool = True, prefix: str = "rs") -> Search:
    """Up to `budget` distinct configurations, in a random order fixed by `seed`."""
    book = _Book(space, control, prefix, seed, higher)
    order = space.choices()
    random.Random(seed).shuffle(order)
    for choice in order[:budget]:
        book.record(space.label(choice), (yield book.spec(choice)))
    return book.outcome


def grid_search(space: SearchSpace, control: Any, repeats: int = 1, *, seed: int = 0,
                higher: bool = True, prefix: str = "g") -> Search:
    """Every configuration `repeats` times, interleaved by round. The outcome's best is over
    single measurements; the caller takes medians from its history."""
    book = _Book(space, control, prefix, seed, higher)
    choices = space.choices()
    for rnd in range(1, repeats + 1):
        for choice in choices:
            book.record(space.label(choice), (yield book.spec(choice, rnd)))
    return book.outcome


# Proposals in a row TPE may repeat (answered from memory) before a random unmeasured
# configuration is queued instead: on a small categorical space TPE re-proposes its favourite.
_STUCK_AFTER = 20


def tpe_search(space: SearchSpace, control: Any, budget: int, *, seed: int = 0,
               higher: bool = True, prefix: str = "tpe", startup: int | None = None) -> Search:
    """Up to `budget` launches proposed by Optuna's TPE sampler (`startup` random ones first;
    default a third of the budget, at least 3)."""
    optuna = importlib.import_module("optuna")  # the bench extra: `pip install infopt[bench]`
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {d: optuna.distributions.CategoricalDistribution(list(opts))
             for d, opts in space.dimensions.items()}
    sampler = optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=startup if startup is not None else max(3, budget // 3))
    study = optuna.create_study(direction="maximize" if higher else "minimize",
                                sampler=sampler)
    book = _Book(space, control, prefix, seed, higher)
    valid = {space.label(c): c for c in space.choices()}
    seen: dict[str, float | None] = {}
    rng, stuck = random.Random(seed), 0
    while book.outcome.launches < budget and len(seen) < len(valid):
        t = study.ask(dists)
        label = space.label(t.params)
        if label not in valid or label in seen:
            # Not a launch: an impossible combination is a failure to TPE, a repeat gets
            # the value it measured (so the model keeps learning from it).
            value = seen.get(label)
            if value is None:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(t, value)
            stuck += 1
            if stuck >= _STUCK_AFTER:
                study.enqueue_trial(valid[rng.choice(sorted(set(valid) - set(seen)))])
                stuck = 0
            continue
        stuck = 0
        value = book.record(label, (yield book.spec(t.params)))
        seen[label] = value
        if value is None:
            study.tell(t, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(t, value)
    return book.outcome
