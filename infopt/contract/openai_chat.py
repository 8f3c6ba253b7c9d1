"""OpenAI Chat Completions and /v1/models as a tested contract, probed through the official
`openai` SDK (what real clients use), with raw httpx + httpx-sse only where the wire format is
itself the contract (SSE framing, `[DONE]`), and the load generator's own client for the
streamed-count cross-check. Each feature is pass, fail or unsupported, with evidence.

Why each probe is shaped as it is (SmolLM2-135M answers are not reliable facts, so nothing here
depends on what the model says, only on how the server says it):
- `stop`: a greedy answer is generated once, a substring from its middle becomes the stop
  string, and the same greedy request with that stop must end exactly before it.
- `seed`: two sampled (temperature 1) requests with the same seed must agree, and one with
  another seed must not (else sampling is ignored and the first half passes vacuously).
- `n`: n=2 must give two choices; one choice back means the field was ignored (a failure).
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat

from infopt.loadgen.client import RequestJob, send_request
from infopt.specs.contract import CheckStatus

from .context import PROBE_TOKENS, PROMPT, Probe, ProbeContext
from .sdk_streams import check_events, read_sse, run_helper, sdk_label

ROUTE = "/v1/chat/completions"
# What every check of this module is called; `required` picks from these.
CHAT_FEATURES = ("models", "whole", "stream", "include_usage", "stream_count_matches_usage",
                 "max_tokens", "stop", "n", "seed", "logprobs", "json_object",
                 "json_schema")
# What the load generator itself relies on: always required.
BASE_REQUIRED = ("models", "whole", "stream", "include_usage")


def _usage(resp) -> int | None:
    return resp.usage.completion_tokens if resp.usage else None


def _models(c: ProbeContext):
    ids = [m.id for m in c.sdk.models.list().data]
    ok = c.model in ids
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"/v1/models lists {ids}" + ("" if ok else f"; {c.model!r} is not among them"),
            {"ids": ids})


def _whole(c: ProbeContext):
    r = c.chat(**c.forced())
    choice = r.choices[0] if r.choices else None
    problems = []
    if choice is None or not choice.message.content:
        problems.append("no message content")
    elif choice.finish_reason is None:
        problems.append("no finish_reason")
    if _usage(r) != PROBE_TOKENS:
        problems.append(f"usage.completion_tokens={_usage(r)}, forced {PROBE_TOKENS}")
    if problems:
        return CheckStatus.FAIL, "; ".join(problems), r.model_dump()
    assert choice is not None  # else "no message content" is among the problems
    return (CheckStatus.PASS, f"{PROBE_TOKENS} completion tokens, finish_reason "
            f"{choice.finish_reason}", r.model_dump())


def _stream(c: ProbeContext):
    """The SSE framing (event-stream content type, JSON data events, `[DONE]` last), every
    chunk valid as the SDK's ChatCompletionChunk, and `client.chat.completions.stream()` read
    to its final snapshot (infopt.contract.sdk_streams)."""
    from openai.types.chat import ChatCompletionChunk

    body = {"model": c.model, "messages": PROMPT, "temperature": 0.0, "stream": True,
            **c.endpoint.forced_fields(PROBE_TOKENS)}

    def helper():
        with c.sdk.chat.completions.stream(model=c.model, messages=PROMPT, temperature=0.0,
                                           **c.forced()) as stream:
            n = sum(1 for _ in stream)
            # Not get_final_completion(): it raises LengthFinishReasonError on any stream cut
            # by its token limit (the SDK's parse step, whatever the server), as this one is.
            snapshot = stream.current_completion_snapshot
        return n, snapshot.choices[0].message.content if snapshot.choices else None
    ran, helper_error = run_helper(helper)
    raw = read_sse(c, ROUTE, body)
    if raw.status != 200:
        return (CheckStatus.FAIL, f"HTTP {raw.status}: {raw.error}", {"body": body})
    problems = []
    if helper_error:
        problems.append(f"client.chat.completions.stream() raises {helper_error}")
    elif not ran[1]:
        problems.append("client.chat.completions.stream() gives no content")
    if raw.framing:
        problems.append(raw.framing)
    events = raw.events()
    problems += [f"data event is not JSON: {d[:80]!r}" for d, e in
                 zip([d for d in raw.data if d != "[DONE]"], events, strict=True) if e is None]
    typed = check_events([e for e in events if e is not None], sdk_label("openai"),
                         lambda e: ChatCompletionChunk)
    if not typed.ok:
        problems.append(typed.summary())
    text = "".join((ch.get("delta") or {}).get("content") or "" for e in events if e
                   for ch in e.get("choices") or [] if isinstance(ch, dict))
    if raw.data[-1:] != ["[DONE]"]:
        problems.append("the stream did not end with data: [DONE]")
    if not text:
        problems.append("no streamed content")
    evidence = {"body": body, "events_head": [d[:200] for d in raw.data[:3]],
                "events_tail": [d[:200] for d in raw.data[-2:]], "typed": typed.evidence(),
                "helper": helper_error or f"read {ran[0]} events to the final snapshot"}
    return (CheckStatus.FAIL if problems else CheckStatus.PASS,
            "; ".join(problems) or f"text/event-stream, {len(raw.data) - 1} JSON events, "
            f"[DONE] last; each a valid {typed.sdk} ChatCompletionChunk; "
            "client.chat.completions.stream() reads it to the end", evidence)


def _include_usage(c: ProbeContext):
    stream = c.chat(stream=True, stream_options={"include_usage": True}, **c.forced())
    chunks = list(stream)
    usage = next((ch.usage for ch in chunks if ch.usage is not None), None)
    last = chunks[-1] if chunks else None
    problems = []
    if usage is None:
        problems.append("no chunk carried usage with stream_options.include_usage")
    elif usage.completion_tokens != PROBE_TOKENS:
        problems.append(f"usage.completion_tokens={usage.completion_tokens}, forced "
                        f"{PROBE_TOKENS}")
    if last is not None and last.usage is not None and last.choices:
        problems.append("the usage chunk also carries choices (the spec sends it with none)")
    if problems:
        return (CheckStatus.FAIL, "; ".join(problems),
                {"usage": usage.model_dump() if usage else None})
    assert usage is not None  # else "no chunk carried usage" is among the problems
    return (CheckStatus.PASS, f"usage on the last chunk: {usage.completion_tokens} "
            "completion tokens", {"usage": usage.model_dump()})


def _stream_count(c: ProbeContext):
    """The tokens the stream delivered equal what usage bills (the load generator's client)."""
    job = RequestJob(request_id="contract-count", prompt=PROMPT[0]["content"],
                     output_tokens=PROBE_TOKENS, concurrency=1,
                     forced=c.endpoint.forced_fields(PROBE_TOKENS),
                     counting=c.endpoint.stream_counting)

    async def one():
        async with httpx.AsyncClient(timeout=c.timeout_s, headers=c.headers) as client:
            return await send_request(client, c.endpoint.base_url, c.model, job,
                                      time.perf_counter())
    rec = asyncio.run(one())
    ev = rec.model_dump(include={"ok", "error", "output_tokens", "streamed_tokens",
                                 "content_chunks", "chunk_tokens_counted"})
    if not rec.ok:
        return CheckStatus.FAIL, f"the streamed request failed: {rec.error}", ev
    if rec.chunk_tokens_counted is False and rec.content_chunks != rec.output_tokens:
        return (CheckStatus.UNSUPPORTED, f"{rec.content_chunks} chunks for {rec.output_tokens} "
                "billed tokens and no per-chunk token count from the engine: the stream's "
                "token count cannot be checked", ev)
    ok = rec.streamed_tokens == rec.output_tokens
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"streamed {rec.streamed_tokens} tokens, usage {rec.output_tokens}", ev)


