"""A minimal, very fast OpenAI-compatible streaming server, for benchmarking the load generator.

Standard library only (asyncio streams, a hand-written HTTP/1.1 keep-alive loop, response bytes
assembled from pre-built templates instead of json.dumps per chunk), so its cost per chunk stays
well below the client's: a benchmark against it measures the client, not the server. It runs in
its own process (`start_server`), optionally pinned to one core.

Routes:
  POST /v1/chat/completions  stream=true: exactly `max_tokens` (or `max_completion_tokens`) SSE
      tokens in SSE chunks `data: {json}\\n\\n`, each with a non-empty `choices[0].delta.content` of
      one token (x_tokens_per_chunk k: k tokens a chunk, the last one the remainder; the first
      chunk also has role "assistant", the last finish_reason "length", as vLLM sends them);
      with `stream_options.continuous_usage_stats` every chunk carries the running usage; then a usage
      chunk (`choices: []`) when `stream_options.include_usage`, then `data: [DONE]`. The first
      chunk is due `ttft_s` after the request body arrived, chunk k is due `ttft_s + k * itl_s`
      after it (absolute deadlines, so sleep overshoot does not accumulate; a late chunk is sent
      at once, without a catch-up burst). itl_s = 0: as fast as possible, yielding to the event
      loop after every chunk so concurrent streams interleave one chunk at a time.
      stream=false: one chat.completion object after the same total delay.
  GET /v1/models, GET /health
  GET /stats   {"requests", "connections" (accepted), "chunks_sent", "streams_open" (streamed
               responses begun and not ended), "streams_peak" (the most open at once), "cpu_s"
               (this process's CPU time, s), "clock", "pid"}; /stats?reset=1 answers, then
               starts a new peak from the streams open now.
  GET /sends   send times kept for requests that set `x_record_sends`, then forgotten:
               {key: {"arrival_ns", "send_ns": [per content chunk]}}, key = the last message's
               content (the benchmark's prompts are unique).

Timestamps: every chunk carries `server_send_ns` = time.monotonic_ns() taken just before the
chunk is handed to the socket. On Linux that is CLOCK_MONOTONIC, one clock for every process on
the machine, and the client's time.perf_counter() reads the same clock (CPython's
time.get_clock_info("perf_counter") says so), so client receive time - server send time is
measurable across the two processes. Units: seconds in arguments, nanoseconds on the wire.

Per-request overrides (extra body fields; the real client sends them through `extra_body`):
  x_ttft_s, x_itl_s (seconds) replace the server's defaults; x_tokens_per_chunk (int, default 1);
  x_record_sends (bool), see /sends; x_hold_until_streams (int n): the stream's head goes out at
  once, its first chunk waits until n streams have been open at the same time (at most
  HOLD_TIMEOUT_S), so n streams are provably held together whatever the client's start-up
  speed; TTFT then counts from that moment.

Run: python bench/fast_server.py [--host H] [--port P] [--ttft-s S] [--itl-s S] [--cpu N]
It prints one line, "fast_server listening on http://H:P", once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READY_PREFIX = "fast_server listening on "
TIMESTAMP_FIELD = "server_send_ns"
DEFAULT_MAX_TOKENS = 16
HOLD_TIMEOUT_S = 60.0  # the longest a stream waits for x_hold_until_streams
_TOKEN = " tok"  # the content of every chunk: one "token"


@dataclass
class _State:
    ttft_s: float
    itl_s: float
    requests: int = 0
    connections: int = 0
    chunks_sent: int = 0
    streams_open: int = 0  # streamed responses begun and not yet ended
    streams_peak: int = 0  # the most open at once since start (or the last /stats?reset=1)
    sends: dict[str, dict[str, Any]] = field(default_factory=dict)
    next_id: int = 0
    peak_waits: dict[int, asyncio.Event] = field(default_factory=dict)  # x_hold_until_streams

    def stream_opened(self) -> None:
        self.streams_open += 1
        if self.streams_open > self.streams_peak:
            self.streams_peak = self.streams_open
            for n in [n for n in self.peak_waits if n <= self.streams_peak]:
                self.peak_waits.pop(n).set()

    async def wait_for_peak(self, n: int, timeout_s: float) -> None:
        """Return once `n` streams have been open at the same time (or after timeout_s)."""
        if self.streams_peak >= n:
            return
        event = self.peak_waits.setdefault(n, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass  # go on: the client sees the stream, /stats shows the peak was not reached


class _BadRequest(Exception):
    pass


def _frame(payload: bytes) -> bytes:
    """One HTTP/1.1 chunked-transfer frame."""
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def _response_head(status: str, content_type: str, keep_alive: bool, *,
                   length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"content-type: {content_type}",
             "connection: keep-alive" if keep_alive else "connection: close"]
    if length is None:
        lines += ["transfer-encoding: chunked", "cache-control: no-cache"]
    else:
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _json_response(writer: asyncio.StreamWriter, status: str, obj: Any, keep_alive: bool) -> None:
    body = json.dumps(obj).encode()
    writer.write(_response_head(status, "application/json", keep_alive, length=len(body)) + body)


def _error(writer: asyncio.StreamWriter, status: str, message: str, keep_alive: bool) -> None:
    _json_response(writer, status, {"error": {"message": message, "type": "invalid_request_error",
                                              "code": None, "param": None}}, keep_alive)


def _prompt_words(messages: list[Any]) -> int:
    words = 0
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            words += len(content.split())
        elif isinstance(content, list):
            words += sum(len(str(p.get("text", "")).split()) for p in content if isinstance(p, dict))
    return max(1, words)


def _parse_chat(body: bytes, state: _State) -> dict[str, Any]:
    try:
        req = json.loads(body)
    except json.JSONDecodeError as exc:
        raise _BadRequest(f"body is not JSON: {exc}") from exc
    if not isinstance(req, dict) or not isinstance(req.get("messages"), list) or not req["messages"]:
        raise _BadRequest("'messages' must be a non-empty list")
    n = req.get("max_completion_tokens") or req.get("max_tokens") or DEFAULT_MAX_TOKENS
    if not isinstance(n, int) or n < 1:
        raise _BadRequest("'max_tokens' must be an integer >= 1")
    try:
        ttft_s = float(req.get("x_ttft_s", state.ttft_s))
        itl_s = float(req.get("x_itl_s", state.itl_s))
    except (TypeError, ValueError) as exc:
        raise _BadRequest("'x_ttft_s' and 'x_itl_s' must be numbers (seconds)") from exc
    if not (ttft_s >= 0 and itl_s >= 0):
        raise _BadRequest("'x_ttft_s' and 'x_itl_s' must be >= 0")
    per_chunk = req.get("x_tokens_per_chunk", 1)
    if not isinstance(per_chunk, int) or per_chunk < 1:
        raise _BadRequest("'x_tokens_per_chunk' must be an integer >= 1")
    hold = req.get("x_hold_until_streams", 0)
    if not isinstance(hold, int) or hold < 0:
        raise _BadRequest("'x_hold_until_streams' must be an integer >= 0")
    last = req["messages"][-1]
    content = last.get("content") if isinstance(last, dict) else None
    return {
        "n": n, "ttft_s": ttft_s, "itl_s": itl_s,
        "stream": bool(req.get("stream")),
        "include_usage": bool((req.get("stream_options") or {}).get("include_usage")),
        "continuous_usage": bool((req.get("stream_options") or {}).get("continuous_usage_stats")),
        "per_chunk": per_chunk,
        "hold_until_streams": hold,
        "model": str(req.get("model") or "fast-server"),
        "prompt_tokens": _prompt_words(req["messages"]),
        "record_key": (content if isinstance(content, str) else json.dumps(content))
        if req.get("x_record_sends") else None,
    }


async def _sleep_until(deadline_ns: int) -> None:
    delay_ns = deadline_ns - time.monotonic_ns()
    if delay_ns > 0:
        await asyncio.sleep(delay_ns / 1e9)


async def _stream_chat(writer: asyncio.StreamWriter, req: dict[str, Any], arrival_ns: int,
                       state: _State, keep_alive: bool) -> None:
    state.next_id += 1
    created = int(time.time())
    head = (b'data: {"id":"chatcmpl-fast-%d","object":"chat.completion.chunk","created":%d,'
            b'"model":%b,"choices":[{"index":0,"delta":{'
            % (state.next_id, created, json.dumps(req["model"]).encode()))
    n, per = req["n"], req["per_chunk"]
    sizes = [min(per, n - i) for i in range(0, n, per)]  # tokens in each chunk
    sends: list[int] | None = None
    if req["record_key"] is not None:
        sends = []
        state.sends[req["record_key"]] = {"arrival_ns": arrival_ns, "send_ns": sends}

    writer.write(_response_head("200 OK", "text/event-stream; charset=utf-8", keep_alive))
    state.stream_opened()
    try:
        if req["hold_until_streams"]:
            await writer.drain()  # the head goes out now: the client sees the stream open
            await state.wait_for_peak(req["hold_until_streams"], HOLD_TIMEOUT_S)
            arrival_ns = max(arrival_ns, time.monotonic_ns())  # TTFT counts from the release
        await _stream_body(writer, req, arrival_ns, state, head, sizes, sends)
    finally:
        state.streams_open -= 1


async def _stream_body(writer: asyncio.StreamWriter, req: dict[str, Any], arrival_ns: int,
                       state: _State, head: bytes, sizes: list[int],
                       sends: list[int] | None) -> None:
    n, ttft_ns, itl_ns = req["n"], int(req["ttft_s"] * 1e9), int(req["itl_s"] * 1e9)
    p = req["prompt_tokens"]
    tail = b',"logprobs":null,"finish_reason":null}],'
    stamp = b'"' + TIMESTAMP_FIELD.encode() + b'":'
    deadline = arrival_ns + ttft_ns
    done = 0
    for k, size in enumerate(sizes):
        if ttft_ns or itl_ns:
            await _sleep_until(deadline)
            deadline = max(deadline + itl_ns, time.monotonic_ns())
        done += size
        content = b'"content":%b}' % json.dumps(_TOKEN * size).encode()
        # vLLM's continuous_usage_stats: the running counts ride on every chunk.
        usage = (b'"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d},'
                 % (p, done, p + done)) if req["continuous_usage"] else b""
        end = tail if k < len(sizes) - 1 else tail.replace(b'"finish_reason":null',
                                                           b'"finish_reason":"length"')
        now = time.monotonic_ns()
        writer.write(_frame(head + (b'"role":"assistant",' if k == 0 else b"") + content + end
                            + usage + stamp + b"%d}\n\n" % now))
        state.chunks_sent += 1
        if sends is not None:
            sends.append(now)
        await writer.drain()  # back-pressure from a slow reader; no yield otherwise
        if not itl_ns:
            await asyncio.sleep(0)  # interleave concurrent streams one chunk at a time
    if req["include_usage"]:
        usage = (b'"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,'
                 b'"total_tokens":%d},"' % (p, n, p + n))
        writer.write(_frame(head.split(b'"choices":')[0] + usage + TIMESTAMP_FIELD.encode()
                            + b'":%d}\n\n' % time.monotonic_ns()))
    writer.write(_frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def _complete_chat(writer: asyncio.StreamWriter, req: dict[str, Any], arrival_ns: int,
                         state: _State, keep_alive: bool) -> None:
    n = req["n"]
    await _sleep_until(arrival_ns + int((req["ttft_s"] + (n - 1) * req["itl_s"]) * 1e9))
    state.next_id += 1
    p = req["prompt_tokens"]
    _json_response(writer, "200 OK", {
        "id": f"chatcmpl-fast-{state.next_id}", "object": "chat.completion",
        "created": int(time.time()), "model": req["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": _TOKEN * n},
                     "logprobs": None, "finish_reason": "length"}],
        "usage": {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n},
        TIMESTAMP_FIELD: time.monotonic_ns(),
    }, keep_alive)
    await writer.drain()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  state: _State) -> None:
    state.connections += 1
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                _error(writer, "431 Request Header Fields Too Large", "headers too large", False)
                return
            lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, version = lines[0].split(" ", 2)
            except ValueError:
                _error(writer, "400 Bad Request", "malformed request line", False)
                return
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if sep:
                    headers[name.strip().lower()] = value.strip()
            keep_alive = (version == "HTTP/1.1"
                          and headers.get("connection", "").lower() != "close")
            if "chunked" in headers.get("transfer-encoding", "").lower():
                _error(writer, "411 Length Required", "send a content-length body", False)
                return
            length = int(headers.get("content-length") or 0)
            body = await reader.readexactly(length) if length else b""
            arrival_ns = time.monotonic_ns()
            path = target.split("?", 1)[0]
            if method == "POST" and path == "/v1/chat/completions":
                state.requests += 1
                try:
                    req = _parse_chat(body, state)
                except _BadRequest as exc:
                    _error(writer, "400 Bad Request", str(exc), keep_alive)
                else:
                    handler = _stream_chat if req["stream"] else _complete_chat
                    await handler(writer, req, arrival_ns, state, keep_alive)
            elif method == "GET" and path == "/health":
                _json_response(writer, "200 OK", {"status": "ok"}, keep_alive)
            elif method == "GET" and path == "/v1/models":
                _json_response(writer, "200 OK", {"object": "list", "data": [
                    {"id": "fast-server", "object": "model", "created": 0,
                     "owned_by": "infopt-bench"}]}, keep_alive)
            elif method == "GET" and path == "/stats":
                _json_response(writer, "200 OK", {
                    "requests": state.requests, "connections": state.connections,
                    "chunks_sent": state.chunks_sent, "streams_open": state.streams_open,
                    "streams_peak": state.streams_peak,
                    "cpu_s": time.process_time(), "pid": os.getpid(),
                    "clock": time.get_clock_info("monotonic").implementation}, keep_alive)
                if "reset=1" in target:  # start a new peak from what is open now
                    state.streams_peak = state.streams_open
            elif method == "GET" and path == "/sends":
                sends, state.sends = state.sends, {}
                _json_response(writer, "200 OK", sends, keep_alive)
            else:
                _error(writer, "404 Not Found", f"no route {method} {path}", keep_alive)
            await writer.drain()
            if not keep_alive:
                return
    except (asyncio.IncompleteReadError, ConnectionError):
        return  # the client went away (between requests or mid-stream)
    finally:
        writer.close()


async def _serve(host: str, port: int, ttft_s: float, itl_s: float) -> None:
    state = _State(ttft_s=ttft_s, itl_s=itl_s)
    server = await asyncio.start_server(lambda r, w: _handle(r, w, state), host, port,
                                        backlog=4096, limit=1 << 20)
    bound = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"{READY_PREFIX}http://{host}:{bound}", flush=True)
    async with server:
        await stop.wait()


def _raise_open_files() -> None:
    """Soft open-files limit up to the hard one: one socket per stream, and 1,000 streams are
    more than the common soft limit of 1,024 descriptors leaves room for."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pin_to_cpu(cpu: int | None) -> bool:
    """Pin the calling process (thread) to one core; False where the OS or the core set refuse."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return False
    return True


@dataclass
class FastServer:
    """A running fast server process; `stop()` (or leaving the `with` block) ends it."""

    process: subprocess.Popen[str]
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout_s: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        if self.process.stdout:
            self.process.stdout.close()

    def __enter__(self) -> FastServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_server(*, ttft_s: float = 0.0, itl_s: float = 0.0, cpu: int | None = None,
                 host: str = "127.0.0.1", port: int = 0,
                 startup_timeout_s: float = 15.0) -> FastServer:
    """Start the server in a new process (this file, run by this interpreter) and wait until it
    accepts connections. port=0 picks a free port; cpu pins the server to that core."""
    argv = [sys.executable, "-u", str(Path(__file__).resolve()), "--host", host,
            "--port", str(port), "--ttft-s", repr(ttft_s), "--itl-s", repr(itl_s)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + startup_timeout_s
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, remaining))
        line = proc.stdout.readline() if ready else ""
        if line.startswith(READY_PREFIX):
            bound = int(line.strip().rsplit(":", 1)[1])
            return FastServer(process=proc, host=host, port=bound)
        if proc.poll() is not None or remaining <= 0 or (ready and not line):
            FastServer(process=proc, host=host, port=port).stop()
            raise RuntimeError(f"fast_server did not start within {startup_timeout_s} s "
                               f"(exit status {proc.returncode}); see its stderr above")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--ttft-s", type=float, default=0.0, help="delay before the first chunk")
    ap.add_argument("--itl-s", type=float, default=0.0, help="gap between chunks; 0 = no pause")
    ap.add_argument("--cpu", type=int, default=None, help="pin the server to this core")
    args = ap.parse_args(argv)
    if args.cpu is not None and not pin_to_cpu(args.cpu):
        print(f"fast_server: could not pin to CPU {args.cpu}; running unpinned", file=sys.stderr)
    _raise_open_files()
    asyncio.run(_serve(args.host, args.port, args.ttft_s, args.itl_s))


if __name__ == "__main__":
    main()
