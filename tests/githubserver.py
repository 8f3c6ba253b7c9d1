"""A local fake of GitHub's REST search API (GET /search/issues) over real HTTP, for the
troubleshooting tests. Same wire format as api.github.com: {"total_count", "incomplete_results",
"items": [{"title", "html_url", "state", "body", "number"}]}, rate-limit headers, 401 for a bad
token. Items come from a small in-memory index of real upstream issue titles/URLs."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

from tests.localserver import LocalServer

# Real issues (titles as on GitHub) used as the searchable index.
ISSUES = [
    {"repo": "vllm-project/vllm", "number": 10517, "state": "closed",
     "title": "[Bug]: The model's max seq len is larger than the maximum number of tokens that "
              "can be stored in KV cache",
     "body": "ValueError: The model's max seq len (29000) is larger than the maximum number of "
             "tokens that can be stored in KV cache (23648). Try increasing "
             "gpu_memory_utilization or decreasing max_model_len"},
    {"repo": "vllm-project/vllm", "number": 13882, "state": "closed",
     "title": "[Usage]: No available memory for the cache blocks with bitsandbytes",
     "body": "ValueError: No available memory for the cache blocks. Try increasing "
             "gpu_memory_utilization when initializing the engine."},
    {"repo": "ggml-org/llama.cpp", "number": 20824, "state": "closed",
     "title": "Misc. bug: segfault in ggml_backend_amx_mul_mat",
     "body": "Thread received signal SIGSEGV, Segmentation fault. ggml_backend_amx_mul_mat"},
]


class FakeGitHub(LocalServer):
    def __init__(self, token: str | None = None, rate_limit_after: int | None = None):
        self.token = token
        self.rate_limit_after = rate_limit_after
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._serve(_handler(self))
        self.url = f"http://127.0.0.1:{self.port}"


def _handler(gh: FakeGitHub):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 - http.server API
            url = urlparse(self.path)
            auth = self.headers.get("Authorization")
            with gh._lock:
                gh.requests.append({"path": url.path, "query": url.query, "auth": auth})
                n = len(gh.requests)
            if url.path != "/search/issues":
                return self._send(404, {"message": "Not Found"})
            if gh.token and auth and auth != f"Bearer {gh.token}":
                return self._send(401, {"message": "Bad credentials"})
            if gh.rate_limit_after is not None and n > gh.rate_limit_after:
                return self._send(403, {"message": "API rate limit exceeded"}, {
                    "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1893456000"})
            q = parse_qs(url.query).get("q", [""])[0]
            repo = re.search(r"repo:(\S+)", q)
            words = {w.lower() for w in re.findall(r"[A-Za-z_]{3,}", re.sub(r"\w+:\S+", "", q))}
            items = []
            for issue in ISSUES:
                if repo and issue["repo"] != repo.group(1):
                    continue
                have = {w.lower() for w in re.findall(r"[A-Za-z_]{3,}",
                                                      issue["title"] + " " + issue["body"])}
                if words and len(words & have) >= max(1, len(words) // 2):
                    items.append({"title": issue["title"], "number": issue["number"],
                                  "state": issue["state"], "body": issue["body"],
                                  "html_url": f"https://github.com/{issue['repo']}/issues/"
                                              f"{issue['number']}"})
            return self._send(200, {"total_count": len(items), "incomplete_results": False,
                                    "items": items},
                              {"X-RateLimit-Remaining": "29", "X-RateLimit-Limit": "30"})

    return H
