"""The contract probes tell support from silent partial support, over real HTTP against
bench/fast_server.py: it streams correctly and bills usage, but ignores stop, n, logprobs,
sampling and response_format, and names its model "fast-server". (The real engines: tests/integration.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench.fast_server import FastServer, start_server
from infopt.contract.openai_chat import CHAT_FEATURES
from infopt.contract.verify import verify_endpoint
from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint


@pytest.fixture(scope="module")
def server() -> Iterator[FastServer]:
    with start_server(ttft_s=0.0, itl_s=0.0) as srv:
        yield srv


def test_a_server_that_ignores_fields_fails_them_rather_than_passing(server, tmp_path):
    checks = verify_endpoint(Endpoint(base_url=server.base_url, model="fast-server"),
                             required=("stop",), features=CHAT_FEATURES, evidence_dir=tmp_path)
    status = {c.feature: c.status.value for c in checks}
    assert [c.feature for c in checks] == list(CHAT_FEATURES)
    assert status == {"models": "pass", "whole": "pass", "stream": "pass",
                      "include_usage": "pass", "stream_count_matches_usage": "pass",
                      "max_tokens": "pass", "stop": "fail", "n": "fail", "seed": "fail",
                      "logprobs": "fail", "json_object": "fail", "json_schema": "fail"}
    by = {c.feature: c for c in checks}
    assert "the field was ignored" in by["n"].detail
    assert "sampling) is ignored" in by["seed"].detail
    # Required: what the load generator relies on, plus what the caller asked for.
    assert {c.feature for c in checks if c.required} == {"models", "whole", "stream",
                                                          "include_usage", "stop"}
    evidence = json.loads((tmp_path / "n.json").read_text())
    assert evidence["status"] == "fail" and len(evidence["evidence"]["choices"]) == 1


def test_a_model_name_the_server_does_not_list_fails_models(server):
    [check] = verify_endpoint(Endpoint(base_url=server.base_url, model="gpt-4"),
                          features=("models",))
    assert not check.ok and "'gpt-4' is not among them" in check.detail


def test_unknown_features_and_unreachable_endpoints_are_input_errors():
    with pytest.raises(InputError, match=r"unknown contract feature\(s\) \['tools'\]"):
        verify_endpoint(Endpoint(base_url="http://127.0.0.1:9", model="m"), required=("tools",))
    with pytest.raises(InputError, match="cannot reach http://127.0.0.1:9"):
        verify_endpoint(Endpoint(base_url="http://127.0.0.1:9", model="m"), features=("models",))


def test_an_unwritable_evidence_folder_is_refused_before_any_probe(server, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot write contract evidence to .*a-file/ev"):
        verify_endpoint(Endpoint(base_url=server.base_url, model="fast-server"),
                    evidence_dir=blocker / "ev")


@pytest.mark.parametrize("body, ctype", [
    (b"<html><body>It works!</body></html>", "text/html"),
    (b'{"status": "ok"}', "application/json"),
])
def test_a_url_that_is_no_openai_server_is_one_paragraph_before_any_probe(body, ctype):
    """A web page, or a JSON API of another shape: refused once, not failed 12 times."""
    with _tiny_server(lambda h: _answer(h, body, ctype)) as url, pytest.raises(
            InputError, match="is not an OpenAI-compatible server: GET "
                              r"/v1/models answered HTTP 200 \(" + ctype):
        verify_endpoint(Endpoint(base_url=url, model="m"))


def test_tools_other_routes_and_errors_on_a_server_that_only_streams_chat(server):
    """Text where a tool call was required is a failure; a route the server lacks (404) is
    unsupported; a prompt far beyond any context answered 200 (silently truncated) fails."""
    from infopt.contract.verify import FEATURES

    checks = verify_endpoint(Endpoint(base_url=server.base_url, model="fast-server"),
                             features=tuple(f for f in FEATURES if f not in CHAT_FEATURES))
    got = {c.feature: c.status.value for c in checks}
    assert {f: got[f] for f in ("tools_auto", "tools_required", "tools_named",
                                "tools_parallel")} == dict.fromkeys(
        ("tools_auto", "tools_required", "tools_named", "tools_parallel"), "fail")
    assert got["tools_second_turn"] == "pass" and got["error_bad_request"] == "pass"
    assert got["error_beyond_context"] == "fail" and got["auth"] == "unsupported"
    assert all(v == "unsupported" for f, v in got.items()
               if f.startswith(("responses_", "messages_"))), got
    assert "no route POST /v1/responses" in next(c.detail for c in checks
                                                 if c.feature == "responses_create")


def test_a_server_that_does_not_answer_in_time_fails_the_probe_not_the_run():
    """Reachable (it lists models) but silent on a request: that check fails with the time
    waited; it is not reported as an unreachable endpoint."""
    import time

    models = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
    with _tiny_server(lambda h: _answer(h, models, "application/json"),
                      post=lambda h: time.sleep(3)) as url:
        [check] = verify_endpoint(Endpoint(base_url=url, model="m"), features=("whole",),
                                  timeout_s=1.0)
    assert check.status.value == "fail" and check.detail == "no answer within 1 s"


def _answer(handler, body: bytes, ctype: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def _tiny_server(get, post=None) -> Iterator[str]:
    """A real HTTP server on loopback with the given GET (and POST) behaviour; yields its URL."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            get(self)

        def do_POST(self):
            (post or get)(self)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("separated, content, template, status", [
    ("17*23: 17*20=340, +51", "391", None, "pass"),
    ("thinking", "<think>again</think>391", None, "fail"),
    ("", "<think>17*20=340</think>391", None, "fail"),
    ("", "391", "{{ '<|im_start|>assistant\n<think>\n' }}", "fail"),
    ("", "391", "{{ message['content'] }}", "not applicable"),
    ("", "391", None, "not applicable"),
])
def test_reasoning_verdicts(separated, content, template, status):
    from infopt.contract.reasoning import classify

    assert classify(separated, content, template)[0].value == status


