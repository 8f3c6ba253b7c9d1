"""Approval gates against a real `prefect server start` on 127.0.0.1 (started and stopped
here): a flow (tests/gated_flow.py) pauses at a gate in its own process and `infopt approve`
answers from another: approve -> the action happens; deny -> skipped and recorded; timeout ->
skipped and recorded, the parent goes on; bad answers -> a clear error, the run still paused;
pre-authorization -> no pause at all."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(prefect_server):
    return prefect_server


def _infopt(env, *args):
    return subprocess.run([sys.executable, "-m", "infopt.cli", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT)


def _pending_ids(env) -> set[str]:
    out = _infopt(env, "approvals", "--json")
    assert out.returncode == 0, out.stderr
    return {p["gate_run_id"] for p in json.loads(out.stdout)}


@pytest.fixture
def gated(server):
    """Starts tests/gated_flow.py; each start remembers the gates already waiting (other
    tests' leftovers), and a flow still running at the end is killed, so that no test answers
    another's gate."""
    started: list[subprocess.Popen] = []

    def start(out: Path, timeout_s: int, *authorize: str) -> subprocess.Popen:
        before = _pending_ids(server)
        flow = subprocess.Popen([sys.executable, "-m", "tests.gated_flow", str(out),
                                 str(timeout_s), *authorize], env=server, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        flow.seen_before = before
        started.append(flow)
        return flow

    yield start
    for flow in started:
        if flow.poll() is None:
            flow.kill()


def _wait_pending(env, flow: subprocess.Popen) -> dict:
    """The one gate of `flow`: the first that was not waiting before it started."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        out = _infopt(env, "approvals", "--json")
        assert out.returncode == 0, out.stderr
        fresh = [p for p in json.loads(out.stdout) if p["gate_run_id"] not in flow.seen_before]
        if fresh:
            return fresh[0]
        assert flow.poll() is None, flow.stdout.read()
        time.sleep(1)
    pytest.fail("no gate paused within 180 s")


def _answer(out: Path) -> dict:
    return json.loads(out.with_suffix(".answer.json").read_text())


def test_bad_answers_are_errors_and_the_run_stays_paused_then_approve_acts(server, gated, tmp_path):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.gate import resume
    from infopt.specs.base import InputError

    out = tmp_path / "action.txt"
    flow = gated(out, 300)
    gate = _wait_pending(server, flow)
    assert gate["key"] == "quantize-test" and "**llama-quantize** will write" in \
        gate["description"]
    listed = _infopt(server, "approvals", "--run", gate["gate_run_id"])
    assert "infopt approve " + gate["gate_run_id"] in listed.stdout
    wrong = _infopt(server, "approve", gate["gate_run_id"], "--gate", "quantize-other")
    assert wrong.returncode == 2 and "has no gate 'quantize-other'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    # The server's own rejection (HTTP 200, status REJECT) of input the form would refuse.
    with temporary_settings({PREFECT_API_URL: server["PREFECT_API_URL"]}), pytest.raises(
            InputError, match="rejected the answer.*still paused"):
        resume(gate["gate_run_id"], {"approved": "perhaps"})
    again = _infopt(server, "approvals", "--run", gate["gate_run_id"], "--json")
    assert [p["key"] for p in json.loads(again.stdout)] == ["quantize-test"]
    ok = _infopt(server, "approve", gate["gate_run_id"], "--gate", "quantize-test",
                 "--reason", "disk is free")
    assert ok.returncode == 0, ok.stderr
    assert flow.wait(120) == 0, flow.stdout.read()
    assert out.read_text() == "the action happened\n"
    a = _answer(out)
    assert a["approved"] and a["source"] == "person" and a["reason"] == "disk is free"
    assert a["answered_by"].endswith("(infopt approve)") and a["flow_run_id"] == \
        gate["gate_run_id"]


def test_deny_skips_the_action_and_records_why(server, gated, tmp_path):
    out = tmp_path / "action.txt"
    flow = gated(out, 300)
    gate = _wait_pending(server, flow)
    denied = _infopt(server, "approve", gate["gate_run_id"], "--deny", "--reason", "not today")
    assert denied.returncode == 0, denied.stderr
    assert flow.wait(120) == 0
    assert not out.exists()
    a = _answer(out)
    assert not a["approved"] and a["source"] == "person" and a["reason"] == "not today"


def test_a_timeout_denies_and_the_parent_goes_on(server, gated, tmp_path):
    out = tmp_path / "action.txt"
    flow = gated(out, 4)
    assert flow.wait(180) == 0, flow.stdout.read()  # the parent completed
    assert not out.exists()
    a = _answer(out)
    assert not a["approved"] and a["source"] == "timeout"
    assert a["reason"] == "no answer within 4 s", a["reason"]


def test_pre_authorization_answers_without_pausing(server, gated, tmp_path):
    out = tmp_path / "action.txt"
    flow = gated(out, 300, "quantize")
    assert flow.wait(120) == 0, flow.stdout.read()
    a = _answer(out)
    assert a["approved"] and a["source"] == "pre-authorized" and a["flow_run_id"] is None


def test_answering_needs_the_server_and_a_real_run(server):
    no_server = _infopt({k: v for k, v in server.items() if k != "PREFECT_API_URL"},
                        "approvals")
    assert no_server.returncode == 2 and "PREFECT_API_URL is not set" in no_server.stderr
    bogus = _infopt(server, "approve", "not-a-run-id")
    assert bogus.returncode == 2 and "is not a flow run id" in bogus.stderr
    missing = _infopt(server, "approve", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 2 and "no flow run" in missing.stderr, missing.stderr
