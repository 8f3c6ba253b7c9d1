"""The streamed routes as the official SDKs' helpers consume them: recorded real streams
(tests/fixtures/contract/SOURCE.txt: llama-server 0.5.0-dev/0c1e570 from llama-cpp-python
0.3.36 and vLLM 0.32.0, 2026-12-03) replayed byte for byte from a local HTTP server to the real
openai and anthropic SDKs. A stream that raw iteration survives but the helper or the SDK's
typed event models do not is a failure that names the event and the field."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai
import pytest

from infopt.contract.sdk_streams import field_problems, sdk_label
from infopt.contract.verify import verify_endpoint
from infopt.specs.endpoint import Endpoint

RECORDED = Path(__file__).parents[1] / "fixtures" / "contract"
OPENAI = sdk_label("openai")
MODELS = json.dumps({"object": "list", "data": [{"id": "smollm2", "object": "model"}]})


def _recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def _edit(sse: bytes, kind: str, drop: str) -> bytes:
    """The stream with `drop` removed from every data event of type `kind`."""
    out = []
    for line in sse.decode().split("\n"):
        if line.startswith("data: {"):
            ev = json.loads(line[6:])
            if ev.get("type") == kind:
                ev.pop(drop)
                line = "data: " + json.dumps(ev)
        out.append(line)
    return "\n".join(out).encode()


@contextmanager
def _replay(streams: dict[str, bytes | tuple[bytes, str]]) -> Iterator[str]:
    """A real HTTP server on loopback answering GET /v1/models and each POST path in
    `streams` with its recorded event stream (or a (body, content type) pair), whatever the
    request; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(200, MODELS.encode(), "application/json")

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = streams.get(self.path)
            if body is None:
                self._send(404, b'{"error": "no such route"}', "application/json")
            else:
                self._send(200, *(body if isinstance(body, tuple) else
                                  (body, "text/event-stream")))

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _verify(streams: dict[str, bytes], features: tuple[str, ...], evidence_dir=None):
    with _replay(streams) as url:
        return {c.feature: c for c in verify_endpoint(
            Endpoint(base_url=url, model="smollm2"), features=features,
            evidence_dir=evidence_dir)}


def test_conforming_recorded_streams_pass_through_every_sdk_helper():
    """vLLM's Responses stream, llama-server's Chat Completions and Messages streams."""
    checks = _verify({"/v1/responses": _recorded("vllm-responses.sse"),
                      "/v1/chat/completions": _recorded("llamacpp-chat.sse"),
                      "/v1/messages": _recorded("llamacpp-messages.sse")},
                     ("responses_stream", "stream", "messages_stream"))
    assert {f: c.status.value for f, c in checks.items()} == dict.fromkeys(checks, "pass"), {
        f: c.detail for f, c in checks.items()}
    assert checks["responses_stream"].detail.startswith(
        "client.responses.stream() reads it to the end; 24 events in order, each valid as "
        f"{OPENAI}'s typed event")
    assert "client.chat.completions.stream() reads it to the end" in checks["stream"].detail
    assert "client.messages.stream() reads it to the end" in checks["messages_stream"].detail


def test_llama_server_responses_stream_fails_as_the_sdk_helper_does(tmp_path):
    """Raw iteration survives llama-server's stream (the old verdict was `pass`); the helper
    raises TypeError, and the verdict names the events and the fields they lack."""
    sse = _recorded("llamacpp-responses.sse")
    with _replay({"/v1/responses": sse}) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
        raw = list(client.responses.create(model="smollm2", input="x", stream=True))
        assert len(raw) == 24 and raw[2].output_index is None  # no error: construct()ed
        with pytest.raises(TypeError, match="list indices must be integers"):
            with client.responses.stream(model="smollm2", input="x") as stream:
                list(stream)
    check = _verify({"/v1/responses": sse}, ("responses_stream",), tmp_path)[
        "responses_stream"]
    assert check.status.value == "fail"
    assert check.detail.startswith("client.responses.stream() raises TypeError (list indices "
                                   "must be integers or slices, not NoneType); all 24 events "
                                   "lack sequence_number")
    assert (f"response.output_item.added event #2 lacks output_index (required by {OPENAI} "
            "ResponseOutputItemAddedEvent)") in check.detail
    assert (f"response.output_text.delta events #4-#19 lack content_index, logprobs, "
            f"output_index (required by {OPENAI} ResponseTextDeltaEvent)") in check.detail
    typed = json.loads((tmp_path / "responses_stream.json").read_text())["evidence"]["typed"]
    assert typed["events_checked"] == 24 and len(typed["problems"]) == 24
    done = next(p for p in typed["problems"] if p["type"] == "response.output_item.done")
    assert done == {"event": 22, "type": "response.output_item.done",
                    "model": "ResponseOutputItemDoneEvent",
                    "missing": ["output_index", "sequence_number"], "other": []}


