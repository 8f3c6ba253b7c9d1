"""The API routes the load generator drives, as data: path, request body, and how to read the
answer (streamed events or one JSON body) into text, token counts and usage.

Routes differ only here; the client's timing loop is the same for all of them. Wire formats:
- chat_completions: OpenAI POST /v1/chat/completions, SSE `data: {chunk}` ... `data: [DONE]`.
- completions: OpenAI POST /v1/completions, the same framing, text in `choices[].text`.
- responses: OpenAI POST /v1/responses, typed SSE events (`response.output_text.delta`,
  usage in `response.completed`), https://platform.openai.com/docs/api-reference/responses-streaming
- anthropic_messages: Anthropic POST /v1/messages, typed SSE events (`content_block_delta`,
  usage in `message_start` / `message_delta`), https://docs.anthropic.com/en/api/messages-streaming

Tokens per chunk are the engine's business, not the route's: see EngineAdapter.stream_counting
and the client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from infopt.specs.traffic import RouteName


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one streamed event (or a whole non-streamed answer) says."""

    text: str = ""  # generated text in this event
    prompt_tokens: int | None = None  # the whole prompt, cached part included
    cached_tokens: int | None = None  # prompt tokens served from the engine's prefix cache
    output_tokens: int | None = None  # final usage count
    draft_tokens: int | None = None  # speculative tokens drafted (llama.cpp's timings)
    draft_accepted: int | None = None  # of those, accepted by the target
    done: bool = False  # the route's end-of-stream marker


@dataclass(frozen=True)
class RouteDriver:
    route: RouteName
    path: str
    # (model, prompt, forced-length fields, stream) -> request body
    body: Callable[[str, str, dict[str, Any], bool], dict[str, Any]]
    # (SSE event name, parsed data) -> Chunk
    parse_event: Callable[[str, dict[str, Any]], Chunk]
    parse_body: Callable[[dict[str, Any]], Chunk]  # non-streamed answer -> Chunk
    # Whether stream_options (include_usage / continuous_usage_stats) apply to this route.
    openai_stream_options: bool


class _Usage(TypedDict, total=False):
    """Chunk's usage fields as read from a usage block: spread into Chunk(**...), so each key
    keeps its field's type."""

    prompt_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None


class _Drafts(TypedDict, total=False):
    """Chunk's speculative counts, spread beside _Usage (the two share no key)."""

    draft_tokens: int | None
    draft_accepted: int | None


def _openai_usage(usage: dict[str, Any] | None, inp: str, out: str, details: str
                  ) -> _Usage:
    """OpenAI usage: the prompt count includes cached tokens, listed apart in *_details."""
    if not usage:
        return {}
    return {"prompt_tokens": usage.get(inp), "output_tokens": usage.get(out),
            "cached_tokens": (usage.get(details) or {}).get("cached_tokens")}


def _anthropic_usage(usage: dict[str, Any] | None) -> _Usage:
    """Anthropic usage: input_tokens excludes cache reads and writes; the whole prompt is the
    sum (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)."""
    if not usage:
        return {}
    parts = [usage.get(k) for k in ("input_tokens", "cache_read_input_tokens",
                                    "cache_creation_input_tokens")]
    whole = sum(p or 0 for p in parts) if any(p is not None for p in parts) else None
    return {"prompt_tokens": whole, "output_tokens": usage.get("output_tokens"),
            "cached_tokens": usage.get("cache_read_input_tokens")}


def _draft_counts(data: dict[str, Any]) -> _Drafts:
    """llama.cpp's per-request speculative counts: its `timings` object carries draft_n and
    draft_n_accepted when it drafted (tools/server/server-common.cpp). Read with the usage
    block only (the final event, or a whole answer): the per-chunk path stays as it was."""
    if not data.get("usage"):
        return {}
    timings = data.get("timings")
    if not isinstance(timings, dict) or "draft_n" not in timings:
        return {}
    return {"draft_tokens": timings.get("draft_n"),
            "draft_accepted": timings.get("draft_n_accepted")}


def _openai_event(text_of: Callable[[dict[str, Any]], str | None]
                  ) -> Callable[[str, dict[str, Any]], Chunk]:
    def parse(_event: str, data: dict[str, Any]) -> Chunk:
        text = "".join(t for c in data.get("choices") or [] if (t := text_of(c)))
        return Chunk(text=text, **_draft_counts(data), **_openai_usage(
            data.get("usage"), "prompt_tokens", "completion_tokens", "prompt_tokens_details"))
    return parse


def _openai_body(text_of: Callable[[dict[str, Any]], str | None]
                 ) -> Callable[[dict[str, Any]], Chunk]:
    def parse(data: dict[str, Any]) -> Chunk:
        text = "".join(t for c in data.get("choices") or [] if (t := text_of(c)))
        return Chunk(text=text, done=True, **_draft_counts(data), **_openai_usage(
            data.get("usage"), "prompt_tokens", "completion_tokens", "prompt_tokens_details"))
    return parse


