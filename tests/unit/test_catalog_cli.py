"""A catalog of bad command-line input, each run through the real CLI in process (issue 17).

Every case is one command line with one thing wrong: a number out of range, an empty or unknown
name, a folder that cannot be written, a file or run that is not there, a URL that is not one.
Each must be refused before any engine, Prefect server or measurement starts, and end the same
way: exit 2 by SystemExit, one paragraph on stderr starting "infopt:" that names the option (or
the request field) and what is allowed, no traceback, nothing on stdout, and nothing new in the
working folder (no run folder, no output folder). The companion catalog of bad input *files* is
tests/unit/test_catalog_files.py.

Below the catalog: a missing Prefect block (the block store faked, so no server is needed), and
`infopt bench` against tiny local servers: one that is no OpenAI-compatible server (404, HTML)
is refused up front with exit 2; one whose every completion fails ran, so it exits 1 after its
report.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from pathlib import Path

# Prefect configures its console log handler on first use, on the sys.stderr of that moment:
# inside a CliRunner call that is the runner's stream, closed when the call returns, and every
# later record (great_expectations logs one in `bench`) would print "--- Logging error ---"
# with a traceback into the next call's output. In a real process stderr stays open; here,
# configure it now, on the session's stderr.
import prefect.main  # noqa: F401, E402
import pytest
from typer.testing import CliRunner

from infopt.cli import app
from tests.localserver import LocalServer

BIG = str(10**12)  # a count no run can mean: a typo
CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens there
WORKLOAD = ("name: w\ninput_lengths: {kind: fixed, tokens: 8}\n"
            "output_lengths: {kind: fixed, tokens: 4}\nmeasured_requests: 2\n")
BENCH = ["bench", "--workload", "{d}/w.yaml", "--model", "m"]
QUALITY = ["quality", "--reference", CLOSED, "--candidate", CLOSED]


def _ranges() -> dict[str, tuple[list[str], str]]:
    """0, -1 and 10^12 for every count option: refused with its name and its allowed range."""
    options = {  # option -> (command line before it, the range the message must give)
        "optimize --port": (["optimize"], "1024 to 65535"),
        "optimize --requests": (["optimize"], "1 to 1000000"),
        "optimize --repeats": (["optimize"], "1 to 20"),
        "optimize --concurrency": (["optimize"], "1 to 4096"),
        "optimize --scenario-requests": (["optimize"], "1 to 10000"),
        "optimize --input-tokens": (["optimize"], "1 to 10000000"),
        "optimize --output-tokens": (["optimize"], "1 to 10000000"),
        "bench --max-input-tokens": (BENCH + ["--endpoint", CLOSED], "1 to 10000000"),
        "plan --context": (["plan", "--model", "org/m"], "1 to 10000000"),
        "plan --concurrency": (["plan", "--model", "org/m"], "1 to 1000000"),
        "quality --tokens": (QUALITY, "1 to 1024"),
    }
    cases = {}
    for name, (argv, allowed) in options.items():
        option = name.split()[1]
        for value in ("0", "-1", BIG):
            cases[f"{name.replace(' ', '')}={value}"] = (
                argv + [option, value],
                [rf"{option}: .*\(got '?{value}'?\); allowed: {allowed}"])
    return cases


# id -> (command line, patterns the message must match). {d}: the working folder, holding
# w.yaml (a valid workload), afile (a regular file) and engine.log.
CASES: dict[str, tuple[list[str], list[str]]] = {
    **_ranges(),
    "optimize--port=abc": (["optimize", "--port", "abc"],
                           [r"--port: .*valid integer.*\(got abc\); allowed: 1024 to 65535"]),
    # --- folders that cannot be written (a parent that is a file; /proc refuses even root) ---
    "optimize--runs-dir-under-a-file": (["optimize", "--runs-dir", "{d}/afile/runs"],
                                        [r"--runs-dir \S*afile/runs: cannot write there",
                                         "Not a directory", "give a folder you can write to"]),
    "optimize--runs-dir-in-proc": (["optimize", "--runs-dir", "/proc/infopt-runs"],
                                   [r"--runs-dir /proc/infopt-runs: cannot write there"]),
    "bench--out-under-a-file": (BENCH + ["--endpoint", CLOSED, "--out", "{d}/afile/out"],
                                [r"--out \S*afile/out: cannot write there"]),
    "bench--out-is-a-file": (BENCH + ["--endpoint", CLOSED, "--out", "{d}/afile"],
                             [r"--out \S*afile: cannot write there"]),
    "verify--evidence-under-a-file": (["verify", "--endpoint", CLOSED, "--model", "m",
                                       "--evidence", "{d}/afile/ev"],
                                      [r"cannot write contract evidence to \S*afile/ev"]),
    "quality--reference-file-under-a-file": (QUALITY + ["--reference-file", "{d}/afile/r.json"],
                                             [r"--reference-file \S*: cannot write there",
                                              "missing or not writable"]),
    "quality--lm-eval-out-under-a-file": (QUALITY + ["--lm-eval", "gsm8k", "--lm-eval-out",
                                                     "{d}/afile/lm"],
                                          [r"--lm-eval-out \S*afile/lm: cannot create it"]),
    # --- empty and unknown names --------------------------------------------------------------
    "optimize--model-empty": (["optimize", "--model", ""], [r"model\.path: empty"]),
    "optimize--target-empty": (["optimize", "--target", ""],
                               [r"--target '': empty", "leave the option out"]),
    "optimize--target-missing": (["optimize", "--target", "{d}/nope.yaml"],
                                 [r"cannot read target file \S*nope\.yaml"]),
    "optimize--resume-empty": (["optimize", "--resume", ""], [r"--resume '': empty"]),
    "optimize--resume-unknown": (["optimize", "--resume", "20990101-000000-dead"],
                                 [r"no run '20990101-000000-dead' to resume"]),
    "optimize--engine-empty": (["optimize", "--engine", ""],
                               [r"engines\[0\]: '' is not allowed; allowed: vllm, .*llamacpp"]),
    "optimize--engine-ollama": (["optimize", "--engine", "ollama"],
                                [r"engines\[0\]: 'ollama' is not allowed; allowed: vllm"]),
    "optimize--route-empty": (["optimize", "--route", ""],
                              [r"routes\[0\]\.route: '' is not allowed; allowed: "
                               r"chat_completions, .*anthropic_messages"]),
    "optimize--dimensions-empty": (["optimize", "--dimensions", ""],
                                   [r"dimensions: List should have at least 1 item"]),
    "optimize--dimensions-bogus": (["optimize", "--dimensions", "bogus"],
                                   [r"dimensions\[0\]: 'bogus' is not allowed; allowed: "
                                    r"weights, kv_precision"]),
    "optimize--authorize-bogus": (["optimize", "--authorize", "bogus"],
                                  [r"authorize\[0\]: 'bogus' is not allowed; allowed: "
                                   r"download, quantize, expose"]),
    "optimize--scenarios-bogus": (["optimize", "--scenarios", "short,bogus"],
                                  [r"--scenarios 'short,bogus': unknown scenario\(s\) "
                                   r"\['bogus'\]; give 'all', 'none' or .*full-context"]),
    "optimize--objective-bogus": (["optimize", "--objective", "bogus"],
                                  [r"objective: 'bogus' is not allowed; allowed: goodput, "
                                   r"throughput, latency"]),
    "optimize--objective-empty": (["optimize", "--objective", ""],
                                  [r"objective: '' is not allowed"]),
    "plan--model-empty": (["plan", "--model", ""],
                          [r"--model: String should have at least 1 character"]),
    "plan--engine-bogus": (["plan", "--model", "org/m", "--engine", "bogus"],
                           [r"--engine: Input should be 'vllm', .*'mlx' \(got 'bogus'\)"]),
    "plan--kv-dtype-empty": (["plan", "--model", "org/m", "--kv-dtype", ""],
                             [r"--kv-dtype: String should have at least 1 character"]),
    "plan--tp=0": (["plan", "--model", "org/m", "--tp", "0"],
                   [r"--tp: .*\(got 0\); allowed: 1 to 64"]),
    "plan--gpu-memory-utilization=2": (["plan", "--model", "org/m",
                                        "--gpu-memory-utilization", "2"],
                                       [r"--gpu-memory-utilization: .*\(got 2\); "
                                        r"allowed: 0\.05 to 1\.0"]),
    # The local file is read first: a hub model is not asked for before it.
    "plan--inventory-missing": (["plan", "--model", "org/m", "--inventory", "{d}/nope.json"],
                                [r"--inventory \S*nope\.json: cannot read it"]),
    "bench--workload-missing": (["bench", "--workload", "{d}/nope.yaml", "--model", "m",
                                 "--endpoint", CLOSED],
                                [r"cannot read workload file \S*nope\.yaml"]),
    "bench--endpoint-not-a-url": (BENCH + ["--endpoint", "localhost-8000"],
                                  [r"--endpoint 'localhost-8000' is not an http\(s\) URL",
                                   r"e\.g\. http://127\.0\.0\.1:8000"]),
    "bench--endpoint-port-70000": (BENCH + ["--endpoint", "http://127.0.0.1:70000"],
                                   [r"--endpoint 'http://127\.0\.0\.1:70000' is not an "
                                    r"http\(s\) URL with a host and a valid port"]),
    "bench--endpoint-port-0": (BENCH + ["--endpoint", "http://127.0.0.1:0"],
                               [r"with a host and a valid port"]),
    "bench--endpoint-refuses": (BENCH + ["--endpoint", CLOSED],
                                [r"cannot reach http://127\.0\.0\.1:9 .*refused",
                                 "OpenAI-compatible server"]),
    "bench--endpoint-missing": (["bench", "--workload", "{d}/w.yaml", "--model", "m"],
                                [r"Missing option '--endpoint'"]),
    "bench--model-empty": (["bench", "--workload", "{d}/w.yaml", "--model", "",
                            "--endpoint", CLOSED],
                           [r"--model '': empty", "GET /v1/models"]),
    "bench--engine-empty": (BENCH + ["--endpoint", CLOSED, "--engine", ""],
                            [r"engine '' has no adapter yet; available: llamacpp"]),
    "bench--tokenizer-missing": (BENCH + ["--endpoint", CLOSED, "--tokenizer", "{d}/nope"],
                                 [r"--tokenizer \S*nope: no tokenizer\.json there"]),
    "verify--endpoint-not-a-url": (["verify", "--endpoint", "notaurl", "--model", "m"],
                                   [r"--endpoint 'notaurl' is not an http\(s\) URL"]),
    "verify--model-empty": (["verify", "--endpoint", CLOSED, "--model", ""],
                            [r"--model '': empty"]),
    "verify--api-key-env-unset": (["verify", "--endpoint", CLOSED, "--model", "m",
                                   "--api-key-env", "INFOPT_TEST_UNSET_KEY"],
                                  [r"--api-key-env INFOPT_TEST_UNSET_KEY: that environment "
                                   r"variable is not set"]),
    "quality--tolerance=2": (QUALITY + ["--tolerance", "2"],
                             [r"--tolerance: .*\(got 2\); allowed: 0\.0 to 1\.0"]),
    "quality--top-k=BIG": (QUALITY + ["--top-k", BIG], [rf"--top-k: .*\(got {BIG}\); "
                                                        r"allowed: 1 to 20"]),
    "quality--tasks=-1": (QUALITY + ["--tasks", "-1"], [r"--tasks: .*allowed: 0 to 100"]),
    "quality--lm-eval-limit-alone": (QUALITY + ["--lm-eval-limit", "3"],
                                     [r"go with --lm-eval TASKS"]),
    "shortlist--concurrency=0": (["shortlist", "org/m", "--concurrency", "0"],
                                 [r"--concurrency: .*\(got 0\); allowed: 1 to 4096"]),
    "shortlist--max-bits=1": (["shortlist", "org/m", "--max-bits", "1"],
                              [r"--max-bits: .*allowed: 2 to 16"]),
    "shortlist--device-tpu": (["shortlist", "org/m", "--device", "tpu"],
                              [r"--device 'tpu': kind must be one of \['cuda', 'cpu', 'metal'\]"]),
    "reoptimize--repeats=0": (["reoptimize", "--repeats", "0"],
                              [r"--repeats: Input should be greater than or equal to 2"]),
    "reoptimize--confirm-rounds=BIG": (["reoptimize", "--confirm-rounds", BIG],
                                       [r"--confirm-rounds: Input should be less than or equal "
                                        r"to 5"]),
    "reoptimize--index-url-not-a-url": (["reoptimize", "--index-url", "notaurl"],
                                        [r"--index-url: .*'notaurl' is not an http\(s\) URL"]),
    "diagnose--github-url-not-a-url": (["diagnose", "{d}/engine.log", "--github-url",
                                        "api.github.com"],
                                       [r"--github-url: 'api\.github\.com' is not an http\(s\) "
                                        r"URL"]),
    "reoptimize--executable-missing": (["reoptimize", "--executable", "{d}/nope"],
                                       [r"--executable \S*nope: not an executable file"]),
    # --- runs, files and servers that are not there -------------------------------------------
    "report-unknown-run": (["report", "20990101-000000-dead"],
                           [r"no finished run '20990101-000000-dead'"]),
    "compare-unknown-run": (["compare", "20990101-000000-dead", "x"],
                            [r"no finished run '20990101-000000-dead'"]),
    "accept-unknown-run": (["accept", "20990101-000000-dead"], [r"holds no report\.json"]),
    "diagnose-missing-log": (["diagnose", "{d}/nope.log", "--no-search"],
                             [r"log file \S*nope\.log' does not exist"]),
    "diagnose--engine-empty": (["diagnose", "{d}/engine.log", "--engine", "", "--no-search"],
                               [r"--engine '' is not an engine infopt knows; choose one of "
                                r"llamacpp"]),
    "inspect-missing-path": (["inspect", "{d}/nope"], [r"model path \S*nope' does not exist"]),
    "inspect-empty": (["inspect", ""], [r"an empty model path"]),
    "inspect--revision-on-a-local-path": (["inspect", "{d}", "--revision", "main"],
                                          [r"--revision applies to hub models only"]),
    "approve-without-a-server": (["approve", "some-run"], [r"PREFECT_API_URL is not set"]),
    "approvals-without-a-server": (["approvals"], [r"PREFECT_API_URL is not set"]),
}


@pytest.fixture
def work(tmp_path, monkeypatch):
    """The working folder (cwd, $INFOPT_RUNS_DIR under it); Prefect's home is beside it."""
    d = tmp_path / "work"
    d.mkdir()
    (d / "w.yaml").write_text(WORKLOAD)
    (d / "afile").write_text("a regular file, where a folder is expected\n")
    (d / "engine.log").write_text("llama server listening at http://127.0.0.1:8080\n")
    for name, value in (("PREFECT_HOME", str(tmp_path / "prefect")),
                        ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
                        ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"),
                        ("INFOPT_RUNS_DIR", str(d / "runs-env")),
                        ("INFOPT_CACHE_DIR", str(tmp_path / "cache")),
                        ("HF_ENDPOINT", CLOSED), ("INFOPT_GITHUB_API", CLOSED)):
        monkeypatch.setenv(name, value)  # restored after the test: nothing leaks between cases
    for name in ("PREFECT_API_URL", "INFOPT_TEST_UNSET_KEY"):
        monkeypatch.delenv(name, raising=False)
    # Refused up front means before any engine or flow: reaching either fails the case.
    from prefect.flows import Flow

    from infopt.engines import process

    def too_late(*_args, **_kwargs):
        raise AssertionError("refused too late: an engine or a flow run was started")

    monkeypatch.setattr(process, "start", too_late)
    monkeypatch.setattr(Flow, "__call__", too_late)
    monkeypatch.chdir(d)
    return d