def test_one_missing_output_index_is_named_alone():
    """vLLM's conforming stream without output_index on response.output_item.added."""
    sse = _edit(_recorded("vllm-responses.sse"), "response.output_item.added", "output_index")
    check = _verify({"/v1/responses": sse}, ("responses_stream",))["responses_stream"]
    assert check.status.value == "fail"
    assert check.detail.endswith(f"response.output_item.added event #2 lacks output_index "
                                 f"(required by {OPENAI} ResponseOutputItemAddedEvent)")
    assert check.detail.startswith("client.responses.stream() raises"), check.detail


def test_a_messages_stream_without_block_indices_fails_naming_them():
    sse = _edit(_recorded("llamacpp-messages.sse"), "content_block_delta", "index")
    check = _verify({"/v1/messages": sse}, ("messages_stream",))["messages_stream"]
    assert check.status.value == "fail"
    assert (f"content_block_delta events #2-#17 lack index (required by "
            f"{sdk_label('anthropic')} RawContentBlockDeltaEvent)") in check.detail, check.detail


def test_a_chat_chunk_without_its_id_fails_naming_it():
    lines = _recorded("llamacpp-chat.sse").decode().split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("data: {"))
    chunk = json.loads(lines[first][6:])
    del chunk["id"]
    lines[first] = "data: " + json.dumps(chunk)
    check = _verify({"/v1/chat/completions": "\n".join(lines).encode()}, ("stream",))["stream"]
    assert check.status.value == "fail"
    assert (f"chat.completion.chunk event #0 lacks id (required by {OPENAI} "
            "ChatCompletionChunk)") in check.detail, check.detail


def test_union_members_other_than_the_named_type_are_not_reported():
    """A content part is a union (output_text, refusal, reasoning_text): only the member the
    event's `type` names is judged; a `type` no member has is said once, with its value."""
    from openai.types.responses import ResponseContentPartAddedEvent

    base = {"type": "response.content_part.added", "item_id": "m", "output_index": 0,
            "content_index": 0, "sequence_number": 3}
    assert field_problems(ResponseContentPartAddedEvent, {
        **base, "part": {"type": "output_text", "text": ""}}) == (["part.annotations"], [])
    assert field_problems(ResponseContentPartAddedEvent, {
        **base, "part": {"type": "output_text", "text": "", "annotations": []}}) == ([], [])
    assert field_problems(ResponseContentPartAddedEvent, {
        **base, "part": {"type": "bogus"}}) == (
        [], ["part.type 'bogus' is none of the SDK's types there"])


def test_the_failure_counts_only_where_the_responses_route_is_requested():
    """A chat-only request (every examples/targets file) keeps llama-server's Responses
    failure as an optional gap; a request naming the Responses route requires it."""
    from infopt.contract.verify import required_for

    sse = {"/v1/responses": _recorded("llamacpp-responses.sse")}
    with _replay(sse) as url:
        for routes, required in ((["chat_completions"], False), (["responses"], True)):
            [check] = verify_endpoint(Endpoint(base_url=url, model="smollm2"),
                                      features=("responses_stream",),
                                      required=required_for(routes, []))
            assert (check.status.value, check.required, check.gap) == ("fail", required, True)
            assert check.shown == "FAIL"



def test_a_stream_answered_as_plain_json_fails_its_framing_not_the_run():
    """httpx-sse refuses a body that is no event stream with an httpx.TransportError: that
    is this check's failure, never 'cannot reach' for the whole contract."""
    whole = json.dumps({"id": "x", "object": "chat.completion", "created": 0,
                        "model": "smollm2", "choices": []}).encode()
    with _replay({"/v1/chat/completions": (whole, "application/json")}) as url:
        [check] = verify_endpoint(Endpoint(base_url=url, model="smollm2"), features=("stream",))
    assert check.status.value == "fail"
    assert "content-type 'application/json', not text/event-stream" in check.detail
