"""The SLOs bind (issue 49), through the real console script, the real llama-server and a real
Prefect server: a run whose workload plants an SLO no configuration can meet (a TTFT median of
0.1 ms) completes, its report leads with the binding SLO (which, by how much, at which load)
and the smallest viable alternatives, and `infopt optimize` exits with status 3, not 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

INFOPT = str(Path(sys.executable).with_name("infopt"))
TARGET = """
name: slo-gate
workload: {name: slo-gate, input_lengths: {kind: fixed, tokens: 32},
           output_lengths: {kind: fixed, tokens: 8}, measured_requests: 4,
           slos: [{metric: ttft, percentile: 50, max_s: 0.0001}]}
objective: throughput
scenarios: []
quality_task_items: 0
quality_max_prompts: 8
budgets: {repeats: 2, max_rounds: 2}
dimensions: [scheduling]
engines: [llamacpp]
github_search: false
"""


def test_a_planted_slo_no_configuration_meets_ends_with_the_binding_constraint(prefect_server,
                                                                               tmp_path):
    target, runs = tmp_path / "target.yaml", tmp_path / "runs"
    target.write_text(TARGET)
    out = subprocess.run([INFOPT, "optimize", "--target", str(target), "--runs-dir", str(runs)],
                         env={**prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"},
                         capture_output=True, text=True, timeout=840)
    assert out.returncode == 3, out.stderr[-3000:]
    assert "no configuration meets the SLOs at the target load" in out.stderr
    assert "Traceback" not in out.stderr
    (run_dir,) = [d for d in runs.iterdir() if d.is_dir()]
    report = json.loads((run_dir / "report.json").read_text())
    slos = report["slos"]
    assert slos["met"] is False
    assert "ttft p50 <= 0.0001 s missed at the target load" in slos["binding"]
    assert any(a.startswith("more GPUs: `infopt plan") for a in slos["alternatives"])
    # Every configuration measured missed it, so no candidate replaced its incumbent.
    statuses = [c["status"] for s in report["ladder"]["steps"] for c in s["candidates"]]
    assert "accepted" not in statuses
    assert report["ladder"]["decision"]["slos_met"] is False
    md = (run_dir / "report.md").read_text()
    first = md.index("## ")
    assert md[first:].startswith("## No configuration meets the SLOs at the target load")
    assert md.index("Binding constraint") < md.index("## Runnable configuration")