def _max_tokens(c: ProbeContext):
    r = c.chat(max_tokens=4)  # no forcing: the cap alone
    n, reason = _usage(r), r.choices[0].finish_reason if r.choices else None
    ok = n is not None and n <= 4 and (n < 4 or reason == "length")
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"max_tokens=4: {n} completion tokens, finish_reason {reason}", r.model_dump())


def _stop(c: ProbeContext):
    base = c.chat(max_tokens=24).choices[0].message.content or ""
    k = len(base) // 2
    stop = base[k:k + 4]
    if len(base) < 8 or not stop.strip():
        return CheckStatus.UNSUPPORTED, f"the greedy answer {base!r} is too short to probe", {}
    r = c.chat(max_tokens=24, stop=[stop])
    got, reason = r.choices[0].message.content or "", r.choices[0].finish_reason
    want = base[:base.index(stop)]
    ok = got == want and reason == "stop"
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"stop={stop!r}: answer ends {got[-20:]!r}, finish_reason {reason}"
            + ("" if ok else f"; expected it to end {want[-20:]!r} with finish_reason stop"),
            {"stop": stop, "base": base, "got": got})


def _n(c: ProbeContext):
    r = c.chat(n=2, temperature=1.0, seed=7, max_tokens=8)
    got = len(r.choices)
    return (CheckStatus.PASS if got == 2 else CheckStatus.FAIL,
            f"n=2: {got} choice(s)" + ("" if got == 2 else " (the field was ignored)"),
            r.model_dump())


def _seed(c: ProbeContext):
    a, b, other = (c.chat(temperature=1.0, seed=s, max_tokens=12).choices[0].message.content
                   for s in (1234, 1234, 4321))
    if a != b:
        status, detail = (CheckStatus.FAIL, f"seed=1234 at temperature 1 gave different "
                          f"answers: {a!r} vs {b!r}")
    elif a == other:  # a server that ignores sampling would pass the first half vacuously
        status, detail = (CheckStatus.FAIL, "seeds 1234 and 4321 at temperature 1 gave the "
                          "same answer: the seed (or sampling) is ignored")
    else:
        status, detail = (CheckStatus.PASS, "seed=1234 at temperature 1 repeats its answer; "
                          "seed 4321 gives another")
    return status, detail, {"seed_1234": [a, b], "seed_4321": other}


