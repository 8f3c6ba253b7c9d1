"""A run that nothing fits, as its own process, so that another process (`infopt approve`, a
browser) answers its decision gate (flows/decide.py): the bundled SmolLM2 GGUF on a host planted
with 512 MiB of RAM (its native 8,192-token context needs ~0.57 GiB on llama.cpp by infopt's
fit). `optimize`: the whole optimize flow, which resumes with the chosen change and tunes on
the real llama-server; `settle`: only the decision, written to RUNS/decided.json.

    python -m tests.nofit_run optimize|settle RUNS REQUEST_JSON"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prefect import flow

from infopt.bootstrap import default_paths
from infopt.hardware.host import inventory
from infopt.model.profile import profile_model
from infopt.runs.outcomes import Target
from infopt.specs.request import OptimizeRequest
from infopt.tuning.plan_run import plan_run

HOST_RAM = 2**29


def planted_host():
    hw = inventory(measure_bandwidth=False)
    return hw.model_copy(update={"host": hw.host.model_copy(update={
        "ram_total_bytes": HOST_RAM, "ram_available_bytes": HOST_RAM})})


@flow(name="nofit-settle")
def settle(runs: str, request: OptimizeRequest) -> None:
    from flows.decide import settle_nofit
    from flows.research import Research

    hw, model = planted_host(), profile_model(str(default_paths().gguf))
    plan = plan_run(request, hw, model, [], request.tuning_workload())
    decided, target = settle_nofit(request, Target(hw, model, None, plan, []), Path(runs),
                                   "settle", Research())
    (Path(runs) / "decided.json").write_text(json.dumps({
        "request": decided.model_dump(mode="json"),
        "decision": target.decisions[0].model_dump(mode="json")}))


def main() -> None:
    mode, runs, request = sys.argv[1], sys.argv[2], OptimizeRequest.model_validate_json(
        Path(sys.argv[3]).read_text())
    if mode == "settle":
        settle(runs, request)
        return
    from flows.optimize import optimize

    optimize(request=request, runs_dir=runs, hardware=planted_host())


if __name__ == "__main__":
    main()
