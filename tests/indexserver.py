"""A local package index JSON API over real HTTP (PyPI's wire format: GET /pypi/<name>/json ->
{"info": {"name", "version"}, "releases": {version: [...]}}; 404 with {"message": "Not Found"}
for an unknown name), for the re-optimization's release check. The releases are the test's."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from tests.localserver import LocalServer


class FakeIndex(LocalServer):
    def __init__(self, releases: dict[str, list[str]]):
        self.releases = releases  # package -> versions, oldest first
        self.requests: list[str] = []
        self._serve(_handler(self))
        self.url = f"http://127.0.0.1:{self.port}/pypi"


def _handler(index: FakeIndex):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            index.requests.append(self.path)
            parts = self.path.strip("/").split("/")
            versions = index.releases.get(parts[1]) if len(parts) == 3 and parts[0] == "pypi" \
                and parts[2] == "json" else None
            if versions is None:
                code, body = 404, {"message": "Not Found"}
            else:
                code, body = 200, {"info": {"name": parts[1], "version": versions[-1]},
                                   "releases": {v: [] for v in versions}}
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return H
