"""The one value that crosses from the engines to everything that talks HTTP: an `Endpoint`.

The load generator, the contract probes and (later) the quality scoring take an Endpoint and
never an engine adapter, so they work against any OpenAI-compatible server; what differs per
engine (the fields that force an output length, per-chunk token counts, keep-alive, a
tokenize route) arrives as data here. `infopt.engines.endpoint_for` builds one from an adapter.
A frozen dataclass rather than a pydantic model: it carries small functions (wire formats).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StreamCounting:
    """An engine's way to put the running output-token count on every streamed chunk: the
    request fields that switch it on, and where it sits in a chunk's JSON."""

    request_fields: dict[str, Any]
    read: Callable[[dict[str, Any]], int | None]


@dataclass(frozen=True)
class TokenizeRoute:
    """POST `path` with body(model, text); count(json answer) is the text's token count."""

    path: str
    body: Callable[[str, str], dict[str, Any]]
    count: Callable[[dict[str, Any]], int]


@dataclass(frozen=True)
class TokenScoring:
    """How a server tokenizes, generates greedily and teacher-forces token ids, exactly: the
    log-probability of a given token at each position, not only of sampled ones (the quality
    gate, infopt.quality). Each function takes (httpx.Client, base_url, model, ...)."""

    tokenize: Callable[..., list[int]]  # (client, base, model, text) -> ids
    generate: Callable[..., list[int]]  # (client, base, model, prompt ids, n) -> greedy ids
    # (client, base, model, prompt ids, continuation ids, k) -> [PositionScore | None] per
    # continuation token: its exact logprob and the server's top-k there (None: the server
    # cannot report that position).
    score: Callable[..., list[Any]]
    how: str  # what it asks the server, for reports


@dataclass(frozen=True)
class SpecCounters:
    """Where a server counts speculative decoding's drafted and accepted tokens: two Prometheus
    counters on `path` (summed over their label sets), read before and after a measured
    scenario when the server gives no per-request counts."""

    path: str
    drafted: str
    accepted: str
    drafts: str | None = None  # verification steps (mean accepted length = 1 + accepted/drafts)


@dataclass(frozen=True)
class PrefixCacheCounters:
    """Where a server counts prompt tokens served from its prefix cache: `hits`, over either
    `queried` (every prompt token looked up) or `hits` + `missed` (the tokens it computed)."""

    path: str
    hits: str
    queried: str | None = None
    missed: str | None = None


# vLLM, SGLang, llama.cpp and TensorRT-LLM all honour ignore_eos; an unknown server gets it
# with max_tokens, and its output lengths are checked against usage like any other.
def generic_forced_fields(n: int) -> dict[str, Any]:
    return {"max_tokens": n, "ignore_eos": True}


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str  # the name requests address the model by
    # Request fields that force exactly n output tokens.
    forced_fields: Callable[[int], dict[str, Any]] = generic_forced_fields
    # None: chunk counts are assumed to be 1 and flagged as assumed.
    stream_counting: StreamCounting | None = None
    # False: the server closes a connection after a stream without saying so (ask up front).
    keepalive: bool = True
    tokenize: TokenizeRoute | None = None  # None: prompts counted another way, or approximate
    scoring: TokenScoring | None = None  # None: no exact teacher forcing on this server
    # (GET path, JSON key) where the server publishes the chat template it applies; None: it
    # does not (the reasoning probe then judges by the answer alone).
    chat_template: tuple[str, str] | None = None
    pid: int | None = None  # the server's process (group), for CPU/RSS sampling
    engine: str | None = None  # label only (logs, reports); nothing branches on it
    spec_counters: SpecCounters | None = None  # None: no speculative counters known
    # GET route whose JSON holds internal_states[0].avg_spec_accept_length (SGLang's
    # /get_server_info): the mean tokens a verification step yields, bonus token included.
    spec_accept_length_route: str | None = None
