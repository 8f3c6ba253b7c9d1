"""Fit the attainable estimate (attainable.py) on published measured results, and measure its
error by leaving results out.

    python -m infopt.runs.attainable_trials [--configs DIR] [--runs RUN ...] [--out FILE]
    (make fit-attainable; make fit-attainable RUNS="runs/<id> ...")

Cases come from attainable_data.py (published results) and, with --runs, from the measured
levels of the project's own GPU trials (infopt/runs/attainable_trials.py; a CPU run is left
out, with its reason). Groups nest: all results (any/any), a GPU family over all engines
(any/Hopper), an engine on a family (vllm/Hopper), each with MIN_GROUP_ROWS results or
more. A group's six parameters minimize the squared log error of step time (scipy
least_squares, bounded: fractions of peak in (0.02, 1], times >= 0), except a per-layer cost
its results cannot tell apart: with fewer than two configurations of dense models (or of MoE
models) the group takes that cost from its parent instead of inventing one (sglang/Blackwell's
only dense layers are DeepSeek-R1's first three).

The error is on decode tokens/s (batch / TPOT), |estimate / measured - 1|:

* leave-one-out: each row predicted by fits without it;
* leave-one-configuration-out (the stated one): each row predicted by fits, parents included,
  without every row of its configuration (same engine, GPU, model, dtype, tp, lengths: its
  concurrency sweep), since a sweep's rows share everything but the batch;
* for the fallback groups, the error on what they are used for: each row predicted without its
  engine (any/<family>) or its GPU family (any/any).
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from infopt.costmodel.attainable import MIN_GROUP_ROWS, PARAMS, Params, StepTerms, step_time_s
from infopt.costmodel.attainable_data import CSV_FILE, Case, load_cases

# Per PARAMS: times >= 0 (a layer's fixed cost under 10 ms), fractions of peak in (0.02, 1].
_BOUNDS = ([0.0, 0.0, 0.0, 0.0, 0.02, 0.02], [0.01, 0.01, 0.001, 0.01, 1.0, 1.0])
_START = [3e-5, 5e-5, 5e-6, 1e-5, 0.6, 0.4]
_MIN_CONFIGS = 2  # configurations of dense (or MoE) models a group needs to fit that layer cost


def fit(cases: list[Case], fixed: dict[int, float] | None = None) -> Params:
    """The parameters minimizing the squared log error of step time over `cases` (the formula
    of attainable.step_time_s, over arrays); `fixed`: PARAMS index -> value not fitted."""
    import numpy as np
    from scipy.optimize import least_squares

    fixed = fixed or {}
    free = [i for i in range(len(PARAMS)) if i not in fixed]
    cols = {f: np.array([getattr(c.terms, f) for c in cases], dtype=float)
            for f in StepTerms.__dataclass_fields__}
    measured = np.array([c.measured_step_s for c in cases])

    def full(x: Sequence[float]) -> list[float]:
        out = [0.0] * len(PARAMS)
        for i, v in fixed.items():
            out[i] = v
        for i, v in zip(free, x, strict=True):
            out[i] = v
        return out

    def residuals(x: Sequence[float]) -> Any:  # a numpy array
        tl, tm, tar, ts, fb, fc = full(x)
        t = (cols["dense_layers"] * tl + cols["moe_layers"] * tm + cols["allreduces"] * tar
             + cols["batch"] * ts
             + np.maximum(cols["t_memory_s"] / fb, cols["t_compute_s"] / fc)
             + cols["t_prefill_s"] / fc + cols["t_comm_s"])
        return np.log(t / measured)

    got = least_squares(residuals, [_START[i] for i in free],
                        bounds=([_BOUNDS[0][i] for i in free], [_BOUNDS[1][i] for i in free]))
    return Params(*(float(v) for v in full(got.x)))


def error(case: Case, p: Params) -> float:
    """|estimated / measured - 1| of decode tokens/s (batch / step time)."""
    return abs(case.measured_step_s / step_time_s(case.terms, p) - 1.0)


def _in_group(key: str) -> Callable[[Case], bool]:
    engine, family = key.split("/")
    return lambda c: engine in ("any", c.group[0]) and family in ("any", c.group[1])


def _parent(key: str) -> str | None:
    engine, family = key.split("/")
    return None if key == "any/any" else "any/any" if engine == "any" else f"any/{family}"


def _configs(members: list[Case], moe: bool) -> int:
    return len({c.config for c in members if (c.terms.moe_layers > 0) == moe})


def fit_chain(key: str, pool: list[Case]) -> Params:
    """A group's parameters from `pool`, a layer cost it cannot identify from its parent's."""
    members = [c for c in pool if _in_group(key)(c)]
    parent_key = _parent(key)
    if parent_key is None:
        return fit(members)
    parent = fit_chain(parent_key, pool)
    fixed = {}
    if _configs(members, moe=False) < _MIN_CONFIGS:
        fixed[0] = parent.t_dense_layer_s
    if _configs(members, moe=True) < _MIN_CONFIGS:
        fixed[1] = parent.t_moe_layer_s
    return fit(members, fixed)


def group_keys(cases: list[Case]) -> list[str]:
    keys = {"any/any"} | {f"any/{c.group[1]}" for c in cases} | {
        f"{c.group[0]}/{c.group[1]}" for c in cases}
    return sorted(k for k in keys if sum(map(_in_group(k), cases)) >= MIN_GROUP_ROWS)


def answering(keys: list[str], c: Case) -> str:
    for key in (f"{c.group[0]}/{c.group[1]}", f"any/{c.group[1]}", "any/any"):
        if key in keys:
            return key
    return "any/any"


def _summary(errors: list[float]) -> dict[str, float]:
    ordered = sorted(errors)
    return {"rows": len(ordered), "median_abs_error": round(statistics.median(ordered), 4),
            "p90_abs_error": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 4),
            "mean_abs_error": round(statistics.fmean(ordered), 4)}


def held_out_errors(cases: list[Case], keys: list[str], by_config: bool
                    ) -> dict[str, list[float]]:
    """Per answering group: each case's error from fits without it (or its whole sweep)."""
    out: dict[str, list[float]] = {}
    held: dict[tuple[str, str], Params] = {}
    for c in cases:
        key = answering(keys, c)
        leave = c.config if by_config else c.id
        if (key, leave) not in held:
            pool = [x for x in cases if (x.config if by_config else x.id) != leave]
            if sum(map(_in_group(key), pool)) < len(PARAMS):
                key = "any/any"
            held[key, leave] = fit_chain(key, pool)
        out.setdefault(key, []).append(error(c, held[key, leave]))
    return out


