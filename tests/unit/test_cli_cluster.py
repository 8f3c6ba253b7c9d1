"""`infopt cluster` refuses bad input before Prefect starts: one paragraph naming what to change,
exit status 2, no traceback, nothing written (the flow itself is tests/flows/
test_cluster_flow.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from infopt.cli import app


@pytest.mark.parametrize("args, says", [
    (["--slo", "ttft:90"], "write METRIC:pPERCENTILE:SECONDS"),
    (["--slo", "latency:p90:1"], "write METRIC:pPERCENTILE:SECONDS"),
    (["--router", "nginx"], "--router: unknown router(s) nginx"),
    (["--policy", "fastest"], "--policy: unknown policy(ies) fastest"),
    (["--replicas", "0"], "--replicas: replica_counts are between 1 and 64"),
    (["--burst-factor", "0.5"], "--burst-factor"),
    ([], "no accepted run in"),
    (["--baseline-run", "missing"], "holds no report.json"),
    (["--baseline-run", "r1"], "states no SLOs: give them with --slo"),
])
def test_bad_input_is_one_paragraph_and_exit_2(runs, args, says):
    before = sorted(p.name for p in runs.rglob("*"))
    out = CliRunner().invoke(app, ["cluster", *args, "--runs-dir", str(runs)])
    assert out.exit_code == 2, out.output
    assert says in out.output and "Traceback" not in out.output
    assert sorted(p.name for p in runs.rglob("*")) == before
