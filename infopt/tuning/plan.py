"""Which trials a run makes, in which order: pure, so the plan is unit-tested without engines.

Round r runs the control (the engine's defaults), then every candidate value of the dimension,
rotated by one each round so slow drift (thermal, background load) hits every value alike. The
baseline value's first trial checks the API contract. When the control and the baseline are
the same configuration (vLLM: its defaults already serve the native context), the baseline
trials stand for the control and no separate control trial is run.
"""

from __future__ import annotations

from typing import Any

from infopt.specs.serving import with_knob
from infopt.specs.trial import TrialRole, TrialSpec, changes_from


def same_config(a: Any, b: Any) -> bool:
    return a.model_dump(exclude={"port"}) == b.model_dump(exclude={"port"})


def plan_trials(control: Any, baseline: Any, knob: str, values: list, repeats: int,
                seed: int) -> list[TrialSpec]:
    """Every trial of the run, control first. `values` are the dimension's runnable candidate
    values (the baseline's own value among them)."""
    base_value = str(getattr(baseline, knob))
    configs = {str(v): with_knob(baseline, knob, v) for v in values}
    if base_value not in configs:
        configs = {base_value: baseline, **configs}
    separate_control = not same_config(control, baseline)
    order = list(configs)
    specs: list[TrialSpec] = []
    for rnd in range(1, repeats + 1):
        shift = (rnd - 1) % len(order)
        if separate_control:
            specs.append(TrialSpec(trial_id=f"t{len(specs):02d}-control-r{rnd}",
                                   role=TrialRole.CONTROL, config=control, changes=[],
                                   repeat=rnd, seed=seed))
        for v in order[shift:] + order[:shift]:
            is_base = v == base_value
            role = TrialRole.BASELINE if is_base else TrialRole.TUNING
            specs.append(TrialSpec(
                trial_id=f"t{len(specs):02d}-{knob}={v}-r{rnd}", role=role, config=configs[v],
                changes=changes_from(control, configs[v]), dimension=knob, value=v,
                repeat=rnd, seed=seed, with_contract=is_base and rnd == 1))
    return specs
