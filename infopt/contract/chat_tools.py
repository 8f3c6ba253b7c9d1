"""Tool calling on Chat Completions, through the openai SDK: `tool_choice` auto, required and
named, arguments that parse and validate against the tool's schema, the second turn with the
tool's result, and parallel calls. A call is support only when it comes back as `tool_calls`
(text that merely looks like a call is a failure: no client would run it)."""

from __future__ import annotations

import json
from typing import Any

from infopt.specs.contract import CheckStatus

from .context import Probe, ProbeContext, ProbeResult

ROUTE = "/v1/chat/completions"
CITY_ARGS = {"type": "object", "additionalProperties": False, "required": ["city"],
             "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 40}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.", "parameters": CITY_ARGS}}
CLOCK = {"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a city.", "parameters": CITY_ARGS}}
_ASK = [{"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}]
_ASK_TWO = [{"role": "user", "content": "What is the weather in Paris and in Tokyo? Call "
             "get_weather once for each city."}]
_TOKENS = 96


def _call(c: ProbeContext, messages, tools, tool_choice, **kw):
    return c.sdk.chat.completions.create(model=c.model, messages=messages, tools=tools,
                                         tool_choice=tool_choice, temperature=0.0,
                                         max_tokens=_TOKENS, **kw)


def args_problem(arguments: str, schema: dict[str, Any]) -> str | None:
    """Why a call's arguments would not run (None: they parse and fit the schema)."""
    import jsonschema

    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, TypeError) as exc:
        return f"arguments are not JSON ({exc})"
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(args)]
    return "; ".join(errors)[:200] or None


def _judge(r, want: int, name: str | None) -> ProbeResult:
    msg = r.choices[0].message
    calls = msg.tool_calls or []
    ev = {"tool_calls": [tc.model_dump() for tc in calls], "content": msg.content,
          "finish_reason": r.choices[0].finish_reason}
    if len(calls) < want:
        return (CheckStatus.FAIL, f"{len(calls)} tool call(s), {want} expected; the answer "
                f"was text: {(msg.content or '')[:80]!r}", ev)
    problems = [f"{tc.function.name}: {p}" for tc in calls
                if (p := args_problem(tc.function.arguments, CITY_ARGS))]
    if name and any(tc.function.name != name for tc in calls):
        problems.append(f"called {[tc.function.name for tc in calls]}, {name} was named")
    if len({tc.id for tc in calls}) != len(calls):
        problems.append("tool call ids are not unique")
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"{len(calls)} call(s) "
            f"{[tc.function.name for tc in calls]} with valid arguments", ev)


def _auto(c: ProbeContext) -> ProbeResult:
    return _judge(_call(c, _ASK, [WEATHER], "auto"), 1, None)


def _required(c: ProbeContext) -> ProbeResult:
    return _judge(_call(c, _ASK, [WEATHER, CLOCK], "required"), 1, None)


def _named(c: ProbeContext) -> ProbeResult:
    choice = {"type": "function", "function": {"name": "get_time"}}  # not the obvious one
    return _judge(_call(c, _ASK, [WEATHER, CLOCK], choice), 1, "get_time")


def _parallel(c: ProbeContext) -> ProbeResult:
    return _judge(_call(c, _ASK_TWO, [WEATHER], "required", parallel_tool_calls=True), 2, None)


def _second_turn(c: ProbeContext) -> ProbeResult:
    """The tool's result goes back; the answer must be text (not an error, not empty)."""
    messages = [*_ASK, {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_probe_1", "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_probe_1",
         "content": json.dumps({"temperature_c": 18, "sky": "clear"})}]
    r = _call(c, messages, [WEATHER], "none")
    text = r.choices[0].message.content or ""
    return (CheckStatus.PASS if text.strip() else CheckStatus.FAIL,
            f"answer after the tool result: {text[:60]!r}" if text.strip() else
            "no text answer after the tool result", {"messages": messages, "content": text})


PROBES: dict[str, tuple[str, bool, Probe]] = {
    "tools_auto": (ROUTE, False, _auto),
    "tools_required": (ROUTE, False, _required),
    "tools_named": (ROUTE, False, _named),
    "tools_parallel": (ROUTE, False, _parallel),
    "tools_second_turn": (ROUTE, False, _second_turn),
}
