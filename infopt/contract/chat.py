"""Contract probes for OpenAI Chat Completions, streaming and non-streaming.

A probe passes only when the response has the shape a real client relies on: a 200, a choices
list with non-empty text, a finish_reason, and a usage block whose completion_tokens is what was
forced; the stream must be valid SSE ending in [DONE] with the usage chunk.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from infopt.specs.endpoint import Endpoint
from infopt.specs.results import ContractCheck

ROUTE = "/v1/chat/completions"
_PROBE_TOKENS = 8


def _body(model: str, stream: bool, forced: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
        "temperature": 0.0, "stream": stream, **forced,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def check_non_streaming(client: httpx.Client, base_url: str, model: str,
                        forced: dict[str, Any]) -> ContractCheck:
    r = client.post(f"{base_url}{ROUTE}", json=_body(model, False, forced))
    if r.status_code != 200:
        return ContractCheck(route=ROUTE, stream=False, ok=False,
                             detail=f"HTTP {r.status_code}: {r.text[:200]}")
    data = r.json()
    problems = []
    choices = data.get("choices") or []
    if not choices or not (choices[0].get("message") or {}).get("content"):
        problems.append("no message content")
    elif choices[0].get("finish_reason") is None:
        problems.append("no finish_reason")
    got = (data.get("usage") or {}).get("completion_tokens")
    if got != forced.get("max_tokens"):
        problems.append(f"usage.completion_tokens={got}, forced {forced.get('max_tokens')}")
    return ContractCheck(route=ROUTE, stream=False, ok=not problems,
                         detail="; ".join(problems) or f"200, {got} completion tokens, finish_reason "
                         f"{choices[0].get('finish_reason')}")


def check_streaming(client: httpx.Client, base_url: str, model: str,
                    forced: dict[str, Any]) -> ContractCheck:
    problems: list[str] = []
    text, usage, done, chunks = "", None, False, 0
    with client.stream("POST", f"{base_url}{ROUTE}", json=_body(model, True, forced)) as r:
        if r.status_code != 200:
            r.read()
            return ContractCheck(route=ROUTE, stream=True, ok=False,
                                 detail=f"HTTP {r.status_code}: {r.text[:200]}")
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            problems.append(f"content-type {r.headers.get('content-type')!r}, not text/event-stream")
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            chunk = json.loads(payload)
            chunks += 1
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                text += (choice.get("delta") or {}).get("content") or ""
    if not done:
        problems.append("stream did not end with data: [DONE]")
    if not text:
        problems.append("no streamed content")
    got = (usage or {}).get("completion_tokens")
    if got != forced.get("max_tokens"):
        problems.append(f"usage.completion_tokens={got}, forced {forced.get('max_tokens')}")
    return ContractCheck(route=ROUTE, stream=True, ok=not problems,
                         detail="; ".join(problems) or f"200 SSE, {chunks} chunks, {got} tokens, [DONE]")


def check_chat_contract(endpoint: Endpoint) -> list[ContractCheck]:
    forced = endpoint.forced_fields(_PROBE_TOKENS)
    with httpx.Client(timeout=60.0) as client:
        return [check_non_streaming(client, endpoint.base_url, endpoint.model, forced),
                check_streaming(client, endpoint.base_url, endpoint.model, forced)]