def extrapolation_errors(key: str, cases: list[Case]) -> list[float] | None:
    """A fallback group's error on what it is used for: an engine it has no fit for (any/F:
    each row predicted without its engine's rows), a GPU family likewise (any/any)."""
    if not key.startswith("any/"):
        return None
    part = 1 if key == "any/any" else 0
    members = [c for c in cases if _in_group(key)(c)]
    fits: dict[str, Params] = {}
    out = []
    for c in members:
        pool = [x for x in cases if x.group[part] != c.group[part]]
        if sum(map(_in_group(key), pool)) < MIN_GROUP_ROWS:
            continue
        if c.group[part] not in fits:
            fits[c.group[part]] = fit_chain(key, pool)
        out.append(error(c, fits[c.group[part]]))
    return out or None


def _group_entry(key: str, cases: list[Case], loo: dict[str, list[float]],
                 loco: dict[str, list[float]]) -> dict[str, Any]:
    members = [c for c in cases if _in_group(key)(c)]
    p = fit_chain(key, cases)
    own = sum(c.id.startswith("run ") for c in members)
    held = extrapolation_errors(key, cases)
    ratios = [c.batch / c.measured_step_s / c.ceiling_tokens_per_s for c in members]
    return {
        "rows": len(members), "own_trial_rows": own, **{k: round(getattr(p, k), 9) for k in PARAMS},
        "in_sample": _summary([error(c, p) for c in members]),
        # Over the rows this group answers (None: more specific groups answer them all).
        "leave_one_out": _summary(loo[key]) if key in loo else None,
        "leave_one_configuration_out": _summary(loco[key]) if key in loco else None,
        "leave_one_engine_out" if key != "any/any" else "leave_one_family_out":
            _summary(held) if held else None,
        "measured_over_ceiling": {"min": round(min(ratios), 3), "max": round(max(ratios), 3)}}


def build(configs: Path, csv_file: Path = CSV_FILE,
          own_trials: tuple[list[Case], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The fit on the published results and `own_trials` (cases from measured runs and what
    they used, infopt.runs.attainable_trials.own_trials), with its held-out errors."""
    cases, skipped = load_cases(configs, csv_file)
    own, own_data = own_trials or ([], {"runs": [], "rows_used": 0, "rows_left_out": []})
    cases += own
    keys = group_keys(cases)
    loo = held_out_errors(cases, keys, by_config=False)
    loco = held_out_errors(cases, keys, by_config=True)
    return {
        "model": "t_step = dense_layers x t_dense_layer + moe_layers x t_moe_layer + "
                 "n_allreduce x t_allreduce + batch x t_per_sequence + max(t_memory / "
                 "bandwidth_fraction, t_compute / compute_fraction) + t_prefill / "
                 "compute_fraction + t_comm",
        "error_metric": "|estimate / measured - 1| of decode tokens/s (batch / TPOT)",
        "data": {"file": csv_file.name,
                 "sha256": hashlib.sha256(csv_file.read_bytes()).hexdigest(),
                 "rows_used": len(cases) - len(own), "rows_left_out": skipped,
                 "own_trials": own_data},
        "groups": {key: _group_entry(key, cases, loo, loco) for key in keys},
        "leave_one_out": _summary([e for v in loo.values() for e in v]),
        "leave_one_configuration_out": _summary([e for v in loco.values() for e in v])}
