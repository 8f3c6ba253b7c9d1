"""OpenAI Responses (`POST /v1/responses`) through the openai SDK: create, the streaming event
sequence (`response.created` first, `response.completed` last, the `output_text` deltas
concatenating to the final text), a function tool, and `text.format` json_schema validated
against the schema."""

from __future__ import annotations

import json

from infopt.specs.contract import CheckStatus

from .chat_tools import CITY_ARGS, args_problem
from .context import Probe, ProbeContext, ProbeResult
from .openai_chat import CITY_SCHEMA

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
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"status {r.status}, {r.usage.output_tokens} output tokens",
            r.model_dump())


def _stream(c: ProbeContext) -> ProbeResult:
    events = list(c.sdk.responses.create(model=c.model, input=_INPUT, temperature=0.0,
                                         max_output_tokens=_TOKENS, stream=True))
    kinds = [e.type for e in events]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = next((e.response for e in events if e.type in ("response.completed",
                                                           "response.incomplete")), None)
    problems = []
    if not kinds or kinds[0] != "response.created":
        problems.append(f"first event {kinds[:1]}, response.created expected")
    if not kinds or kinds[-1] not in ("response.completed", "response.incomplete"):
        problems.append(f"last event {kinds[-1:]}, response.completed expected")
    if not deltas:
        problems.append("no response.output_text.delta events")
    elif final is not None and final.output_text != deltas:
        problems.append(f"deltas {deltas[:40]!r} differ from the final text "
                        f"{final.output_text[:40]!r}")
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"{len(kinds)} events in order, deltas = final text",
            {"event_types": kinds[:40], "deltas": deltas})


def _tools(c: ProbeContext) -> ProbeResult:
    tool = {"type": "function", "name": "get_weather", "description": "Current weather in a "
            "city.", "parameters": CITY_ARGS, "strict": True}
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
