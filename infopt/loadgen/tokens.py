"""Prompt text: exact token counts with the engine's own tokenizer route or the model's Hugging
Face tokenizer.json, approximate without either.

We grow or shrink a request's word list until the engine's tokenizer counts exactly the target
(a few round trips: our words are mostly single tokens, so the first guess is close).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from pathlib import Path

import httpx

from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint

Counter = Callable[[str], int]

# A neutral vocabulary for synthetic prompts: common single-token English words for most BPE
# tokenizers, so the word count tracks the token count closely even without a tokenizer.
_WORDS = ("time people year way day man thing woman life child world school state family "
          "student group country problem hand part place case week company system program "
          "question work government number night point home water room mother area money story "
          "fact month lot right study book eye job word business issue side kind head house "
          "service friend father power hour game line end member law car city community name").split()


def engine_counter(client: httpx.Client, endpoint: Endpoint) -> Counter | None:
    """A token counter through the endpoint's tokenize route; None if it has none."""
    route = endpoint.tokenize
    if route is None:
        return None
    url = f"{endpoint.base_url.rstrip('/')}{route.path}"

    def counter(text: str) -> int:
        r = client.post(url, json=route.body(endpoint.model, text))
        r.raise_for_status()
        return route.count(r.json())
    return counter


def prompt_counter(client: httpx.Client, endpoint: Endpoint,
                   tokenizer_path: str | Path | None) -> Counter | None:
    """The server's own tokenizer route when it has one (the truth), else the model's
    tokenizer.json, else None (approximate prompts, marked as such in the records)."""
    counter = engine_counter(client, endpoint)
    if counter is None and tokenizer_path is not None:
        counter = hf_counter(tokenizer_path)
    return counter


def hf_counter(path: str | Path) -> Counter | None:
    """A token counter from a Hugging Face `tokenizer.json` (the file, or a model directory
    holding it), for engines without a tokenize route; None when there is no such file.
    Counts the text alone (no special tokens): the route's template overhead is measured
    separately (infopt.loadgen.runner.route_overhead)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        return None
    from tokenizers import Tokenizer  # Rust tokenizer: imported only when a file is given

    try:
        tok = Tokenizer.from_file(str(p))
    except Exception as exc:  # the library raises a bare Exception on a malformed file
        raise InputError(f"{p} is not a Hugging Face tokenizer.json: {exc}") from None

    def counter(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)
    return counter


def prompt_words(request_id: str, n: int, seed: int) -> str:
    """Deterministic text for a request: a unique head, then n words; a longer n only appends
    words (the head never changes). The head starts with a digest of the request, so two
    requests differ from their first token and no prefix cache can serve either (request ids
    alone share leading characters: "chat@c4-0-00001", "chat@c4-0-00002")."""
    rng = random.Random(f"{seed}:{request_id}")
    words = [rng.choice(_WORDS) for _ in range(max(0, n))]
    tag = hashlib.blake2b(f"{seed}:{request_id}".encode(), digest_size=4).hexdigest()
    return f"{tag}: " + " ".join(words)


def approximate_prompt(request_id: str, approx_tokens: int, seed: int) -> str:
    """Without a tokenizer: about `approx_tokens` tokens (one per word), same unique head."""
    return prompt_words(request_id, max(1, approx_tokens - 5), seed)


def exact_prompt(request_id: str, target_tokens: int, counter: Counter, seed: int,
                 max_rounds: int = 12, prefix: str = "", max_swaps: int = 24
                 ) -> tuple[str, int]:
    """(text, counted tokens of prefix + text); the count equals `target_tokens` unless the
    target is below the prefix and fixed head's length or the tokenizer never lands on it (then
    the closest count is kept). `prefix` (a shared prefix) is counted, not returned."""
    n = max(0, target_tokens - 5)
    best: tuple[str, int, int] | None = None  # text, count, words
    seen: set[int] = set()
    for _ in range(max_rounds):
        text = prompt_words(request_id, n, seed)
        got = counter(prefix + text)
        if best is None or abs(got - target_tokens) < abs(best[1] - target_tokens):
            best = (text, got, n)
        if got == target_tokens or n in seen:
            break
        seen.add(n)
        step = target_tokens - got
        n = max(0, n + (step if step else 1))
    assert best is not None
    if best[1] != target_tokens and best[2] > 0:
        # One word count lands just below the target and the next just above (a word of two
        # tokens): swap the last word for other words of the vocabulary until one fits. At most
        # 2 x max_swaps extra tokenizer calls. All of the first 24 words are one token (after a
        # space) in SmolLM2's tokenizer, checked 2026-11-29.
        for n_words in (best[2], best[2] + 1):
            stem = prompt_words(request_id, n_words, seed).rsplit(" ", 1)[0]
            for word in _WORDS[:max_swaps]:
                got = counter(prefix + stem + " " + word)
                if got == target_tokens:
                    return stem + " " + word, got
    return best[0], best[1]
