"""Run a schedule against any OpenAI-compatible endpoint: prompts -> warm-up -> measured phase.

Closed loop (no send times): `concurrency` workers, each sends its next request when its last
one ends. Open loop (Poisson, constant, bursts): every request is sent at its scheduled offset
whatever is in flight, so queueing shows up in TTFT as it would for real users. Warm-up requests
run first and are discarded. Prompts: a shared prefix text per prefix group (reuse is the point),
otherwise a prefix unique to the request (no engine prefix cache can serve it).

Exact prompt lengths: with the engine's tokenizer (`counter`), each prompt's content is grown to
an exact token count, and the tokens a route's template adds around it (chat template, BOS) are
measured once per route with a one-token request, so `usage.prompt_tokens` equals the planned
`input_tokens`. All of this happens before any clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from infopt.analysis.records import ErrorKind, classify_error
from infopt.loadgen.capacity import ensure_open_files, pool_shards
from infopt.loadgen.client import RequestJob, send_request, unsent_record
from infopt.loadgen.monitor import (
    ClientHealth,
    EngineUsage,
    GpuSampler,
    LoopLagProbe,
    ResourceSampler,
)
from infopt.loadgen.routes import DRIVERS, request_body
from infopt.loadgen.schedule import Phase, PlannedRequest
from infopt.loadgen.tokens import Counter, approximate_prompt, exact_prompt
from infopt.specs.endpoint import Endpoint
from infopt.specs.results import RequestRecord
from infopt.specs.traffic import RouteName

Forced = Callable[[int], dict[str, Any]]


@dataclass(frozen=True)
class Prompt:
    text: str
    tokens: int | None  # the whole prompt as the engine will count it; None: approximate
    # Cached prompt tokens the workload explains (template + declared shared prefix + the
    # unique head, whose first tokens two requests may share); None: not known, not checked.
    cache_allowed: int | None = None


@dataclass(frozen=True)
class PhaseResult:
    records: list[RequestRecord]  # the measured phase, in completion order
    wall_s: float  # first measured send to last measured answer
    client: ClientHealth
    engine: EngineUsage


def route_overhead(base_url: str, model: str, route: RouteName, counter: Counter,
                   forced: Forced, timeout_s: float = 120.0) -> int | None:
    """Tokens the route adds around the prompt text (chat template, BOS): usage.prompt_tokens of
    a one-token request minus the tokenizer's count of its text. None if usage is missing."""
    text = "Request overhead-probe. Continue this list: time people year"
    driver = DRIVERS[route]
    body = request_body(driver, model, text, forced(1), False, {})
    r = httpx.post(f"{base_url.rstrip('/')}{driver.path}", json=body, timeout=timeout_s)
    r.raise_for_status()
    used = driver.parse_body(r.json()).prompt_tokens
    return None if used is None else used - counter(text)


def build_prompts(planned: list[PlannedRequest], seed: int, counter: Counter | None,
                  overheads: dict[RouteName, int | None], nonce: str = "") -> dict[str, Prompt]:
    """Prompt per request id: the group's shared prefix (if any), then words unique to the
    request; exact when a counter and the route's overhead are known. `nonce` makes the text
    unique to one run (the same workload file run twice must not hit the first run's cache)."""
    shared_text: dict[int, str] = {}
    shared_tokens: dict[int, int] = {}  # counted once per group, not once per request
    out: dict[str, Prompt] = {}
    for req in planned:
        head, head_tokens = "", 0
        if req.prefix_group is not None and req.prefix_tokens > 0:
            g = req.prefix_group
            if g not in shared_text:
                group = f"{nonce}/shared-prefix-{g}"
                shared_text[g] = (exact_prompt(group, req.prefix_tokens, counter, seed)[0]
                                  if counter else approximate_prompt(group, req.prefix_tokens,
                                                                     seed)) + "\n"
            head = shared_text[g]
            if counter is not None and g not in shared_tokens:
                shared_tokens[g] = counter(head)
            head_tokens = shared_tokens.get(g, 0)
        overhead = overheads.get(req.route)
        key = f"{nonce}/{req.request_id}"
        if counter is None or overhead is None:
            own = max(1, req.input_tokens - req.prefix_tokens)
            out[req.request_id] = Prompt(head + approximate_prompt(key, own, seed), None)
            continue
        target = max(1, req.input_tokens - overhead)
        text, got = exact_prompt(key, target, counter, seed, prefix=head)
        unique_head = text[:text.index(": ") + 2] if ": " in text else ""
        allowed = overhead + head_tokens + counter(unique_head)
        out[req.request_id] = Prompt(head + text, got + overhead, allowed)
    return out