def _logprobs(c: ProbeContext):
    r = c.chat(logprobs=True, top_logprobs=2, **c.forced(4))
    lp = r.choices[0].logprobs if r.choices else None
    content = (lp.content or []) if lp else []
    tops = [len(t.top_logprobs or []) for t in content]
    ok = len(content) == _usage(r) == 4 and all(n == 2 for n in tops)
    return (CheckStatus.PASS if ok else CheckStatus.FAIL,
            f"logprobs for {len(content)} of {_usage(r)} tokens, top_logprobs sizes {tops}",
            {"logprobs": lp.model_dump() if lp else None})


# A small schema whose answer fits in the probe's token budget (bounded string, an integer).
CITY_SCHEMA = {"type": "object", "additionalProperties": False,
               "required": ["name", "population"],
               "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 24},
                              "population": {"type": "integer", "minimum": 0}}}
_JSON_PROMPT: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Give a city and its population as JSON with keys name and "
     "population."}]
_JSON_TOKENS = 64


def _json_answer(c: ProbeContext, response_format: ResponseFormat):
    r = c.sdk.chat.completions.create(model=c.model, messages=_JSON_PROMPT, temperature=0.0,
                                      max_tokens=_JSON_TOKENS, response_format=response_format)
    text = r.choices[0].message.content or ""
    try:
        return r, text, json.loads(text), None
    except json.JSONDecodeError as exc:
        why = (f"not JSON ({exc.msg} at {exc.pos})"
               + (f"; cut at max_tokens={_JSON_TOKENS}" if r.choices[0].finish_reason == "length"
                  else ""))
        return r, text, None, why


def json_object_prefix(text: str) -> bool:
    """Whether `text` is the start of a JSON object: it opens with '{', its strings and escapes
    are well formed and every closing bracket matches an open one. A server that constrains
    its output to JSON yields such a prefix when max_tokens cuts it; prose never is one."""
    body = text.lstrip()
    if not body.startswith("{"):
        return False
    stack, in_str, esc = [], False, False
    for ch in body:
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and (not stack or stack.pop() != ch):
            return False
    return bool(stack) or in_str


def _json_object(c: ProbeContext):
    r, text, obj, why = _json_answer(c, {"type": "json_object"})
    if isinstance(obj, dict):
        return CheckStatus.PASS, "response_format json_object: a JSON object", {"content": text}
    cut = obj is None and r.choices[0].finish_reason == "length"
    if cut and json_object_prefix(text):
        # A small model may never close the object: whether the server constrained its output
        # is what the contract asks, and a cut prefix shows it did (the text is the evidence).
        return (CheckStatus.PASS, f"response_format json_object: cut at max_tokens="
                f"{_JSON_TOKENS} before the model closed it, and what came is a JSON object "
                f"so far: {text[:80]!r}", {"content": text, "cut_at_max_tokens": True})
    return (CheckStatus.FAIL, f"response_format json_object: "
            f"{why or 'JSON, but not an object'}: {text[:80]!r}", {"content": text})


def _json_schema(c: ProbeContext):
    import jsonschema  # a direct dependency; imported here because only this probe needs it

    r, text, obj, why = _json_answer(c, {"type": "json_schema", "json_schema": {
        "name": "city", "schema": CITY_SCHEMA, "strict": True}})
    if why is None:
        errors = [e.message for e in jsonschema.Draft202012Validator(CITY_SCHEMA)
                  .iter_errors(obj)]
        why = "; ".join(errors)[:200] or None
    return (CheckStatus.FAIL if why else CheckStatus.PASS,
            f"response_format json_schema: {why}: {text[:80]!r}" if why else
            f"response_format json_schema: valid against the schema: {text[:60]!r}",
            {"schema": CITY_SCHEMA, "content": text})


PROBES: dict[str, tuple[str, bool, Probe]] = {  # feature -> (route, streamed, probe)
    "models": ("/v1/models", False, _models),
    "whole": (ROUTE, False, _whole),
    "stream": (ROUTE, True, _stream),
    "include_usage": (ROUTE, True, _include_usage),
    "stream_count_matches_usage": (ROUTE, True, _stream_count),
    "max_tokens": (ROUTE, False, _max_tokens),
    "stop": (ROUTE, False, _stop),
    "n": (ROUTE, False, _n),
    "seed": (ROUTE, False, _seed),
    "logprobs": (ROUTE, False, _logprobs),
    "json_object": (ROUTE, False, _json_object),
    "json_schema": (ROUTE, False, _json_schema),
}
