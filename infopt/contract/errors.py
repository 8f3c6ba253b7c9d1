"""Authentication and error shapes, over raw httpx (the status code and the body are the
contract): with a key configured, 401 without it and 200 with it; a malformed request and a
prompt beyond the context answered with a 4xx and an error object with a message, never a 200
(a silently truncated prompt), a 5xx or a hang.

The error object comes in two shapes: OpenAI's (`{"error": {"message": ...}}`, vLLM's) and
the flat ErrorResponse of SGLang (0.5.23 entrypoints/openai/serving_base.py
create_error_response) and TensorRT-LLM (serve/openai_server.py): `{"object": "error",
"message": ..., "type": ..., "code": ...}`. The openai SDK reads both (its client takes
`body.get("error", body)`), so both keep the contract; the check says which it saw."""

from __future__ import annotations

from typing import Any

import httpx

from infopt.specs.contract import CheckStatus

from .context import Probe, ProbeContext, ProbeResult

ROUTE = "/v1/chat/completions"
# When the server does not say its context on /v1/models: more words than any context this
# project serves on CPU; each "hello" is one token in the BPE vocabularies seen here. A server
# that really accepts it takes a long prefill: the probe then times out, a failure.
_FALLBACK_CONTEXT = 65_536


def _post(c: ProbeContext, body: dict[str, Any], headers: dict[str, str] | None = None):
    with httpx.Client(timeout=c.timeout_s) as client:
        return client.post(f"{c.base}{ROUTE}", json=body,
                           headers=c.headers if headers is None else headers)


def error_message(body: Any) -> str | None:
    """The message of an error body in either shape (None: neither)."""
    if not isinstance(body, dict):
        return None
    err = body.get("error", body if body.get("object") == "error" else None)
    msg = err.get("message") if isinstance(err, dict) else None
    return msg if isinstance(msg, str) and msg else None


def _error_shape(r: httpx.Response) -> str | None:
    """Why the body is no error object with a message (None: it is one)."""
    try:
        body = r.json()
    except ValueError:
        return f"the body is not JSON: {r.text[:80]!r}"
    if error_message(body) is not None:
        return None
    return f"no error message (error.message, or a flat error object's message) in {r.text[:120]!r}"


def _judge_error(r: httpx.Response, what: str) -> ProbeResult:
    ev = {"status": r.status_code, "body": r.text[:500]}
    if r.status_code == 200:
        return CheckStatus.FAIL, f"{what} was answered 200, as if it were valid", ev
    if not 400 <= r.status_code < 500:
        return CheckStatus.FAIL, f"{what}: HTTP {r.status_code}, a 4xx expected", ev
    shape = _error_shape(r)
    if shape:
        return CheckStatus.FAIL, f"{what}: HTTP {r.status_code}, but {shape}", ev
    body = r.json()
    form = "error.message" if isinstance(body.get("error"), dict) else "a flat error object's message"
    message = error_message(body)
    assert message is not None  # _error_shape gave None: it found this body's message
    return (CheckStatus.PASS,
            f"{what}: HTTP {r.status_code} with {form} {message[:80]!r}", ev)


def _bad_request(c: ProbeContext) -> ProbeResult:
    return _judge_error(_post(c, {"model": c.model, "messages": "not a list"}),
                        "messages given as a string")


def _context_tokens(c: ProbeContext) -> int:
    """The context a prompt may fill, as the server lists it on /v1/models: `max_model_len`
    (vLLM, SGLang) or `meta.n_ctx` (llama-server, per slot). Unlisted: a bound above any
    context served on CPU here, so the probe's prompt is still beyond it."""
    try:
        models = httpx.get(f"{c.base}/v1/models", headers=c.headers,
                           timeout=c.timeout_s).json()["data"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return _FALLBACK_CONTEXT
    for m in models:
        if isinstance(m, dict) and m.get("id") == c.model:
            meta = m.get("meta")
            if not isinstance(meta, dict):
                meta = {}
            for value in (m.get("max_model_len"), meta.get("n_ctx")):
                if isinstance(value, int) and value > 0:
                    return value
    return _FALLBACK_CONTEXT


def _beyond_context(c: ProbeContext) -> ProbeResult:
    n = _context_tokens(c) + 256
    r = _post(c, {"model": c.model, "max_tokens": 1,
                  "messages": [{"role": "user", "content": "hello " * n}]})
    result = _judge_error(r, f"a prompt of about {n} tokens")
    result[2]["prompt_words"] = n
    return result


def _auth(c: ProbeContext) -> ProbeResult:
    if not c.api_key:
        return (CheckStatus.UNSUPPORTED, "not checked: no API key configured (give one to "
                "check 401 without it and 200 with it)", {})
    body = {"model": c.model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    without, wrong, right = (_post(c, body, h) for h in (
        {}, {"Authorization": "Bearer not-the-key"}, c.headers))
    ev = {"without_key": without.status_code, "wrong_key": wrong.status_code,
          "with_key": right.status_code}
    ok = without.status_code == 401 and wrong.status_code == 401 and right.status_code == 200
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"HTTP {without.status_code} without the key, {wrong.status_code} with a wrong "
            f"one, {right.status_code} with it" + ("" if ok else " (401, 401, 200 expected)"),
            ev)


PROBES: dict[str, tuple[str, bool, Probe]] = {
    "auth": (ROUTE, False, _auth),
    "error_bad_request": (ROUTE, False, _bad_request),
    "error_beyond_context": (ROUTE, False, _beyond_context),
}
