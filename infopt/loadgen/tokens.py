"""Prompts with an exact token count, measured with the engine's own tokenizer route.

We grow or shrink a request's word list until the engine's tokenizer counts exactly the target
(a few round trips: our words are mostly single tokens, so the first guess is close).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx

from infopt.loadgen.client import _WORDS

Counter = Callable[[str], int]


def engine_counter(client: httpx.Client, base_url: str, model: str, adapter: Any
                   ) -> Counter | None:
    """A token counter through `adapter`'s tokenize route; None if the engine has none."""
    if not (adapter.tokenize_path and adapter.tokenize_body and adapter.tokenize_count):
        return None
    url = f"{base_url.rstrip('/')}{adapter.tokenize_path}"

    def counter(text: str) -> int:
        r = client.post(url, json=adapter.tokenize_body(model, text))
        r.raise_for_status()
        return adapter.tokenize_count(r.json())
    return counter


def prompt_words(request_id: str, n: int, seed: int) -> str:
    """Deterministic text for a request: a unique head (so no prefix cache can serve it),
    then n words; a longer n only appends words (the head never changes)."""
    rng = random.Random(f"{seed}:{request_id}")
    words = [rng.choice(_WORDS) for _ in range(max(0, n))]
    return f"Request {request_id}. Continue this list: " + " ".join(words)


def exact_prompt(request_id: str, target_tokens: int, counter: Counter, seed: int,
                 max_rounds: int = 12) -> tuple[str, int]:
    """(text, counted tokens); the count equals `target_tokens` unless the target is below the
    fixed head's length or the tokenizer never lands on it (then the closest count is kept)."""
    n = max(0, target_tokens - 10)
    best: tuple[str, int] | None = None
    seen: set[int] = set()
    for _ in range(max_rounds):
        text = prompt_words(request_id, n, seed)
        got = counter(text)
        if best is None or abs(got - target_tokens) < abs(best[1] - target_tokens):
            best = (text, got)
        if got == target_tokens or n in seen:
            break
        seen.add(n)
        step = target_tokens - got
        n = max(0, n + (step if step else 1))
    assert best is not None
    return best
