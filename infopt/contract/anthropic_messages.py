"""Anthropic Messages (`POST /v1/messages`) through the official anthropic SDK: create, the
stream as `client.messages.stream()` reads it (every event valid as the SDK's typed event;
`message_start`, then content blocks, `message_delta`, `message_stop` last), a system prompt
that is not ignored, multi-turn, tool use with the tool result's turn, and `count_tokens` equal
to the prompt tokens `usage` bills for the same request (input + cache read + cache write: a
cross-check no existing suite makes)."""

from __future__ import annotations

import json
from typing import Any

from infopt.specs.contract import CheckStatus

from .chat_tools import CITY_ARGS, args_problem
from .context import Probe, ProbeContext, ProbeResult
from .sdk_streams import by_type, check_events, read_sse, run_helper, sdk_label

ROUTE = "/v1/messages"
_USER = [{"role": "user", "content": "Write two sentences about the sea."}]
_TOKENS = 16
_WEATHER = {"name": "get_weather", "description": "Current weather in a city.",
            "input_schema": CITY_ARGS}


# Greedy via extra_body: the anthropic SDK 2.x dropped `temperature` from create()'s
# signature; servers of this API still read it from the body.
_GREEDY = {"extra_body": {"temperature": 0.0}}


def _create(c: ProbeContext, **kw):
    body = {"model": c.model, "max_tokens": _TOKENS, "messages": _USER, **_GREEDY, **kw}
    return c.anthropic.messages.create(**body)


def total_input(usage) -> int:
    """The prompt's tokens: Anthropic's input_tokens counts only those not read from or
    written to the prompt cache (llama-server reports its prompt-cache hits as cache reads)."""
    return (usage.input_tokens + (usage.cache_read_input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0))


def _text(m) -> str:
    return "".join(b.text for b in m.content if b.type == "text")


def _create_probe(c: ProbeContext) -> ProbeResult:
    m = _create(c)
    problems = []
    if m.type != "message" or m.role != "assistant":
        problems.append(f"type {m.type!r}, role {m.role!r}")
    if not _text(m):
        problems.append("no text content block")
    if m.stop_reason not in ("end_turn", "max_tokens", "stop_sequence"):
        problems.append(f"stop_reason {m.stop_reason!r}")
    if not 0 < m.usage.output_tokens <= _TOKENS:
        problems.append(f"usage.output_tokens {m.usage.output_tokens}, max_tokens {_TOKENS}")
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"{m.usage.output_tokens} output tokens, stop_reason "
            f"{m.stop_reason}", m.model_dump())


def _stream(c: ProbeContext) -> ProbeResult:
    """As `client.messages.stream()` reads it (infopt.contract.sdk_streams): the helper run to
    its final message, every raw event valid as the SDK's RawMessageStreamEvent, and the
    order (message_start, content blocks, message_delta, message_stop last)."""
    from anthropic.types import RawMessageStreamEvent

    def helper():
        with c.anthropic.messages.stream(model=c.model, max_tokens=_TOKENS, messages=_USER,
                                         **_GREEDY) as stream:
            n = sum(1 for _ in stream)
            return n, _text(stream.get_final_message())
    ran, helper_error = run_helper(helper)
    # The headers the SDK sends: its key header and the API version it speaks.
    raw = read_sse(c, ROUTE, {"model": c.model, "max_tokens": _TOKENS, "messages": _USER,
                              "stream": True, **_GREEDY["extra_body"]},
                   headers={"anthropic-version": "2023-06-01",
                            **({"x-api-key": c.api_key} if c.api_key else {})})
    if raw.status != 200:
        return (CheckStatus.FAIL, f"the raw stream: HTTP {raw.status}: {raw.error}",
                {"helper": helper_error or "ok"})
    events = raw.events()
    # `ping` is no RawMessageStreamEvent: the SDK skips it (keep-alive).
    typed = check_events(events, sdk_label("anthropic"),
                         by_type(RawMessageStreamEvent, skip=("ping",)))
    # Each event's "type" as its JSON holds it (None: not an object). Any, not str | None: the
    # join below takes them as text; a non-str raises TypeError there, a shape failure that
    # run_probe reports.
    kinds: list[Any] = [e.get("type") if e else None for e in events]
    deltas = "".join(str((e.get("delta") or {}).get("text") or "") for e in events
                     if e and e.get("type") == "content_block_delta")
    core = [k for k in kinds if k != "ping"]
    problems = [f"client.messages.stream() raises {helper_error}"] if helper_error else []
    problems += [typed.summary()] if not typed.ok else []
    problems += [raw.framing] if raw.framing else []
    if core[:1] != ["message_start"] or core[-1:] != ["message_stop"]:
        problems.append(f"events start {core[:1]} and end {core[-1:]}: message_start ... "
                        "message_stop expected")
    if "message_delta" not in core or core.index("message_delta") < max(
            (i for i, k in enumerate(core) if k == "content_block_stop"), default=0):
        problems.append("message_delta missing or before the last content_block_stop")
    if not deltas:
        problems.append("no text_delta events")
    if not helper_error and not ran[1]:
        problems.append("client.messages.stream() gives a final message without text")
    evidence = {"event_types": kinds[:40], "text": deltas, "typed": typed.evidence(),
                "helper": helper_error or f"read {ran[0]} events to the final message"}
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"client.messages.stream() reads it to the end; "
            f"{len(core)} events in order, each valid as {typed.sdk}'s typed event: "
            + " ".join(dict.fromkeys(core)), evidence)


