"""Streams as the official SDKs' helpers read them: every event checked against the SDK's own
typed event model, required fields included, and the helper itself run to the end.

Why both: the SDKs build their event objects with pydantic's construct(), which validates
nothing, so a raw `for event in client.responses.create(..., stream=True)` survives an event
that lacks a required field (it reads as None). Their streaming helpers then index with it:
openai's `client.responses.stream()` accumulates `output.content[event.content_index]` and
raises TypeError on llama-server's events, which carry no output_index/content_index. So a
route is checked as a client written against the SDK consumes it:
- the raw SSE events (httpx + httpx-sse: the wire as sent), each validated explicitly against
  the model the SDK's event union gives its `type` (openai.types.responses.ResponseStreamEvent,
  openai.types.chat.ChatCompletionChunk, anthropic.types.RawMessageStreamEvent): a missing
  required field is named with the event, its index in the stream and the model requiring it;
- the helper (`client.responses.stream()`, `client.chat.completions.stream()`,
  `client.messages.stream()`), read to its final object: whatever it raises is the failure a
  client would see.
Events of a type the SDK does not know are listed in the evidence, not failed: the SDKs pass
them through, and servers may add events.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
import pydantic
from httpx_sse import connect_sse

from .context import ProbeContext, sdk_errors

# How much of the findings a check's detail carries (the evidence file has every event).
_DETAIL_CHARS = 900


def sdk_label(dist: str) -> str:
    """'openai 3.60.0': which SDK's models a verdict was made against."""
    try:
        return f"{dist} {version(dist)}"
    except PackageNotFoundError:
        return dist


@cache
def union_models(union: Any) -> dict[str, type[pydantic.BaseModel]]:
    """The members of an SDK's event union (`Annotated[Union[...], ...]`), by the literal of
    their `type` field."""
    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    out = {}
    for member in typing.get_args(union):
        for literal in typing.get_args(member.model_fields["type"].annotation):
            out[literal] = member
    return out


@dataclass
class RawStream:
    """One streamed request as sent on the wire."""

    status: int
    content_type: str = ""
    data: list[str] = field(default_factory=list)  # each SSE event's data, in order
    error: str = ""  # the body of a non-200 answer, or of one that is no event stream

    @property
    def framing(self) -> str | None:
        """What is wrong with the SSE framing itself (None: an event stream)."""
        if self.content_type.startswith("text/event-stream"):
            return None
        return (f"content-type {self.content_type!r}, not text/event-stream: "
                f"{self.error[:80]!r}")

    def events(self) -> list[dict[str, Any] | None]:
        """Each data event parsed (None: not JSON); `[DONE]` left out."""
        out: list[dict[str, Any] | None] = []
        for d in self.data:
            if d == "[DONE]":
                continue
            try:
                ev = json.loads(d)
            except json.JSONDecodeError:
                ev = None
            out.append(ev if isinstance(ev, dict) else None)
        return out


def read_sse(c: ProbeContext, path: str, body: dict[str, Any],
             headers: dict[str, str] | None = None) -> RawStream:
    """POST `body` to `path` and collect the SSE stream as it comes."""
    with httpx.Client(timeout=c.timeout_s, headers={**c.headers, **(headers or {})}) as client, \
            connect_sse(client, "POST", f"{c.base}{path}", json=body) as source:
        r = source.response
        if r.status_code != 200:
            r.read()
            return RawStream(r.status_code, error=r.text[:200])
        raw = RawStream(200, r.headers.get("content-type", ""))
        if raw.framing is not None:  # iter_sse would raise SSEError, an httpx.TransportError
            r.read()
            raw.error = r.text[:200]
            return raw
        raw.data = [ev.data for ev in source.iter_sse()]
        return raw


def _is_tag(part: object) -> bool:
    """A union member's tag in a pydantic error location ('ResponseOutputText',
    'function-after[...]'), as opposed to a field name (snake_case) or a list index."""
    return isinstance(part, str) and (part[:1].isupper() or not part.isidentifier())


