"""The black-box searches (infopt.tuning.blackbox) on a synthetic objective, no engine: each is
a generator behind the climb's interface, spends at most its launch budget, never launches a
configuration the space disallows, and is deterministic for a seed; TPE (Optuna, the bench
extra) finds the optimum of a separable objective in a fraction of the grid."""

from __future__ import annotations

import pytest

from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.results import Trial
from infopt.specs.trial import TrialSpec
from infopt.tuning.blackbox import SearchSpace, grid_search, random_search, tpe_search
from infopt.tuning.climb import drive

T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
CONTROL, BASE = llamacpp.control_config(T), llamacpp.baseline_config(T)
SPACE = SearchSpace(
    base=BASE,
    dimensions={
        # The ladder's order: a later dimension's knob wins (prefill's flash attention off
        # over the KV step's on, which `allowed` then refuses).
        "weights": {"Q4_1": {}, "Q8_0": {"model_path": "/v/q8.gguf"}},
        "kv": {"f16": {}, "q8_0": {"cache_type_k": "q8_0", "cache_type_v": "q8_0",
                                   "flash_attn": "on"}},
        "slots": {str(n): {"parallel_slots": n} for n in (1, 2, 4)},
        "prefill": {"defaults": {}, "ub128": {"ubatch_tokens": 128},
                    "ub256": {"ubatch_tokens": 256}, "fa-off": {"flash_attn": "off"}}},
    # A quantized V cache needs flash attention (llama.cpp refuses the start otherwise).
    allowed=lambda c: c.cache_type_v == "f16" or c.flash_attn != "off")
OPTIMUM = "weights=Q4_1-kv=q8_0-slots=4-prefill=ub256"


def objective(cfg) -> float:
    """Separable, one best option per dimension (tokens/s)."""
    return (50.0 + (10 if cfg.model_path == BASE.model_path else 0)
            + {1: 0, 2: 15, 4: 25}[cfg.parallel_slots]
            + {None: 0, 128: 3, 256: 6}[cfg.ubatch_tokens] - (4 if cfg.flash_attn == "off" else 0)
            + (5 if cfg.cache_type_k == "q8_0" else 0))


def engine(spec: TrialSpec) -> list[Trial]:
    value = None if "Q8_0-kv=f16-slots=1-" in spec.trial_id else objective(spec.config)  # one fails
    return [Trial(trial_id=spec.trial_id, role=spec.role.value, dimension=spec.dimension,
                  value=spec.value, repeat=spec.repeat, config=spec.config, engine=None,
                  benchmark=None, objective_value=value,
                  failed=None if value is not None else "did not start")]


def test_the_space_drops_the_combinations_the_engine_refuses():
    choices = SPACE.choices()
    assert len(choices) == 2 * 3 * 4 * 2 - 2 * 3  # fa-off with a q8_0 V cache: left out
    assert all(SPACE.config(c).flash_attn != "off" for c in choices if c["kv"] == "q8_0")
    assert SPACE.label(choices[0]) == "weights=Q4_1-kv=f16-slots=1-prefill=defaults"


def test_the_grid_measures_every_configuration_each_round():
    out, trials = drive(grid_search(SPACE, CONTROL, repeats=2), engine)
    assert out.launches == len(trials) == 84
    assert trials[42].trial_id == "g42-weights=Q4_1-kv=f16-slots=1-prefill=defaults-r2"
    assert out.best == OPTIMUM and out.best_value == 96.0


def test_random_search_spends_its_budget_on_distinct_configurations_per_seed():
    out, trials = drive(random_search(SPACE, CONTROL, 12, seed=1), engine)
    labels = [lb for lb, _ in out.history]
    assert out.launches == len(trials) == 12 and len(set(labels)) == 12
    again, _ = drive(random_search(SPACE, CONTROL, 12, seed=1), engine)
    other, _ = drive(random_search(SPACE, CONTROL, 12, seed=2), engine)
    assert again.history == out.history and other.history != out.history
    assert out.best_after(12, True) == out.best
    assert out.best_after(0, True) is None


def test_tpe_finds_the_optimum_of_a_separable_objective_well_within_the_grid():
    pytest.importorskip("optuna", reason="the bench extra: pip install -e '.[bench]'")
    first_hit = []
    for seed in (0, 1, 2):
        out, trials = drive(tpe_search(SPACE, CONTROL, 24, seed=seed), engine)
        assert out.launches == len(trials) <= 24
        assert len({lb for lb, _ in out.history}) == out.launches  # no configuration twice
        assert all(SPACE.allowed(t.config) for t in trials)
        assert out.best == OPTIMUM and out.best_value == 96.0
        first_hit.append(next(i for i, (lb, _) in enumerate(out.history) if lb == OPTIMUM))
        again, _ = drive(tpe_search(SPACE, CONTROL, 24, seed=seed), engine)
        assert again.history == out.history  # the seed fixes the search
    # The optimum (one of 42) within the first 16 launches of every seed (6-10 with Optuna 5).
    assert max(first_hit) < 16, first_hit