async def drive(base_url: str, model: str, jobs: list[RequestJob], concurrency: int,
                offsets_s: list[float] | None = None, *, timeout_s: float = 600.0,
                on_done: Callable[[int, int], None] | None = None,
                probe: LoopLagProbe | None = None) -> tuple[list[RequestRecord], float, float]:
    """Send `jobs`: a closed loop of `concurrency` workers (offsets_s None), else each job at its
    offset from the start. Returns (records in completion order, wall time, the start's
    perf_counter value, so record offsets can be made absolute)."""
    ensure_open_files(concurrency)
    # Keep-alive for every concurrent stream (a reconnect per request would add to TTFT), in
    # pools of at most POOL_STREAMS connections (httpcore's pool costs O(n^2) per request,
    # see infopt.loadgen.capacity).
    # A closed loop's shard never has more requests in flight than workers, so capping its
    # connections costs no wait and keeps the sockets at `concurrency`, the file descriptors
    # counted above; an open loop must never queue in the client, so it has no cap.
    shards = pool_shards(concurrency)
    per_shard = math.ceil(max(concurrency, 1) / shards)
    limits = httpx.Limits(max_connections=per_shard if offsets_s is None else None,
                          max_keepalive_connections=per_shard * (1 if offsets_s is None else 2))
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    tls = httpx.create_ssl_context()  # one for all shards: each costs ~0.9 MB and ~20 ms
    records: list[RequestRecord] = []
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(
            httpx.AsyncClient(timeout=timeout, limits=limits, verify=tls))
            for _ in range(shards)]
        start = time.perf_counter()
        # Set by the first request that got nothing for `timeout_s`: the engine hung, and
        # every later request would wait as long, so the rest are recorded as not sent.
        stalled: list[str] = []

        async def one(client: httpx.AsyncClient, job: RequestJob) -> None:
            if stalled:
                rec = unsent_record(job, stalled[0])
            else:
                rec = await send_request(client, base_url, model, job, start)
                if not rec.ok and classify_error(rec.error) is ErrorKind.TIMEOUT:
                    stalled.append(f"request {rec.request_id} got nothing from the engine "
                                   f"for {timeout_s:.0f} s")
            records.append(rec)
            if on_done:
                on_done(len(records), len(jobs))

        async def phase() -> None:
            if offsets_s is None:
                queue = list(reversed(jobs))

                async def worker(client: httpx.AsyncClient) -> None:
                    while queue:
                        await one(client, queue.pop())

                await asyncio.gather(*(worker(clients[w % shards])
                                       for w in range(concurrency)))
                return

            async def at(job: RequestJob, offset_s: float, client: httpx.AsyncClient) -> None:
                delay = offset_s - (time.perf_counter() - start)
                if delay > 0:
                    await asyncio.sleep(delay)
                await one(client, job)

            await asyncio.gather(*(at(j, o, clients[i % shards])
                                   for i, (j, o) in enumerate(zip(jobs, offsets_s, strict=True))))

        if probe is None:
            await phase()
        else:
            async with probe:
                await phase()
        wall = time.perf_counter() - start
    return records, wall, start


def _phase_jobs(reqs: list[PlannedRequest], jobs: dict[str, RequestJob]
                ) -> tuple[list[RequestJob], list[float] | None]:
    """The phase's jobs in send order, and send offsets from its first send (None: closed)."""
    if not reqs or all(r.send_offset_s is None for r in reqs):
        return [jobs[r.request_id] for r in reqs], None
    first = min((r.send_offset_s or 0.0) for r in reqs)
    return ([jobs[r.request_id] for r in reqs],
            [(r.send_offset_s or 0.0) - first for r in reqs])


def run_schedule(endpoint: Endpoint, planned: list[PlannedRequest], concurrency: int, *,
                 seed: int, timeout_s: float = 600.0,
                 progress: Callable[[int, int], None] | None = None,
                 counter: Counter | None = None, gpu: GpuSampler | None = None,
                 nonce: str | None = None) -> PhaseResult:
    """Warm-up (discarded), then the measured phase, with the client's event-loop lag, and the
    server's CPU/memory (when the endpoint names its pid) and the GPUs sampled during it.
    `gpu`: the NVML sampler (default: nvidia-ml-py; tests pass a recorded backend)."""
    base_url, model, forced = endpoint.base_url, endpoint.model, endpoint.forced_fields
    overheads = ({route: route_overhead(base_url, model, route, counter, forced)
                  for route in {r.route for r in planned}} if counter else {})
    # A fresh nonce per call unless given: prompts are unique to this run, not only this seed.
    nonce = secrets.token_hex(4) if nonce is None else nonce
    prompts = build_prompts(planned, seed, counter, overheads, nonce)
    jobs = {r.request_id: RequestJob(
        request_id=r.request_id, prompt=prompts[r.request_id].text, output_tokens=r.output_tokens,
        concurrency=concurrency, route=r.route, stream=r.stream, forced=forced(r.output_tokens),
        counting=endpoint.stream_counting, prompt_tokens_requested=prompts[r.request_id].tokens,
        prompt_tokens_cache_allowed=prompts[r.request_id].cache_allowed,
        close_connection=not endpoint.keepalive,
        session_id=(f"{nonce}-group-{r.prefix_group}" if r.prefix_group is not None
                    else f"{nonce}-{r.request_id}"))
        for r in planned}
    warm = [r for r in planned if r.phase is Phase.WARMUP]
    if warm:
        warm_jobs, warm_offsets = _phase_jobs(warm, jobs)
        asyncio.run(drive(base_url, model, warm_jobs, concurrency, warm_offsets,
                          timeout_s=timeout_s))
    measured_jobs, offsets = _phase_jobs([r for r in planned if r.phase is Phase.MEASURED], jobs)
    probe = LoopLagProbe()
    with ResourceSampler(endpoint.pid, gpu=gpu or GpuSampler()) as sampler:
        records, wall, _ = asyncio.run(drive(base_url, model, measured_jobs, concurrency,
                                             offsets, timeout_s=timeout_s, on_done=progress,
                                             probe=probe))
    return PhaseResult(records, wall, probe.result(), sampler.result())
