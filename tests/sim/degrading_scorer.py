"""SIMULATED: a KV cache that degrades past a length, planted in front of a real llama-server.

Why a stand-in: on the bundled model the real quantized KV types do not degrade with length
(q4_0 KV at a 5,509-token prompt reproduced 100% of the F16 reference's tokens, perplexity
ratio 1.011, measured 2026-12-06 on llama.cpp 0.3.36), so the long-context check's refusal
needs a planted case. This proxy forwards every request to the real server unchanged, except
a teacher-forced /completion whose prompt is longer than `after_tokens`: there, at half of the
positions (chosen by a hash of the position, so the same on every run), the real top-1 and
top-2 swap places, as if the cached keys of old positions had lost the precision that decided
between them. Short prompts (the gate's pool) go through untouched, so only the long-context
check can see it. Every answer it changes carries `"infopt_simulated"` and an
`X-Infopt-Simulated` header saying so.
"""

from __future__ import annotations

import hashlib
import json
from http.server import BaseHTTPRequestHandler

import httpx

from tests.localserver import LocalServer

LABEL = "SIMULATED degradation: top-1/top-2 swapped past {after} prompt tokens (tests/sim)"


def _degrades(position: int) -> bool:
    return hashlib.sha256(str(position).encode()).digest()[0] % 2 == 0


def degrade(answer: dict, prompt_tokens: int, after: int) -> dict | None:
    """The answer with its first position's top-1 and top-2 swapped, or None to leave it."""
    probs = answer.get("completion_probabilities") or []
    if prompt_tokens <= after or len(probs) != 1 or not _degrades(prompt_tokens):
        return None
    p = probs[0]
    top = p.get("top_logprobs") or []
    if len(top) < 2:
        return None
    first, second = dict(top[0]), dict(top[1])
    first["logprob"], second["logprob"] = top[1]["logprob"], top[0]["logprob"]
    swapped = [second, first, *top[2:]]
    forced = {t["id"]: t["logprob"] for t in swapped}.get(p["id"], p["logprob"])
    changed = {**p, "top_logprobs": swapped, "logprob": forced}
    return {**answer, "completion_probabilities": [changed],
            "infopt_simulated": LABEL.format(after=after)}


class DegradingScorer(LocalServer):
    """`with DegradingScorer(upstream_base, after_tokens) as s:` then s.base_url."""

    def __init__(self, upstream: str, after_tokens: int) -> None:
        self.degraded = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet: the test prints what matters
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                r = httpx.request(method, upstream + self.path, content=body or None,
                                  headers={"Content-Type": "application/json"}, timeout=900)
                out, extra = r.content, {}
                if method == "POST" and self.path == "/completion" and r.status_code == 200:
                    prompt = json.loads(body).get("prompt")
                    changed = (degrade(r.json(), len(prompt), after_tokens)
                               if isinstance(prompt, list) else None)
                    if changed is not None:
                        outer.degraded += 1
                        out = json.dumps(changed).encode()
                        extra = {"X-Infopt-Simulated": LABEL.format(after=after_tokens)}
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(out)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self._serve(Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