def _system(c: ProbeContext) -> ProbeResult:
    """Greedy answers with and without a system prompt must differ (else it was ignored)."""
    plain = _text(_create(c))
    told = _text(_create(c, system="You are a pirate. Answer only in pirate speech."))
    ok = plain != told
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            "the system prompt changes the greedy answer" if ok else
            f"the same greedy answer with and without system: {plain[:60]!r}",
            {"without": plain, "with": told})


def _multi_turn(c: ProbeContext) -> ProbeResult:
    """The earlier turns reach the model: more input tokens than the last turn alone."""
    turns = [*_USER, {"role": "assistant", "content": "The sea is wide. It is deep."},
             {"role": "user", "content": "Now one more sentence."}]
    full, last = _create(c, messages=turns), _create(c, messages=turns[-1:])
    n_full, n_last = total_input(full.usage), total_input(last.usage)
    ok = bool(_text(full)) and n_full > n_last
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"3 turns: {n_full} prompt tokens vs {n_last} for the last alone"
            + ("" if ok else " (the earlier turns were dropped?)"),
            {"full": full.model_dump(), "last_only_prompt_tokens": n_last})


def _tools(c: ProbeContext) -> ProbeResult:
    ask = [{"role": "user", "content": "What is the weather in Paris? Use get_weather."}]
    m = _create(c, messages=ask, tools=[_WEATHER], max_tokens=96,
                tool_choice={"type": "tool", "name": "get_weather"})
    uses = [b for b in m.content if b.type == "tool_use"]
    if not uses:
        return (CheckStatus.FAIL, f"no tool_use block (blocks: {[b.type for b in m.content]}, "
                f"stop_reason {m.stop_reason})", m.model_dump())
    if (p := args_problem(json.dumps(uses[0].input), CITY_ARGS)) or m.stop_reason != "tool_use":
        return (CheckStatus.FAIL, p or f"stop_reason {m.stop_reason!r}, tool_use expected",
                m.model_dump())
    follow = _create(c, tools=[_WEATHER], messages=[*ask, {"role": "assistant", "content": [
        b.model_dump() for b in m.content]}, {"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": uses[0].id, "content": "18 C, clear sky"}]}])
    ok = bool(_text(follow))
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"tool_use {uses[0].input}, then a text answer to the tool_result" if ok else
            "no text answer after the tool_result", {"tool_use": m.model_dump(),
                                                    "answer": follow.model_dump()})


def _count_tokens(c: ProbeContext) -> ProbeResult:
    counted = c.anthropic.messages.count_tokens(model=c.model, messages=_USER)
    usage = _create(c).usage
    ok = counted.input_tokens == total_input(usage)
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"count_tokens {counted.input_tokens}, usage input {usage.input_tokens} + cache "
            f"read {usage.cache_read_input_tokens or 0} + cache write "
            f"{usage.cache_creation_input_tokens or 0} = {total_input(usage)}",
            {"count_tokens": counted.input_tokens, "usage": usage.model_dump()})


PROBES: dict[str, tuple[str, bool, Probe]] = {
    "messages_create": (ROUTE, False, _create_probe),
    "messages_stream": (ROUTE, True, _stream),
    "messages_system": (ROUTE, False, _system),
    "messages_multi_turn": (ROUTE, False, _multi_turn),
    "messages_tools": (ROUTE, False, _tools),
    "messages_count_tokens": (ROUTE + "/count_tokens", False, _count_tokens),
}
