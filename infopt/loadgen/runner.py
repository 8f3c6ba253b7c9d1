"""Run a TrafficSpec against any OpenAI-compatible endpoint: schedule -> prompts -> requests.

Closed loop (no send times): `concurrency` workers, each sends its next request when its last
one ends. Open loop (Poisson, constant, bursts): every request is sent at its scheduled offset
whatever is in flight, so queueing shows up in TTFT as it would for real users. Warm-up requests
run first and are discarded. Prompts: a shared prefix text per prefix group (reuse is the point),
otherwise a prefix unique to the request (no engine prefix cache can serve it).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx

from infopt.loadgen.client import RequestSpec, stream_chat, synthetic_prompt
from infopt.loadgen.monitor import ClientHealth, LoopLagProbe
from infopt.loadgen.schedule import Phase, PlannedRequest
from infopt.loadgen.tokens import Counter, exact_prompt
from infopt.specs.base import InputError
from infopt.specs.results import RequestRecord
from infopt.specs.traffic import RouteName

SUPPORTED_ROUTES = {RouteName.CHAT_COMPLETIONS}


def prompt_for(req: PlannedRequest, seed: int, counter: Counter | None = None) -> str:
    """Prompt text of input_tokens tokens (exact with `counter`, the engine's tokenizer; else
    approximate): the group's shared prefix, then words unique to the request."""
    own = max(1, req.input_tokens - req.prefix_tokens)
    if counter is not None:
        unique = exact_prompt(req.request_id, own, counter, seed)[0]
    else:
        unique = synthetic_prompt(req.request_id, own, random.Random(f"{seed}:{req.request_id}"))
    if req.prefix_group is None or req.prefix_tokens <= 0:
        return unique
    group = f"shared-prefix-{req.prefix_group}"
    shared = (exact_prompt(group, req.prefix_tokens, counter, seed)[0] if counter is not None
              else synthetic_prompt(group, req.prefix_tokens,
                                    random.Random(f"{seed}:group:{req.prefix_group}")))
    return shared + "\n" + unique


def check_routes(planned: list[PlannedRequest]) -> None:
    bad = sorted({r.route.value for r in planned} - {r.value for r in SUPPORTED_ROUTES})
    if bad:
        raise InputError(f"routes {bad} are not driven by the load generator yet; use "
                         f"{[r.value for r in SUPPORTED_ROUTES]} in the workload's `routes`")
    if any(not r.stream for r in planned):
        raise InputError("non-streamed requests are not measured yet (TTFT/ITL need a "
                         "stream); set `stream: true` on every route")


async def _run(url: str, model: str, planned: list[PlannedRequest], concurrency: int,
               forced: Callable[[int], dict[str, Any]], seed: int, timeout_s: float,
               on_done: Callable[[int, int], None] | None, probe: LoopLagProbe,
               prompts: dict[str, str]) -> tuple[list[RequestRecord], float]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=concurrency)
    records: list[RequestRecord] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0),
                                 limits=limits) as client:
        start = time.perf_counter()

        async def one(req: PlannedRequest) -> None:
            spec = RequestSpec(req.request_id, prompts[req.request_id], req.output_tokens,
                               concurrency)
            records.append(await stream_chat(client, url, model, spec,
                                             forced(req.output_tokens), start))
            if on_done:
                on_done(len(records), len(planned))

        async with probe:
            if all(r.send_offset_s is None for r in planned):
                queue = list(reversed(planned))

                async def worker() -> None:
                    while queue:
                        await one(queue.pop())

                await asyncio.gather(*(worker() for _ in range(concurrency)))
            else:
                async def at(req: PlannedRequest) -> None:
                    delay = (req.send_offset_s or 0.0) - (time.perf_counter() - start)
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await one(req)

                await asyncio.gather(*(at(r) for r in planned))
        wall = time.perf_counter() - start
    return records, wall


def run_schedule(base_url: str, model: str, planned: list[PlannedRequest], concurrency: int,
                 forced: Callable[[int], dict[str, Any]], *, seed: int,
                 timeout_s: float = 600.0, progress: Callable[[int, int], None] | None = None,
                 counter: Counter | None = None
                 ) -> tuple[list[RequestRecord], float, ClientHealth]:
    """Warm-up (discarded), then the measured phase. Returns the measured records, the measured
    phase's wall time and the client's event-loop health during it."""
    check_routes(planned)
    # Prompts are built before any clock starts: tokenizer round trips never land in a timing.
    prompts = {r.request_id: prompt_for(r, seed, counter) for r in planned}
    url = f"{base_url.rstrip('/')}/v1/chat/completions"
    warm = [r for r in planned if r.phase is Phase.WARMUP]
    measured = [r for r in planned if r.phase is Phase.MEASURED]
    if warm:
        first = min((r.send_offset_s or 0.0) for r in warm)
        warm = [_shift(r, first) for r in warm]
        asyncio.run(_run(url, model, warm, concurrency, forced, seed, timeout_s, None,
                         LoopLagProbe(), prompts))
    if measured:
        first = min((r.send_offset_s or 0.0) for r in measured)
        measured = [_shift(r, first) for r in measured]
    probe = LoopLagProbe()
    records, wall = asyncio.run(_run(url, model, measured, concurrency, forced, seed,
                                     timeout_s, progress, probe, prompts))
    return records, wall, probe.result()


def _shift(r: PlannedRequest, by: float) -> PlannedRequest:
    if r.send_offset_s is None:
        return r
    return replace(r, send_offset_s=r.send_offset_s - by)