def _anthropic_event(event: str, data: dict[str, Any]) -> Chunk:
    kind = data.get("type") or event
    if kind == "content_block_delta":
        return Chunk(text=(data.get("delta") or {}).get("text") or "")
    if kind == "message_start":
        counts = _anthropic_usage((data.get("message") or {}).get("usage"))
        return Chunk(prompt_tokens=counts.get("prompt_tokens"),
                     cached_tokens=counts.get("cached_tokens"))
    if kind == "message_delta":
        # The final output count; input counts appear here only when the server repeats them.
        usage = data.get("usage") or {}
        whole = _anthropic_usage(usage) if "input_tokens" in usage else {}
        return Chunk(output_tokens=usage.get("output_tokens"),
                     prompt_tokens=whole.get("prompt_tokens"),
                     cached_tokens=whole.get("cached_tokens"))
    return Chunk(done=kind == "message_stop")


def _anthropic_body(data: dict[str, Any]) -> Chunk:
    text = "".join(b.get("text") or "" for b in data.get("content") or []
                   if b.get("type") == "text")
    return Chunk(text=text, done=True, **_anthropic_usage(data.get("usage")))


def _responses_event(event: str, data: dict[str, Any]) -> Chunk:
    kind = data.get("type") or event
    if kind == "response.output_text.delta":
        return Chunk(text=data.get("delta") or "")
    if kind == "response.completed":
        return Chunk(done=True, **_openai_usage((data.get("response") or {}).get("usage"),
                                                "input_tokens", "output_tokens",
                                                "input_tokens_details"))
    return Chunk()


def _responses_body(data: dict[str, Any]) -> Chunk:
    text = "".join(c.get("text") or "" for item in data.get("output") or []
                   for c in item.get("content") or [] if c.get("type") == "output_text")
    return Chunk(text=text, done=True, **_openai_usage(data.get("usage"), "input_tokens",
                                                       "output_tokens", "input_tokens_details"))


def _renamed(fields: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """The Responses API calls the output cap max_output_tokens."""
    out = dict(fields)
    if old in out:
        out[new] = out.pop(old)
    return out


def _chat_text(c: dict[str, Any]) -> str | None:
    return (c.get("delta") or c.get("message") or {}).get("content")


DRIVERS: dict[RouteName, RouteDriver] = {
    RouteName.CHAT_COMPLETIONS: RouteDriver(
        route=RouteName.CHAT_COMPLETIONS, path="/v1/chat/completions",
        body=lambda model, prompt, forced, stream: {
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "stream": stream, "temperature": 0.0, **forced},
        parse_event=_openai_event(_chat_text), parse_body=_openai_body(_chat_text),
        openai_stream_options=True),
    RouteName.COMPLETIONS: RouteDriver(
        route=RouteName.COMPLETIONS, path="/v1/completions",
        body=lambda model, prompt, forced, stream: {
            "model": model, "prompt": prompt, "stream": stream, "temperature": 0.0, **forced},
        parse_event=_openai_event(lambda c: c.get("text")),
        parse_body=_openai_body(lambda c: c.get("text")), openai_stream_options=True),
    RouteName.RESPONSES: RouteDriver(
        route=RouteName.RESPONSES, path="/v1/responses",
        body=lambda model, prompt, forced, stream: {
            "model": model, "input": prompt, "stream": stream, "temperature": 0.0,
            **_renamed(forced, "max_tokens", "max_output_tokens")},
        parse_event=_responses_event, parse_body=_responses_body, openai_stream_options=False),
    RouteName.ANTHROPIC_MESSAGES: RouteDriver(
        route=RouteName.ANTHROPIC_MESSAGES, path="/v1/messages",
        body=lambda model, prompt, forced, stream: {
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "stream": stream, "temperature": 0.0, **forced},
        parse_event=_anthropic_event, parse_body=_anthropic_body, openai_stream_options=False),
}


def request_body(driver: RouteDriver, model: str, prompt: str, forced: dict[str, Any],
                 stream: bool, stream_fields: dict[str, Any]) -> dict[str, Any]:
    """The body to send. `stream_fields`: extra fields for streamed requests (the engine's
    per-chunk counting switch); a nested `stream_options` is merged, and dropped on routes
    that do not take it."""
    body = driver.body(model, prompt, forced, stream)
    if not stream:
        return body
    extra = dict(stream_fields)
    options = extra.pop("stream_options", {})
    if driver.openai_stream_options:
        body["stream_options"] = {"include_usage": True, **options}
    body.update(extra)
    return body
