"""A "build" of llama-server whose speed no machine can turn: the real llama-server behind a
pacing proxy. Tests of throughput verdicts (tests/flows/test_reoptimize_flow.py) start it as the
upgraded engine (`ReoptimizeRequest.executable`), so the difference they plant is set by the
pace, not by the CPU the suite happens to run on.

`write_build(folder, name, real, ttft_s, itl_s)` writes an executable `llama-server` that runs
this file. Run as that executable:
  --version           prints `version: 0.5.1-dev (build 2, commit NAME)` (a new build to infopt);
  otherwise           starts the real llama-server with the same argv on a free loopback port
                      (its log goes to this process's stdout/stderr, so infopt reads the real log
                      lines) and serves the argv's --host/--port itself, forwarding every request.
A streamed response (text/event-stream) is paced: its k-th SSE event (k = 0, 1, ...) leaves no
earlier than `ttft_s + k * itl_s` after the request arrived (absolute deadlines: an event the
engine delivers late goes at once, and the next ones are still due on the original schedule).
Everything else (health, /completion for the quality gate, /tokenize, /metrics, non-streamed
chat) passes through unchanged. As long as the real engine is faster than the pace, a streamed
request takes ttft_s + (events - 1) * itl_s whatever the machine; the tests choose a pace well
under the speed this machine measured for the same configuration minutes earlier.

Standard library only; one thread per client connection (HTTP/1.1 keep-alive). infopt stops an
engine by signalling its process group, which holds this process and the real server alike.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authenticate", "proxy-authorization", "content-length"}


def write_build(folder: Path, name: str, real: str, ttft_s: float, itl_s: float) -> str:
    """An executable `folder/name/llama-server` pacing the real `real` binary; returns its path."""
    path = folder / name / "llama-server"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""#!/bin/sh
exec "{sys.executable}" "{Path(__file__).resolve()}" --real "{real}" --name "{name}" \\
  --ttft-s {ttft_s!r} --itl-s {itl_s!r} -- "$@"
""")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _handler(upstream_port: int, ttft_s: float, itl_s: float) -> type[BaseHTTPRequestHandler]:
    class Pacer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes: with Nagle on, the body waits for the client's
        # delayed ACK of the headers (~40 ms a response; the quality gate's one request per
        # scored position made a paced trial's gate 3x slower than the real server's).
        disable_nagle_algorithm = True

        def log_message(self, *args) -> None:  # the engine log is llama-server's
            pass

        def _forward(self) -> None:
            arrival = time.monotonic()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=600)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            except OSError:  # the real server is not listening yet: not ready
                conn.close()
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            try:
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP:
                        self.send_header(k, v)
                if "text/event-stream" in (resp.getheader("Content-Type") or ""):
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self._paced(resp, arrival)
                else:
                    data = resp.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
            finally:
                conn.close()

        def _paced(self, resp: http.client.HTTPResponse, arrival: float) -> None:
            event, k = b"", 0
            while line := resp.readline():
                event += line
                if line not in (b"\n", b"\r\n"):
                    continue
                delay = arrival + ttft_s + k * itl_s - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self._chunk(event)
                event, k = b"", k + 1
            if event:
                self._chunk(event)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_DELETE = _forward

    return Pacer


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--ttft-s", type=float, required=True)
    ap.add_argument("--itl-s", type=float, required=True)
    ap.add_argument("engine_argv", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    engine = args.engine_argv[1:] if args.engine_argv[:1] == ["--"] else args.engine_argv
    if engine[:1] == ["--version"]:
        print(f"version: 0.5.1-dev (build 2, commit {args.name})", file=sys.stderr)
        return
    host, port = engine[engine.index("--host") + 1], int(engine[engine.index("--port") + 1])
    inner = list(engine)
    inner[inner.index("--host") + 1] = "127.0.0.1"
    inner[inner.index("--port") + 1] = str(upstream := _free_port())
    server = ThreadingHTTPServer((host, port), _handler(upstream, args.ttft_s, args.itl_s))
    server.daemon_threads = True
    real = subprocess.Popen([args.real, *inner], stdin=subprocess.DEVNULL)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # ends the real server too (finally)
    try:
        server.serve_forever()
    finally:
        real.terminate()
        real.wait(10)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
