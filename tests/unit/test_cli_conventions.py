"""One way to say a thing on the command line (issue 48, item 7), found as a newcomer finds it:
the model a command is about is its first argument on inspect, shortlist and plan, and
`--model` says the same on each (old spellings keep working); `infopt verify` takes the one
model a server lists when --model is left out; a run is named by its id or its folder; no
`--help` shows a type on a flag."""

from __future__ import annotations

import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infopt.cli import app
from infopt.runs.rundir import locate_run
from tests.fixture_data import MODEL_CONFIGS


@pytest.fixture(scope="module")
def qwen(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("qwen3-8b")
    shutil.copy(MODEL_CONFIGS / "Qwen__Qwen3-8B.json", d / "config.json")
    return d


def _ok(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _refused(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


def test_the_model_is_the_first_argument_and_model_says_the_same(qwen):
    plan = ["--gpu", "H100 SXM", "--concurrency", "4", "--context", "4096", "--json"]
    assert _ok("plan", str(qwen), *plan) == _ok("plan", "--model", str(qwen), *plan)
    assert _ok("inspect", str(qwen), "--json") == _ok("inspect", "--model", str(qwen), "--json")
    # The same model twice is one model; two different ones, or none, is one paragraph.
    assert _ok("inspect", str(qwen), "--model", str(qwen), "--json")
    twice = _refused("inspect", str(qwen), "--model", "Qwen/Qwen3-32B")
    assert "given twice" in twice and "infopt inspect MODEL" in twice
    for command in ("plan", "inspect", "shortlist"):
        assert f"no model given to `infopt {command}`" in _refused(command)


def test_no_help_shows_a_type_on_a_flag():
    for command in ("plan", "inspect", "verify", "compare", "optimize", "diagnose"):
        text = _ok(command, "--help")
        assert "<bool>" not in text, command
        assert re.search(r"--json\s", text) or command in ("compare", "optimize")
    assert "<int>" in _ok("plan", "--help")  # options that take a value keep their type


class _Models(BaseHTTPRequestHandler):
    ids: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"object": "list", "data": [
            {"id": i, "object": "model"} for i in self.ids]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def models_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_verify_without_model_takes_the_one_the_server_lists(models_server):
    from infopt.contract.verify import only_served_model
    from infopt.specs.base import InputError

    server, url = models_server
    server.RequestHandlerClass.ids = ["smollm2"]
    assert only_served_model(url) == "smollm2"
    server.RequestHandlerClass.ids = ["a", "b"]
    with pytest.raises(InputError, match=r"lists 2 models \('a', 'b'\); give --model"):
        only_served_model(url)
    out = _refused("verify", "--endpoint", url)
    assert "give --model" in out
    assert "cannot reach" in _refused("verify", "--endpoint", "http://127.0.0.1:9")


def test_a_run_is_named_by_its_id_or_its_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "elsewhere"
    assert locate_run("20261206-1200-ab12", str(root)) == (root.resolve(), "20261206-1200-ab12")
    assert locate_run("runs/20261206-1200-ab12") == ((tmp_path / "runs").resolve(),
                                                      "20261206-1200-ab12")
    assert locate_run(str(root / "x") + "/") == (root.resolve(), "x")
    missing = _refused("report", "runs/20990101-000000-dead")
    assert "no finished run '20990101-000000-dead'" in missing and "runs/<id>" in missing
