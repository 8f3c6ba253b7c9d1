"""A fake llama-server for the quality gate's refusal paths: it speaks llama-server's wire format
(/props, /tokenize, /completion with n_probs, logit_bias, return_tokens, /v1/models) over real
HTTP, with a toy deterministic "model", and can misbehave the ways a broken or mismatched server
does. The real llama-server never does these things on purpose, so the tests that need them use
this; everything else runs against the real one.

Modes: "honest" (exact toy scores), "ignores_bias" (logit_bias dropped: the argmax comes back),
"noisy" (its reported logprobs are unrelated to its greedy choice: garbage scores),
"other_tokenizer" (tokenizes to other ids), "other_model" (honest, but another toy model: a
candidate that regressed).
"""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VOCAB = 64


def _logprobs(prefix: list[int], salt: int = 0) -> list[float]:
    h = (sum((i + 1) * t for i, t in enumerate(prefix[-4:])) + salt) % VOCAB
    logits = [-abs(v - h) * 0.7 for v in range(VOCAB)]
    z = math.log(sum(math.exp(x) for x in logits))
    return [x - z for x in logits]


class _Handler(BaseHTTPRequestHandler):
    mode = "honest"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/props":
            self._send({"default_generation_settings": {"n_ctx": 2048}})
        elif self.path == "/v1/models":
            self._send({"object": "list", "data": [{"id": "toy", "object": "model"}]})
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize":
            salt = 7 if self.mode == "other_tokenizer" else 0
            self._send({"tokens": [(ord(c) + salt) % VOCAB for c in req["content"]]})
        elif self.path == "/completion":
            self._send(self._complete(req))
        else:
            self.send_error(404)

    def _complete(self, req) -> dict:
        prefix, out, probs = list(req["prompt"]), [], []
        bias = {t: b for t, b in req.get("logit_bias", [])} if self.mode != "ignores_bias" else {}
        for step in range(req.get("n_predict", 1)):
            lp = _logprobs(prefix, salt=3 if self.mode == "other_model" else 0)
            tok = max(range(VOCAB), key=lambda v: lp[v] + bias.get(v, 0.0))
            shown = _logprobs(prefix, salt=31 + step) if self.mode == "noisy" else lp
            top = sorted(range(VOCAB), key=lambda v: -shown[v])[:req.get("n_probs", 0)]
            probs.append({"id": tok, "logprob": shown[tok],
                          "top_logprobs": [{"id": v, "logprob": shown[v]} for v in top]})
            out.append(tok)
            prefix.append(tok)
        return {"content": "", "tokens": out, "tokens_predicted": len(out),
                "completion_probabilities": probs if req.get("n_probs") else []}


class FakeLlama:
    def __init__(self, mode: str = "honest") -> None:
        handler = type("H", (_Handler,), {"mode": mode})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeLlama:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
