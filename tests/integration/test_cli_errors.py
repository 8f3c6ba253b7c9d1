"""User-facing errors from the real `infopt` console script: one paragraph, exit 2, no trace."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

INFOPT = shutil.which("infopt") or str(Path(os.sys.executable).parent / "infopt")


def _run(*args, env=None, cwd=None):
    return subprocess.run([INFOPT, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def _assert_clean_error(out, *needles):
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    for n in needles:
        assert n in out.stderr, out.stderr


def test_unknown_model_path(tmp_path):
    out = _run("optimize", "--model", str(tmp_path / "nope.gguf"), "--runs-dir", str(tmp_path))
    _assert_clean_error(out, "does not exist", "Pass a local .gguf file")


def test_occupied_port(tmp_path, gguf_model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = _run("optimize", "--port", str(port), "--runs-dir", str(tmp_path))
    _assert_clean_error(out, f"port {port}", "already in use")


def test_engine_binary_missing(tmp_path, gguf_model):
    out = _run("optimize", "--runs-dir", str(tmp_path),
               env={"INFOPT_LLAMA_SERVER": str(tmp_path / "missing" / "llama-server")})
    _assert_clean_error(out, "llama-server binary is missing", "make engines")


def test_an_engine_override_that_is_not_the_engine_stops_the_run(tmp_path, gguf_model):
    """`INFOPT_LLAMA_SERVER=/bin/true`: one paragraph naming the program and what it printed,
    before Prefect starts; no quiet switch to vLLM."""
    out = _run("optimize", "--runs-dir", str(tmp_path), env={"INFOPT_LLAMA_SERVER": "/bin/true"})
    _assert_clean_error(out, "/bin/true --version", "not llama.cpp's llama-server",
                        "INFOPT_LLAMA_SERVER")
    assert "vllm" not in out.stderr.lower() and not any(tmp_path.iterdir())


def test_a_prefect_api_that_is_down_is_one_paragraph(tmp_path, gguf_model):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/api"
    down = {"PREFECT_API_URL": url}
    _assert_clean_error(_run("optimize", "--runs-dir", str(tmp_path), env=down),
                        f"PREFECT_API_URL is {url}", "no Prefect server answers there",
                        "prefect server start")
    _assert_clean_error(_run("approvals", env=down), f"PREFECT_API_URL is {url}",
                        "answering a gate")
    assert not any(tmp_path.iterdir())


def test_a_tune_knob_no_engine_has_is_refused_where_the_file_is_read(tmp_path):
    target = tmp_path / "t.yaml"
    target.write_text("tune: {knob: warp_factor, values: [1, 2]}\n")
    _assert_clean_error(_run("optimize", "--target", str(target), "--runs-dir", str(tmp_path)),
                        "warp_factor", "is not a knob of any engine", "parallel_slots")


def test_unknown_engine_name(tmp_path):
    out = _run("optimize", "--engine", "ollama", "--runs-dir", str(tmp_path))
    _assert_clean_error(out, "engines[0]: 'ollama' is not allowed; allowed: vllm")


def test_nothing_written_into_cwd_on_error(tmp_path):
    out = _run("optimize", "--model", str(tmp_path / "nope.gguf"), cwd=tmp_path)
    assert out.returncode == 2 and list(tmp_path.iterdir()) == []


def test_unknown_route_lists_the_routes(tmp_path):
    out = _run("optimize", "--route", "chat", "--runs-dir", str(tmp_path))
    _assert_clean_error(out, "workload.routes[0].route: 'chat' is not allowed",
                        "anthropic_messages")
    assert out.stderr.count("is not allowed") == 1  # named once, not once per field


def test_bad_target_file_is_one_paragraph_naming_the_field(tmp_path):
    target = tmp_path / "t.yaml"
    target.write_text("workload:\n  output_lengths: {kind: fixed, tokens: .inf}\n")
    out = _run("optimize", "--target", str(target), "--runs-dir", str(tmp_path / "runs"))
    _assert_clean_error(out, "workload.output_lengths.tokens: .inf and .nan")
    assert not (tmp_path / "runs").exists()  # nothing half-written


def test_resume_of_an_unknown_run_says_where_it_looked(tmp_path):
    out = _run("optimize", "--resume", "20990101-000000-dead", "--runs-dir", str(tmp_path))
    _assert_clean_error(out, "no run '20990101-000000-dead' to resume", str(tmp_path))


def test_verify_exits_1_when_a_required_check_fails_and_2_when_unreachable(tmp_path):
    from bench.fast_server import start_server

    with start_server(ttft_s=0.0, itl_s=0.0) as srv:  # ignores n: a failure, not support
        out = _run("verify", "--endpoint", srv.base_url, "--model", "fast-server",
                   "--require", "n", "--evidence", str(tmp_path / "ev"))
        assert out.returncode == 1, out.stderr
        assert "required check(s) not passed: n" in out.stderr
        assert (tmp_path / "ev" / "n.json").is_file()
        ok = _run("verify", "--endpoint", srv.base_url, "--model", "fast-server", "--json")
        assert ok.returncode == 0 and '"feature": "whole"' in ok.stdout
    out = _run("verify", "--endpoint", "http://127.0.0.1:9", "--model", "m")
    _assert_clean_error(out, "cannot reach http://127.0.0.1:9")


def test_quality_exit_status_says_pass_fail_or_bad_input(tmp_path):
    """`infopt quality`: 0 when the candidate holds, 1 when it regressed or the prompt budget
    could not decide (undecided is not a pass), 2 for an endpoint it cannot score; the
    reference is saved once and read back."""
    import json

    from tests.fakellama import FakeLlama

    with FakeLlama() as good, FakeLlama("noisy") as noisy, FakeLlama("other_model") as worse:
        ref_file = tmp_path / "ref.json"
        ok = _run("quality", "--reference", good.base_url, "--candidate", good.base_url,
                  "--floor", good.base_url, "--tokens", "16", "--reference-file", str(ref_file),
                  "--json")
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["passed"] is True and ref_file.is_file()
        # 8 prompts of 6 tokens: 48 agreeing positions cannot show 98%.
        short = _run("quality", "--reference", good.base_url, "--candidate", good.base_url,
                     "--tokens", "6", "--max-prompts", "8")
        assert short.returncode == 1 and "UNDECIDED: quality undecided" in short.stdout, \
            short.stdout + short.stderr
        regressed = _run("quality", "--reference", good.base_url, "--candidate", worse.base_url,
                         "--tokens", "16", "--reference-file", str(ref_file))
        assert regressed.returncode == 1 and "FAILED: quality regressed: top-1" in \
            regressed.stdout, regressed.stdout + regressed.stderr
        bad = _run("quality", "--reference", noisy.base_url, "--candidate", good.base_url,
                   "--tokens", "6")
        _assert_clean_error(bad, "would be garbage")
    nowhere = _run("quality", "--reference", "http://127.0.0.1:9", "--candidate",
                   "http://127.0.0.1:9")
    _assert_clean_error(nowhere, "is neither a llama-server")
    from bench.fast_server import start_server

    with start_server() as fast:  # no known engine: no exact scoring, the task sets alone
        alone = _run("quality", "--reference", fast.base_url, "--candidate", fast.base_url,
                     "--tasks", "1")
        assert alone.returncode == 0, alone.stdout + alone.stderr
        assert "token fidelity: " in alone.stdout and "task sets only" in alone.stdout
        floored = _run("quality", "--reference", fast.base_url, "--candidate", fast.base_url,
                       "--floor", fast.base_url, "--tasks", "1")
        _assert_clean_error(floored, "no exact token scoring", "drop it")
        untasked = _run("quality", "--reference", fast.base_url, "--candidate",
                        fast.base_url)
        _assert_clean_error(untasked, "is neither a llama-server", "--tasks N")
    unwritable = _run("quality", "--reference", "http://127.0.0.1:9", "--candidate",
                      "http://127.0.0.1:9", "--reference-file", str(tmp_path / "no" / "r.json"))
    _assert_clean_error(unwritable, "--reference-file", "missing or not writable")
    limit_alone = _run("quality", "--reference", "http://127.0.0.1:9", "--candidate",
                       "http://127.0.0.1:9", "--lm-eval-limit", "3")
    _assert_clean_error(limit_alone, "go with --lm-eval TASKS")


def test_an_error_inside_the_flow_is_one_paragraph_without_prefects_trace(tmp_path,
                                                                          prefect_server):
    """The baseline's engine fails to start inside the optimize flow: the terminal gets the
    CLI's paragraph, not the traceback Prefect logs for a failed flow run."""
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\ncase \"$*\" in *--version*) echo 'version: 9999 (deadbeef)'; "
                    "exit 0;; esac\necho 'error: unknown argument: --bogus' >&2\nexit 1\n")
    fake.chmod(0o755)
    out = _run("optimize", "--engine", "llamacpp", "--runs-dir", str(tmp_path / "runs"),
               "--requests", "2", "--repeats", "1", "--dimensions", "scheduling",
               env={**prefect_server, "INFOPT_LLAMA_SERVER": str(fake), "INFOPT_VLLM": "",
                    "PREFECT_LOGGING_LEVEL": "INFO"})
    _assert_clean_error(out, "infopt: the baseline configuration failed",
                        "unknown argument: --bogus", "engine log:")
    said = [line for line in out.stderr.splitlines() if line.startswith("infopt: ")]
    assert len(said) == 1


def test_a_misspelt_no_fit_policy_is_refused_where_it_is_read(tmp_path):
    out = _run("optimize", "--on-no-fit", "shorter", "--runs-dir", str(tmp_path))
    _assert_clean_error(out, "on_no_fit")
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_a_run_that_would_ask_needs_a_server_anyone_can_reach(tmp_path, monkeypatch):
    """Nothing fits on a host planted with 512 MiB (tests/nofit_run.py) and the run would ask
    at a decision gate: without PREFECT_API_URL nobody could answer, so the pre-flight says so,
    with the choices and --on-no-fit, before anything starts."""
    from typer.testing import CliRunner

    from infopt.cli import app
    from infopt.hardware import host
    from tests.nofit_run import planted_host

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    small = planted_host()
    monkeypatch.setattr(host, "inventory", lambda *a, **k: small)
    out = CliRunner().invoke(app, ["optimize", "--engine", "llamacpp", "--runs-dir",
                                   str(tmp_path)])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "decision gate" in text and "PREFECT_API_URL is not set" in text
    assert "--on-no-fit" in text and "kv_precision (an 8-bit KV cache" in text
    assert not any(tmp_path.iterdir())
