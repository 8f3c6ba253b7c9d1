"""A no-fit run pauses, is answered through the CLI and resumes with the chosen constraint
(issue 49), on a real `prefect server start`, the real llama-server and the bundled SmolLM2:
the optimize flow (tests/nofit_run.py, its own process, on a host planted with 512 MiB of RAM)
stops at the decision gate; `infopt approvals` lists its choices; `infopt approve` refuses an
answer without a choice and a choice not offered (the run stays paused), then takes one; the
run goes on with it, tunes, and its report says what was asked, the answer, and that every
trial served the chosen context."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_approvals import _infopt

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
REQUEST = {
    "engines": ["llamacpp"], "scenarios": [], "objective": "throughput",
    "quality_task_items": 0, "quality_max_prompts": 8, "github_search": False,
    "budgets": {"repeats": 2, "max_rounds": 2}, "dimensions": ["scheduling"],
    "approval_timeout_s": 600,
    "workload": {"name": "nofit", "input_lengths": {"kind": "fixed", "tokens": 32},
                 "output_lengths": {"kind": "fixed", "tokens": 8}, "measured_requests": 4,
                 "peak_active_generations": 1,
                 "arrival": {"kind": "closed_loop", "concurrency": 1}}}


def _pending(env) -> list[dict]:
    out = _infopt(env, "approvals", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_no_fit_run_is_answered_through_the_cli_and_resumes(prefect_server, tmp_path):
    env = {**prefect_server, "PREFECT_LOGGING_LEVEL": "WARNING"}
    seen = {p["gate_run_id"] for p in _pending(env)}
    req, runs = tmp_path / "request.json", tmp_path / "runs"
    req.write_text(json.dumps(REQUEST))
    flow = subprocess.Popen([sys.executable, "-m", "tests.nofit_run", "optimize", str(runs),
                             str(req)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        gate = _wait_for_gate(env, flow, seen)
        _answer_and_finish(env, flow, gate, runs)
    finally:
        if flow.poll() is None:
            flow.kill()


def _wait_for_gate(env, flow, seen) -> dict:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        fresh = [p for p in _pending(env) if p["gate_run_id"] not in seen]
        if fresh:
            return fresh[0]
        assert flow.poll() is None, flow.stdout.read()[-3000:]
        time.sleep(1)
    pytest.fail("no decision gate paused within 300 s")


def _answer_and_finish(env, flow, gate: dict, runs: Path) -> None:
    assert gate["key"] == "no-fit"
    choices = gate["choices"]
    context = next(c for c in choices if c.startswith("context-"))
    assert "stop" in choices and any(c.startswith("kv-") for c in choices)
    assert "Nothing fits." in gate["description"] and "GiB short" in gate["description"]
    listed = _infopt(env, "approvals")
    assert f"--choice {{{','.join(choices)}}}" in listed.stdout
    run = gate["gate_run_id"]
    for bad, said in ((["--gate", "no-fit"], "is a decision: give --choice"),
                      (["--choice", "context-1"], "'context-1' is not one")):
        out = _infopt(env, "approve", run, *bad)
        assert out.returncode == 2 and said in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    assert [p["gate_run_id"] for p in _pending(env)].count(run) == 1  # still paused
    out = _infopt(env, "approve", run, "--choice", context, "--reason", "a short chat")
    assert out.returncode == 0 and f"chose {context} at gate no-fit" in out.stdout, out.stderr
    assert flow.wait(840) == 0, flow.stdout.read()[-4000:]
    (run_dir,) = [d for d in runs.iterdir() if d.is_dir()]
    report = json.loads((run_dir / "report.json").read_text())
    from infopt.report.provenance import unlabelled

    assert unlabelled(report) == []  # the decision's numbers too have their sources
    [d] = report["decisions"]
    assert d["chosen"]["key"] == context and d["answer"]["source"] == "person"
    assert d["answer"]["reason"] == "a short chat" and d["wait"]["waited_s"] > 0
    ctx = int(context.removeprefix("context-"))
    # every trial, the defaults' too, served the chosen context per slot
    configs = [json.loads(p.read_text())["config"]
               for p in (run_dir / "trials").glob("*/trial.json")]
    assert configs and all(c["ctx_per_slot_tokens"] == ctx for c in configs), \
        [c["ctx_per_slot_tokens"] for c in configs]
    md = (run_dir / "report.md").read_text()
    assert "## Decisions and waits" in md and f"Answered `{context}` (person)" in md
    assert "| `no-fit` | decide |" in md  # among the approvals, with the choice