def _tree(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def _invoke(work: Path, argv: list[str]):
    """(result, the working folder's listing before, after)."""
    before = _tree(work)
    result = CliRunner().invoke(app, [a.replace("{d}", str(work)) for a in argv])
    return result, before, _tree(work)


def _assert_refused(result, before: list[str], after: list[str], patterns: list[str]) -> None:
    err = result.stderr.strip()
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not a raw error
    assert "Traceback" not in result.output
    assert err.startswith("infopt: ") and "\n\n" not in err, err  # one paragraph
    assert result.stdout.strip() == "", result.stdout  # the message is the only output
    for pattern in patterns:
        assert re.search(pattern, err, re.S), f"{pattern!r} not in:\n{err}"
    assert after == before  # nothing half-written: no run, output or evidence folder


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_command_line_is_one_paragraph_and_exit_2(case, work):
    argv, patterns = CASES[case]
    result, before, after = _invoke(work, argv)
    _assert_refused(result, before, after, patterns)


# --- a Prefect block that does not exist ------------------------------------------------------

# What each command names: refused before the flow, with how to create the block. The block
# store is faked (the answer Prefect gives for a missing name): no Prefect server starts here.
BLOCK_CASES = {
    "optimize--credentials-block": (["optimize", "--credentials-block", "nope"],
                                    "InfoptCredentials"),
    "optimize--results-store": (["optimize", "--results-store", "nope"], "ResultsStore"),
    "inspect--credentials-block": (["inspect", "org/m", "--credentials-block", "nope"],
                                   "InfoptCredentials"),
    "shortlist--credentials-block": (["shortlist", "org/m", "--device", "cpu",
                                      "--credentials-block", "nope"], "InfoptCredentials"),
    "plan--credentials-block": (["plan", "--model", "org/m", "--gpu", "H100 SXM",
                                 "--credentials-block", "nope"], "InfoptCredentials"),
    "diagnose--credentials-block": (["diagnose", "{d}/engine.log", "--no-search",
                                     "--credentials-block", "nope"], "InfoptCredentials"),
    "reoptimize--results-store": (["reoptimize", "--results-store", "nope"], "ResultsStore"),
    "reoptimize--engine-runtime": (["reoptimize", "--engine-runtime", "nope"], "EngineRuntime"),
}


@pytest.mark.parametrize("case", list(BLOCK_CASES), ids=list(BLOCK_CASES))
def test_a_missing_block_is_one_paragraph_before_any_flow(case, work, monkeypatch):
    from prefect.blocks.core import Block

    asked = []

    def missing(cls, name, *args, **kwargs):
        asked.append((cls.__name__, name))
        raise ValueError(f"Unable to find block document named {name} for block type "
                         f"{cls.__name__}")

    monkeypatch.setattr(Block, "load", classmethod(missing))
    argv, kind = BLOCK_CASES[case]
    result, before, after = _invoke(work, argv)
    _assert_refused(result, before, after, [rf"no {kind} block named 'nope'",
                                            r"Create it once on this Prefect server"])
    assert asked and asked[0] == (kind, "nope")


# --- infopt bench against servers that are not what it measures ------------------------------


class _Server(LocalServer):
    """A tiny HTTP server on 127.0.0.1 (a free port) answering with `handler`; `seen` lists the
    requests it got as "METHOD path"."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.seen: list[str] = []
        seen = self.seen

        class Recording(handler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                seen.append(f"GET {self.path}")
                super().do_GET()

            def do_POST(self) -> None:
                seen.append(f"POST {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                super().do_POST()

        self._serve(Recording)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _send(h: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
    h.send_response(status)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        _send(self, 404, b'{"detail": "Not Found"}', "application/json")

    do_POST = do_GET


class _WebPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        _send(self, 200, b"<!doctype html><html><body>Welcome to nginx!</body></html>",
              "text/html")

    do_POST = do_GET


class _FailingCompletions(BaseHTTPRequestHandler):
    """Lists its model like an OpenAI-compatible server, then fails every completion."""

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            _send(self, 200, json.dumps({"object": "list", "data": [
                {"id": "m", "object": "model"}]}).encode(), "application/json")
        else:
            _send(self, 404, b'{"detail": "Not Found"}', "application/json")

    def do_POST(self) -> None:
        _send(self, 500, b'{"error": {"message": "CUDA error: out of memory"}}',
              "application/json")


@pytest.mark.parametrize("handler, says", [
    (_NotFound, r"is not an OpenAI-compatible server: GET /v1/models answered HTTP 404"),
    (_WebPage, r"is not an OpenAI-compatible server: GET /v1/models answered HTTP 200 "
               r"\(text/html"),
], ids=["answers-404", "serves-a-web-page"])
def test_bench_refuses_a_url_that_is_no_openai_server_before_measuring(work, handler, says):
    with _Server(handler) as srv:
        result, before, after = _invoke(work, BENCH + ["--endpoint", srv.base_url,
                                                          "--out", "{d}/out"])
    _assert_refused(result, before, after, [says, r"give the base URL"])
    assert srv.seen == ["GET /v1/models"]  # asked once; not one completion sent


class _ShortAnswers(_FailingCompletions):
    """Answers every chat completion (streamed) with one token, whatever length was forced."""

    def do_POST(self) -> None:
        chunks = [{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}}]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        _send(self, 200, body.encode(), "text/event-stream")


def _bench(work: Path, url: str, *extra: str):
    argv = [a.replace("{d}", str(work)) for a in BENCH] + ["--endpoint", url, *extra]
    result = CliRunner().invoke(app, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert "Traceback" not in result.output
    return result


@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_bench_exits_1_when_it_ran_but_every_request_failed(work, json_out):
    with _Server(_FailingCompletions) as srv:
        result = _bench(work, srv.base_url, "--out", str(work / "out"),
                        *(["--json"] if json_out else []))
    assert result.exit_code == 1, result.output
    if json_out:
        scenario = json.loads(result.stdout)["scenarios"][0]
        assert scenario["level"]["errors"] == scenario["level"]["requests"] == 2
    else:
        assert "VALIDATION FAILED" in result.stdout  # the report is printed first
    reason = result.stderr.strip().splitlines()[-1]  # after the progress bar
    assert reason.startswith("infopt: the benchmark ran, but its numbers are not evidence: "
                             "w: every request failed (2 "), reason
    assert (work / "out" / "summary.json").is_file()  # the evidence of the failure is kept
    assert sum(p.startswith("POST /v1/chat/completions") for p in srv.seen) >= 2


def test_bench_exits_1_when_its_records_fail_validation(work):
    with _Server(_ShortAnswers) as srv:
        result = _bench(work, srv.base_url, "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["scenarios"][0]["level"]["errors"] == 0
    reason = result.stderr.strip()
    assert reason.startswith("infopt: the benchmark ran, but its numbers are not evidence: "
                             "w: the records failed validation (lengths_reached") \
        and "\n" not in reason, reason


def test_bench_of_a_healthy_server_still_exits_0(work):
    from bench.fast_server import start_server

    with start_server() as srv:
        result = _bench(work, srv.base_url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scenarios"][0]["validation_passed"]
