"""Async streaming client for OpenAI-compatible chat completions, one record per request.

Timing: `time.perf_counter()` at request send, at each SSE chunk that carries content, and at
the end of the stream. TTFT = first content chunk; ITL = gaps between content chunks; output
token counts come from the engine's `usage` block (stream_options.include_usage).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from infopt.loadgen.monitor import LoopLagProbe
from infopt.specs.results import RequestRecord

# A neutral vocabulary for synthetic prompts: common single-token English words for most BPE
# tokenizers, so the word count tracks the token count roughly (exact counts: issue 6).
_WORDS = ("time people year way day man thing woman life child world school state family "
          "student group country problem hand part place case week company system program "
          "question work government number night point home water room mother area money story "
          "fact month lot right study book eye job word business issue side kind head house "
          "service friend father power hour game line end member law car city community name").split()


def synthetic_prompt(request_id: str, approx_tokens: int, rng: random.Random) -> str:
    """A prompt whose first words are unique to the request, so no engine can serve it from a
    cached prefix (llama.cpp reuses repeated prompt prefixes)."""
    words = [rng.choice(_WORDS) for _ in range(max(1, approx_tokens - 8))]
    return f"Request {request_id}. Continue this list: " + " ".join(words)


@dataclass(frozen=True)
class RequestSpec:
    request_id: str
    prompt: str
    output_tokens: int
    concurrency: int


async def stream_chat(client: httpx.AsyncClient, url: str, model: str, spec: RequestSpec,
                      extra_body: dict[str, Any], phase_start: float) -> RequestRecord:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": spec.prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        **extra_body,
    }
    rec = RequestRecord(request_id=spec.request_id, concurrency=spec.concurrency, ok=False,
                        output_tokens_requested=spec.output_tokens)
    t0 = time.perf_counter()
    rec.start_offset_s = t0 - phase_start
    last = None
    gaps: list[float] = []
    try:
        async with aconnect_sse(client, "POST", url, json=body) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                rec.error = f"http_{source.response.status_code}: {source.response.text[:200]}"
                return rec
            async for event in source.aiter_sse():
                now = time.perf_counter()
                if event.data == "[DONE]":
                    break
                chunk = json.loads(event.data)
                usage = chunk.get("usage")
                if usage:
                    rec.prompt_tokens = usage.get("prompt_tokens")
                    rec.output_tokens = usage.get("completion_tokens")
                for choice in chunk.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        rec.content_chunks += 1
                        if last is None:
                            rec.ttft_s = now - t0
                        else:
                            gaps.append(now - last)
                        last = now
        rec.e2e_s = time.perf_counter() - t0
        rec.itl_s = gaps
        rec.ok = rec.ttft_s is not None
        if not rec.ok:
            rec.error = "no_content"
    except httpx.HTTPError as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:200]
    except json.JSONDecodeError as exc:
        rec.error = f"bad_sse_json: {exc}"[:200]
    return rec


async def run_closed_loop(url: str, model: str, specs: list[RequestSpec], concurrency: int,
                          extra_body: dict[str, Any],
                          on_done: Callable[[int, int], None] | None = None,
                          timeout_s: float = 600.0, probe: LoopLagProbe | None = None
                          ) -> tuple[list[RequestRecord], float]:
    """Closed loop: `concurrency` workers, each sends its next request when its last one ends.
    Returns the records (in completion order) and the phase's wall time in seconds. With
    `probe`, the client's event-loop lag is measured for the whole phase."""
    queue: asyncio.Queue[RequestSpec] = asyncio.Queue()
    for s in specs:
        queue.put_nowait(s)
    records: list[RequestRecord] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0),
                                 limits=limits) as client:
        phase_start = time.perf_counter()

        async def worker() -> None:
            while True:
                try:
                    spec = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                records.append(await stream_chat(client, url, model, spec, extra_body,
                                                 phase_start))
                if on_done:
                    on_done(len(records), len(specs))

        if probe is not None:
            async with probe:
                await asyncio.gather(*(worker() for _ in range(concurrency)))
        else:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall_s = time.perf_counter() - phase_start
    return records, wall_s
