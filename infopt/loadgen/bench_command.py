"""`infopt bench`: a workload file against any OpenAI-compatible endpoint, one
`measure(endpoint, traffic)` per scenario (a sweep expands into one scenario per value)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from infopt.contract.verify import require_openai_server
from infopt.loadgen.measure import measure
from infopt.loadgen.tokens import Counter, hf_counter, prompt_counter
from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint
from infopt.specs.results import BenchResult, ScenarioResult
from infopt.specs.traffic import SweepArrival, TrafficSpec, expand_sweep
from infopt.specs.traffic_file import load_traffic
from infopt.specs.workload import check_fits_context

# GET /v1/models before measuring: generous, as a server busy loading or serving may be slow.
PROBE_TIMEOUT_S = 30.0


def run_workload_file(endpoint: Endpoint, workload_path: str, *, out_dir: str | None,
                      max_input_tokens: int, progress: Callable[[int, int], None] | None = None,
                      tokenizer: str | None = None) -> BenchResult:
    spec = load_traffic(workload_path)
    # The load generator clips a prompt to max_input_tokens; a workload that asks for longer
    # ones would be measured as another workload without a word.
    check_fits_context(spec, max_input_tokens=max_input_tokens, what=workload_path)
    out = Path(out_dir).expanduser() if out_dir else None
    if tokenizer is not None and hf_counter(tokenizer) is None:
        raise InputError(f"--tokenizer {tokenizer}: no tokenizer.json there; give the file "
                         "or the model folder that holds it")
    # Asked once, before measuring: a URL that is no OpenAI-compatible server (a 404, a web
    # page, nothing listening) is one paragraph, not a run whose every request failed. The
    # same check as `infopt verify`'s, so both commands agree on what such a server is.
    require_openai_server(endpoint, {}, timeout_s=PROBE_TIMEOUT_S)
    with httpx.Client(timeout=60.0) as client:
        counter = prompt_counter(client, endpoint, tokenizer)
        return _run_all(spec, endpoint, workload_path, out=out,
                        max_input_tokens=max_input_tokens, progress=progress, counter=counter)


def _run_all(spec: TrafficSpec, endpoint: Endpoint, workload_path: str, *,
             out: Path | None, max_input_tokens: int,
             progress: Callable[[int, int], None] | None, counter: Counter | None
             ) -> BenchResult:
    results: list[ScenarioResult] = []
    stopped = None
    sweep = spec.arrival.kind == "sweep"
    # Only a sweep carries the stop switch (isinstance narrows for mypy; same test as `sweep`).
    stop_at_violation = isinstance(spec.arrival, SweepArrival) \
        and spec.arrival.stop_at_first_slo_violation
    for child in expand_sweep(spec) if sweep else [spec]:
        r, _ = measure(endpoint, child, out_dir=out, max_input_tokens=max_input_tokens,
                       progress=progress, counter=counter)
        results.append(r)
        if child.cooldown_s:  # let the engine drain and settle before the next scenario
            time.sleep(child.cooldown_s)
        if sweep and stop_at_violation and r.slo_violated:
            stopped = f"stopped at {child.name}: first SLO violation"
            break
    result = BenchResult(endpoint=endpoint.base_url, model=endpoint.model,
                         workload=str(workload_path),
                         scenarios=results, stopped_early=stopped)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(result.model_dump(mode="json"), indent=2))
    return result
