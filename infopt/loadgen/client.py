"""Async HTTP client for OpenAI- and Anthropic-compatible routes, one record per request.

Timing: `time.perf_counter()` at request send, at each event that carries generated text, and
at the end of the answer. TTFT = first text event; ITL is per token: a gap of g seconds before a
chunk carrying k tokens gives k samples of g/k (k from the engine's running count when it sends
one, else 1 and the record says the count was assumed). Token totals come from the route's usage
block. Non-streamed requests have an E2E time only (no TTFT or ITL without a stream).

The stream is read to its end, past the route's end marker, so the connection goes back to the
pool (keep-alive): closing it early would make every request pay a new TCP connect. Servers that
close after every stream get `Connection: close` (see EngineAdapter.stream_keepalive); a pooled
connection found closed before any answer is retried once on a new one (`reconnects`).

Every request yields exactly one record, failed or not: no exception but cancellation leaves
`send_request`. A record keeps counts and timings only, never the response body (an error
keeps its first 200 characters), so its size depends on its output length, not on the run's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from infopt.loadgen.routes import DRIVERS, Chunk, RouteDriver, request_body
from infopt.specs.endpoint import StreamCounting
from infopt.specs.results import RequestRecord
from infopt.specs.traffic import RouteName

# httpcore's message when a reused keep-alive connection turns out closed before any response.
_STALE = "Server disconnected without sending a response"


@dataclass(frozen=True)
class RequestJob:
    request_id: str
    prompt: str
    output_tokens: int
    concurrency: int
    route: RouteName = RouteName.CHAT_COMPLETIONS
    stream: bool = True
    forced: dict[str, Any] = field(default_factory=dict)  # fields that force output_tokens
    counting: StreamCounting | None = None  # the engine's running count on every chunk
    prompt_tokens_requested: int | None = None  # set when the prompt length is exact
    # The most prompt tokens an engine's prefix cache may serve that the workload explains
    # (chat template + the request's declared shared prefix); None: unknown, not checked.
    prompt_tokens_cache_allowed: int | None = None
    close_connection: bool = False  # the server closes after a stream: ask for it up front
    # Sent as X-Session-ID, the header session-affinity routers hash (vllm-router's
    # consistent_hash reads it first): one per prefix group, else one per request.
    session_id: str | None = None


class _Stream:
    """Folds a route's events into one record; `now` is the event's arrival time."""

    def __init__(self, rec: RequestRecord, t0: float, counting: StreamCounting | None) -> None:
        self.rec, self.t0 = rec, t0
        self.read = counting.read if counting else None
        self.last: float | None = None
        self.cum = 0  # running output-token count reported by the engine
        self.counted = True  # every content chunk carried the engine's running count

    def add(self, c: Chunk, data: dict[str, Any], now: float) -> None:
        rec = self.rec
        if c.prompt_tokens is not None:
            rec.prompt_tokens = c.prompt_tokens
        if c.cached_tokens is not None:
            rec.prompt_tokens_cached = c.cached_tokens
        if c.output_tokens is not None:
            rec.output_tokens = c.output_tokens
        if c.draft_tokens is not None:
            rec.draft_tokens, rec.draft_tokens_accepted = c.draft_tokens, c.draft_accepted
        if not c.text:
            return
        if self.read is not None and (cum := self.read(data)) is not None:
            k = max(cum - self.cum, 1)
            self.cum = cum
        else:
            k, self.counted = 1, False
            self.cum += 1
        rec.content_chunks += 1
        if self.last is None:
            rec.ttft_s = now - self.t0
        else:
            gap = now - self.last
            rec.itl_s.extend([gap / k] * k)
        self.last = now

    def finish(self) -> None:
        self.rec.chunk_tokens_counted = self.counted if self.rec.content_chunks else None
        self.rec.streamed_tokens = self.cum


def _record(job: RequestJob) -> RequestRecord:
    """A failed record of `job`, before anything is measured."""
    return RequestRecord(request_id=job.request_id, concurrency=job.concurrency, ok=False,
                         output_tokens_requested=job.output_tokens, route=job.route.value,
                         stream=job.stream, prompt_tokens_requested=job.prompt_tokens_requested,
                         prompt_tokens_cache_allowed=job.prompt_tokens_cache_allowed)


def unsent_record(job: RequestJob, why: str) -> RequestRecord:
    """The record of a request the phase did not send (an earlier one found the engine
    hung): every planned request still yields exactly one record."""
    rec = _record(job)
    rec.error = f"NotSent: {why}"[:200]
    return rec


async def send_request(client: httpx.AsyncClient, base_url: str, model: str, job: RequestJob,
                       phase_start: float) -> RequestRecord:
    driver = DRIVERS[job.route]
    body = request_body(driver, model, job.prompt, job.forced, job.stream,
                        job.counting.request_fields if job.counting else {})
    url = f"{base_url.rstrip('/')}{driver.path}"
    rec = _record(job)
    headers = {"Connection": "close"} if job.close_connection and job.stream else {}
    if job.session_id is not None:
        headers["X-Session-ID"] = job.session_id
    t0 = time.perf_counter()
    rec.start_offset_s = t0 - phase_start
    for attempt in (1, 2):
        try:
            if job.stream:
                await _streamed(client, url, body, headers, driver, rec, t0, job.counting)
            else:
                await _whole(client, url, body, headers, driver, rec, t0)
        except httpx.RemoteProtocolError as exc:
            if attempt == 1 and _STALE in str(exc) and rec.content_chunks == 0:
                # A pooled connection the server had closed: no byte of this request was
                # answered, so send it again on a fresh connection (t0 stays: the lost
                # microseconds count against the measurement, never for it).
                rec.reconnects += 1
                continue
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
        except httpx.HTTPError as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
        except json.JSONDecodeError as exc:
            rec.error = f"bad_sse_json: {exc}"[:200]
        except Exception as exc:  # noqa: BLE001 - one record per request, whatever happened
            # Anything else (an OSError the transport let through, a malformed event a route
            # parser trips on) fails this request only: raising would end the whole phase
            # and lose the records of every stream still in flight.
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
        break
    return rec


async def _streamed(client: httpx.AsyncClient, url: str, body: dict[str, Any],
                    headers: dict[str, str], driver: RouteDriver, rec: RequestRecord,
                    t0: float, counting: StreamCounting | None) -> None:
    state = _Stream(rec, t0, counting)
    async with aconnect_sse(client, "POST", url, json=body, headers=dict(headers)) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            rec.error = f"http_{source.response.status_code}: {source.response.text[:200]}"
            return
        done = False
        async for event in source.aiter_sse():
            now = time.perf_counter()
            if done or not event.data:
                continue  # drain to the end of the body (keep-alive), ignoring trailers
            if event.data == "[DONE]":
                done = True
                continue
            data = json.loads(event.data)
            c = driver.parse_event(event.event, data)
            state.add(c, data, now)
            done = c.done
    rec.e2e_s = time.perf_counter() - t0
    state.finish()
    rec.ok = rec.ttft_s is not None
    if not rec.ok:
        rec.error = "no_content"


async def _whole(client: httpx.AsyncClient, url: str, body: dict[str, Any],
                 headers: dict[str, str], driver: RouteDriver, rec: RequestRecord,
                 t0: float) -> None:
    r = await client.post(url, json=body, headers=headers)
    rec.e2e_s = time.perf_counter() - t0
    if r.status_code != 200:
        rec.error = f"http_{r.status_code}: {r.text[:200]}"
        return
    c = driver.parse_body(r.json())
    rec.prompt_tokens, rec.output_tokens = c.prompt_tokens, c.output_tokens
    rec.prompt_tokens_cached = c.cached_tokens
    rec.draft_tokens, rec.draft_tokens_accepted = c.draft_tokens, c.draft_accepted
    rec.ok = bool(c.text) or bool(c.output_tokens)
    if not rec.ok:
        rec.error = "no_content"