def _path(loc: Sequence[object]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _is_tag(part):
            out += f".{part}" if out else str(part)
    return out


def field_problems(model: type[pydantic.BaseModel], event: dict[str, Any]
                   ) -> tuple[list[str], list[str]]:
    """(missing required fields, other problems) of one event under `model`, as dotted paths.
    In a union (an output item, a content part), only the member whose `type` literal the
    event names is reported; a `type` no member has is reported once, with its value."""
    try:
        model.model_validate(event)
        return [], []
    except pydantic.ValidationError as exc:
        errors = exc.errors()
    rejected = {tuple(e["loc"][:-1]) for e in errors if e["type"] == "literal_error"
                and len(e["loc"]) >= 2 and e["loc"][-1] == "type" and _is_tag(e["loc"][-2])}

    def under(loc: tuple, prefix: tuple) -> bool:
        return loc[:len(prefix)] == prefix

    kept = [e for e in errors if not any(under(tuple(e["loc"]), r) for r in rejected)]
    missing = [_path(e["loc"]) for e in kept if e["type"] == "missing"]
    other = [f"{_path(e['loc'])}: {e['msg']}" for e in kept if e["type"] != "missing"]
    for position in dict.fromkeys(r[:-1] for r in rejected):  # every member refused it
        if not any(under(tuple(e["loc"]), position) for e in kept) and not any(
                under(position, r) for r in rejected):
            value = next(e["input"] for e in errors if len(e["loc"]) == len(position) + 2
                         and under(tuple(e["loc"]), position) and e["loc"][-1] == "type"
                         and e["type"] == "literal_error")
            other.append(f"{_path(position)}.type {value!r} is none of the SDK's types there")
    return list(dict.fromkeys(missing)), list(dict.fromkeys(other))


@dataclass
class Finding:
    index: int  # the event's position in the stream (0-based, `[DONE]` not counted)
    kind: str  # its `type` (the chunk object for Chat Completions)
    model: str  # the SDK model it was validated against
    missing: list[str]
    other: list[str]


@dataclass
class TypedCheck:
    """The events of one stream under an SDK's typed models."""

    sdk: str  # e.g. "openai 3.60.0"
    count: int  # events checked
    findings: list[Finding]
    unknown: list[str]  # event types the SDK has no model for (evidence only)

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        """What is wrong, grouped: a field every event lacks once, then each event type's own
        gaps with the events it concerns ("response.output_item.added event #2 lacks
        output_index (required by openai 3.60.0 ResponseOutputItemAddedEvent)")."""
        if not self.findings:
            return ""
        every = (set.intersection(*(set(f.missing) for f in self.findings))
                 if len(self.findings) == self.count and self.count > 1 else set())
        parts = []
        if every:
            models = {f.model for f in self.findings}
            parts.append(f"all {self.count} events lack {', '.join(sorted(every))} (required "
                         f"by {self.sdk} " + (models.pop() if len(models) == 1 else
                                              "in every event model") + ")")
        groups: dict[tuple, list[int]] = {}
        for f in self.findings:
            missing = tuple(m for m in f.missing if m not in every)
            if missing or f.other:
                groups.setdefault((f.kind, f.model, missing, tuple(f.other)), []).append(
                    f.index)
        for (kind, model, missing, other), idx in groups.items():
            what = "; ".join(([f"lack{'s' if len(idx) == 1 else ''} {', '.join(missing)}"]
                              if missing else []) + list(other))
            parts.append(f"{kind} {_events(idx)} {what} ("
                         f"{'required by' if missing else 'per'} {self.sdk} {model})")
        text = "; ".join(parts)
        return text if len(text) <= _DETAIL_CHARS else (
            text[:_DETAIL_CHARS].rsplit(";", 1)[0] + "; ... (every event in the evidence)")

    def evidence(self) -> dict[str, Any]:
        return {"sdk": self.sdk, "events_checked": self.count, "unknown_types": self.unknown,
                "problems": [{"event": f.index, "type": f.kind, "model": f.model,
                              "missing": f.missing, "other": f.other}
                             for f in self.findings[:200]]}


def _events(idx: list[int]) -> str:
    if len(idx) == 1:
        return f"event #{idx[0]}"
    if idx == list(range(idx[0], idx[-1] + 1)):
        return f"events #{idx[0]}-#{idx[-1]}"
    return "events " + ", ".join(f"#{i}" for i in idx[:4]) + (", ..." if len(idx) > 4 else "")


def check_events(events: Sequence[dict[str, Any] | None], sdk: str,
                 model_for: Callable[[dict[str, Any]], type[pydantic.BaseModel] | None]
                 ) -> TypedCheck:
    """Each event against the model `model_for` gives it (None: a type the SDK does not
    know, or an event to skip such as Anthropic's `ping`)."""
    findings, unknown, count = [], [], 0
    for i, ev in enumerate(events):
        if ev is None:
            findings.append(Finding(i, "?", "-", [], ["not a JSON object"]))
            count += 1
            continue
        model = model_for(ev)
        if model is None:
            unknown.append(str(ev.get("type")))
            continue
        count += 1
        missing, other = field_problems(model, ev)
        if missing or other:
            findings.append(Finding(i, str(ev.get("type", ev.get("object", "?"))),
                                    model.__name__, missing, other))
    return TypedCheck(sdk, count, findings, list(dict.fromkeys(unknown)))


def by_type(union: Any, skip: tuple[str, ...] = ()
            ) -> Callable[[dict[str, Any]], type[pydantic.BaseModel] | None]:
    # Looked up by whatever an event's JSON holds under "type" (a miss reads as None).
    models: dict[Any, type[pydantic.BaseModel]] = union_models(union)
    return lambda ev: None if ev.get("type") in skip else models.get(ev.get("type"))


def run_helper(read: Callable[[], Any]) -> tuple[Any, str | None]:
    """Run an SDK streaming helper to its final object: (result, None), or (None, what it
    raised). The HTTP errors, timeouts and connection failures are left to run_probe."""
    passthrough = (sdk_errors("APIStatusError") + sdk_errors("APIConnectionError")
                   + (httpx.TransportError,))
    try:
        return read(), None
    except passthrough:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a client's code would see
        return None, f"{type(exc).__name__} ({str(exc)[:120]})"
