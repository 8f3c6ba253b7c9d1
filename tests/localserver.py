"""The one way the test fakes serve real HTTP: a threaded stdlib server on 127.0.0.1 (a free
port), started by `with` and shut down after. Each fake (hub, GitHub, package index, Kubernetes
API) subclasses it and hands over its request handler class."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Bind now (so `port` is known before the server starts); serve from `__enter__`."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