def _reasoning_server(separate_in_stream: bool):
    """A reasoning model's server: reasoning_content whole; in the stream only if asked."""
    def post(h):
        body = json.loads(h.rfile.read(int(h.headers["Content-Length"])))
        base = {"id": "x", "created": 0, "model": "m"}
        if not body.get("stream"):
            _answer(h, json.dumps({**base, "object": "chat.completion", "choices": [{
                "index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": "391",
                    "reasoning_content": "17*20=340, 17*3=51"}}]}).encode(),
                "application/json")
            return
        deltas = [{"reasoning_content": "17*20=340"} if separate_in_stream else
                  {"content": "<think>17*20=340</think>"}, {"content": "391"}]
        frames = b"".join(b"data: " + json.dumps({**base, "object": "chat.completion.chunk",
                                                 "choices": [{"index": 0, "delta": d}]}
                                                ).encode() + b"\n\n" for d in deltas)
        _answer(h, frames + b"data: [DONE]\n\n", "text/event-stream")
    return _tiny_server(lambda h: _answer(h, b'{"data": [{"id": "m"}]}', "application/json"),
                        post=post)


@pytest.mark.parametrize("separate_in_stream, status", [(True, "pass"), (False, "fail")])
def test_reasoning_must_be_separated_whole_and_streamed(separate_in_stream, status, tmp_path):
    with _reasoning_server(separate_in_stream) as url:
        [check] = verify_endpoint(Endpoint(base_url=url, model="m"), features=("reasoning",),
                                  evidence_dir=tmp_path)
    assert check.status.value == status, check.detail
    evidence = json.loads((tmp_path / "reasoning.json").read_text())["evidence"]
    assert evidence["message"]["reasoning_content"] == "17*20=340, 17*3=51"
    assert ("17*20=340" in evidence["stream"]["reasoning"]) is separate_in_stream


def test_a_not_applicable_check_is_no_gap_unless_required():
    from infopt.contract.remedies import contract_gaps
    from infopt.specs.contract import ContractCheck

    def na(required):
        return ContractCheck(route="/v1/chat/completions", feature="reasoning", stream=False,
                             status="not applicable", detail="no reasoning", required=required)
    assert contract_gaps([na(False)], []) == [] and na(False).shown == "not applicable"
    assert [g.feature for g in contract_gaps([na(True)], [])] == ["reasoning"]
    assert na(True).shown == "NOT APPLICABLE"


@pytest.mark.parametrize("text, prefix", [
    # vLLM 0.32 CPU's json_object answer from SmolLM2-135M, cut at 64 tokens (2026-12-02).
    ('{\n  "name": "New York",\n  "population": 201,\n\n"population_201": 201,\n"population',
     True),
    ('{"a": "x\\"y', True), ('{"a": "}"', True), ('  {"a": [1, {"b": ', True),
    ('Sure! {"a": 1', False), ('{"a": [1, 2}', False), ('{"a": 1}}', False), ('', False),
    ('[1, 2', False), ('{"a": 1}', False)])  # a whole object is not a cut one
def test_a_cut_json_object_is_told_from_prose(text, prefix):
    from infopt.contract.openai_chat import json_object_prefix

    assert json_object_prefix(text) is prefix
