"""OpenAI Responses (`POST /v1/responses`) through the openai SDK: create, the stream as
`client.responses.stream()` reads it (every event valid as the SDK's typed event,
`response.created` first, `response.completed` last, the `output_text` deltas concatenating to
the final text), a function tool, and `text.format` json_schema validated against the
schema."""

from __future__ import annotations

import json
from typing import Any, overload

from openai.types.responses import FunctionToolParam

from infopt.specs.contract import CheckStatus

from .chat_tools import CITY_ARGS, args_problem
from .context import Probe, ProbeContext, ProbeResult
from .openai_chat import CITY_SCHEMA
from .sdk_streams import by_type, check_events, read_sse, run_helper, sdk_label

ROUTE = "/v1/responses"
_INPUT = "Write two sentences about the sea."
_TOKENS = 16


def _create(c: ProbeContext) -> ProbeResult:
    r = c.sdk.responses.create(model=c.model, input=_INPUT, max_output_tokens=_TOKENS,
                               temperature=0.0)
    problems = []
    if not r.output_text:
        problems.append("no output_text")
    if r.status != "completed" and not (r.status == "incomplete"
                                        and r.incomplete_details is not None):
        problems.append(f"status {r.status!r}")
    if r.usage is None or not r.usage.output_tokens:
        problems.append("no usage.output_tokens")
    elif r.usage.output_tokens > _TOKENS:
        problems.append(f"{r.usage.output_tokens} output tokens > max_output_tokens {_TOKENS}")
    if problems:
        return CheckStatus.FAIL, "; ".join(problems), r.model_dump()
    assert r.usage is not None  # else "no usage.output_tokens" is among the problems
    return (CheckStatus.PASS, f"status {r.status}, {r.usage.output_tokens} output tokens",
            r.model_dump())


# An event always gives a text (perhaps empty): only None gives None.
@overload
def _final_text(event: dict[str, Any]) -> str: ...
@overload
def _final_text(event: None) -> None: ...
def _final_text(event: dict[str, Any] | None) -> str | None:
    """The output text of a raw `response.completed` event (None: no such event)."""
    if event is None:
        return None
    return "".join(part.get("text") or "" for item in (event.get("response") or {}).get(
        "output") or [] if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or [] if isinstance(part, dict)
        and part.get("type") == "output_text")


def _stream(c: ProbeContext) -> ProbeResult:
    """As `client.responses.stream()` reads it (infopt.contract.sdk_streams): the helper run
    to its final response, and every raw event valid as the SDK's typed event; then the
    order (`response.created` first, `response.completed` last) and the `output_text` deltas
    concatenating to the final text."""
    from openai.types.responses import ResponseStreamEvent

    args = {"model": c.model, "input": _INPUT, "temperature": 0.0,
            "max_output_tokens": _TOKENS}

    def helper():
        with c.sdk.responses.stream(**args) as stream:
            n = sum(1 for _ in stream)
            return n, stream.get_final_response().output_text
    ran, helper_error = run_helper(helper)
    raw = read_sse(c, ROUTE, {**args, "stream": True})
    if raw.status != 200:
        return (CheckStatus.FAIL, f"the raw stream: HTTP {raw.status}: {raw.error}",
                {"helper": helper_error or "ok"})
    events = raw.events()
    typed = check_events(events, sdk_label("openai"), by_type(ResponseStreamEvent))
    kinds = [e.get("type") if e else None for e in events]
    deltas = "".join(str(e.get("delta") or "") for e in events
                     if e and e.get("type") == "response.output_text.delta")
    final = next((e for e in events if e and e.get("type") in ("response.completed",
                                                               "response.incomplete")), None)
    problems = [f"client.responses.stream() raises {helper_error}"] if helper_error else []
    problems += [typed.summary()] if not typed.ok else []
    problems += [raw.framing] if raw.framing else []
    if kinds[:1] != ["response.created"]:
        problems.append(f"first event {kinds[:1]}, response.created expected")
    if kinds[-1:] not in (["response.completed"], ["response.incomplete"]):
        problems.append(f"last event {kinds[-1:]}, response.completed expected")
    if not deltas:
        problems.append("no response.output_text.delta events")
    elif final is not None and _final_text(final) != deltas:
        problems.append(f"deltas {deltas[:40]!r} differ from the final text "
                        f"{_final_text(final)[:40]!r}")
    if not helper_error and not ran[1]:
        problems.append("client.responses.stream() gives a final response without output_text")
    evidence = {"event_types": kinds[:40], "deltas": deltas, "typed": typed.evidence(),
                "helper": helper_error or f"read {ran[0]} events to the final response"}
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"client.responses.stream() reads it to the end; "
            f"{len(kinds)} events in order, each valid as {typed.sdk}'s typed event; "
            "deltas = final text", evidence)


def _tools(c: ProbeContext) -> ProbeResult:
    tool: FunctionToolParam = {"type": "function", "name": "get_weather",
                               "description": "Current weather in a city.",
                               "parameters": CITY_ARGS, "strict": True}
    r = c.sdk.responses.create(model=c.model, input="What is the weather in Paris? Use the "
                               "get_weather tool.", tools=[tool], tool_choice="required",
                               temperature=0.0, max_output_tokens=96)
    calls = [o for o in r.output if o.type == "function_call"]
    if not calls:
        return (CheckStatus.FAIL, f"no function_call output item (items: "
                f"{[o.type for o in r.output]})", r.model_dump())
    problems = [p for o in calls if (p := args_problem(o.arguments, CITY_ARGS))]
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"{len(calls)} function_call item(s) with valid arguments",
            r.model_dump())


def _json_schema(c: ProbeContext) -> ProbeResult:
    import jsonschema

    r = c.sdk.responses.create(
        model=c.model, input="Give a city and its population as JSON with keys name and "
        "population.", temperature=0.0, max_output_tokens=64,
        text={"format": {"type": "json_schema", "name": "city", "schema": CITY_SCHEMA,
                         "strict": True}})
    text = r.output_text or ""
    try:
        errors = [e.message for e in jsonschema.Draft202012Validator(CITY_SCHEMA)
                  .iter_errors(json.loads(text))]
    except json.JSONDecodeError as exc:
        errors = [f"not JSON ({exc.msg})"]
    return (CheckStatus.FAIL if errors else CheckStatus.PASS,
            f"text.format json_schema: {'; '.join(errors)[:160]}: {text[:60]!r}" if errors
            else f"text.format json_schema: valid: {text[:60]!r}", {"output_text": text})


PROBES: dict[str, tuple[str, bool, Probe]] = {
    "responses_create": (ROUTE, False, _create),
    "responses_stream": (ROUTE, True, _stream),
    "responses_tools": (ROUTE, False, _tools),
    "responses_json_schema": (ROUTE, False, _json_schema),
}
