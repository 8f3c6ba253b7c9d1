"""The long-context check (issue 50): before a change of KV precision or of weights is promoted,
the candidate teacher-forces the reference's greedy continuations of prompts at half the
served context or more, judged like the rest of the gate (the floor, the tolerance, decisive
intervals, looks until decided). Why it is needed beside the short pool: the pool's prompts are
a few dozen tokens, so a KV type whose error grows with the number of cached positions (or
weights whose loss shows on retrieval far back) passes it and is promoted.

The prompts are windows of one long record, each ending in a new entry recalling one of its
first (infopt.quality.long_document says why): the first window at half the served context,
the others a little longer, so an engine's prefix cache prefills the record once. When the
reference cannot serve that length (its own per-sequence limit) the windows are halved until
it can, and the check says how long they were.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath

import httpx

from infopt.engines import adapter_for
from infopt.engines.scoring import ScoringError
from infopt.specs.endpoint import Endpoint
from infopt.specs.quality import LongContextReference
from infopt.specs.serving import AnyServingConfig

from .long_document import Entry, entries, window_text
from .teacher import Progress, build_reference

LONG_SHARE = 0.5  # of the served context: the specification's "at >= 50%"
WINDOWS = 8
FIRST_LOOK_WINDOWS = 4
# Continuation tokens scored per window: 4 windows x 64 = 256 positions, the fewest on which a
# candidate that agrees everywhere clears a 98% threshold at 95% (Wilson's lower bound 98.5%).
# Tried at 32 (2026-12-07, served context 2,048, tolerance 0.05): the reference's build took
# 55 s instead of 97 s, but a real q8_0 KV went from passed (97.7% over 512 tokens) to
# undecided (97.3% over 256): too little power to promote what is fine.
WINDOW_TOKENS = 64
MIN_PROMPT_TOKENS = 256  # shorter than this, the check is not a long-context check
_SAMPLE_ENTRIES = 32


@dataclass(frozen=True)
class WindowPlan:
    """The prompt lengths to aim at: each window's prompt holds at least `targets[i]` tokens and
    at most `limit`, so that it and its continuation fit `context_tokens`."""

    context_tokens: int
    targets: tuple[int, ...]
    limit: int


def window_plan(context_tokens: int, windows: int = WINDOWS,
                tokens: int = WINDOW_TOKENS) -> WindowPlan:
    """The first window at half the context, the rest spaced by 1/64 of it (at least 64
    tokens), all ending so that the continuation fits."""
    start = math.ceil(context_tokens * LONG_SHARE)
    limit = context_tokens - tokens - 8  # 8: a BOS token and rounding in the server's count
    if start < MIN_PROMPT_TOKENS or limit < start:
        raise ValueError(f"a served context of {context_tokens} tokens is too short for a "
                         f"long-context check (prompts of at least {MIN_PROMPT_TOKENS} tokens "
                         f"and {tokens} tokens of continuation)")
    step = max(64, context_tokens // 64)
    if windows > 1:
        step = min(step, (limit - start) // (windows - 1))
    return WindowPlan(context_tokens, tuple(start + j * step for j in range(windows)), limit)


Tokenize = Callable[[str], list[int]]  # the server's own: text -> token ids


def window_prompts(plan: WindowPlan, tokenize: Tokenize, seed: int = 0) -> dict[str, str]:
    """Each window's text, fitted to its target with the server's own tokenizer (a few
    tokenize calls per window: entries are added or removed by the measured tokens per entry).
    Raises ValueError when a window cannot be fitted between its target and the limit."""
    sample = entries(_SAMPLE_ENTRIES, seed)
    per_entry = len(tokenize(window_text(sample, _SAMPLE_ENTRIES, sample[0]))) / _SAMPLE_ENTRIES
    doc = entries(int(plan.limit / per_entry * 1.25) + len(plan.targets) + 8, seed)
    out: dict[str, str] = {}
    # A window needs room for an entry or two between its target and the limit (entries are
    # the unit of length): the last targets give way to it.
    top = max(plan.targets[0], int(plan.limit - 2 * per_entry))
    for j, target in enumerate(plan.targets):
        early = min(j, int(target / per_entry / 4))  # an entry in the window's first quarter
        text, n = _fit(doc, doc[early], min(target, top), plan.limit, per_entry, tokenize)
        out[f"long-{j + 1}-{n}tok"] = text
    return out


def _fit(doc: list[Entry], asks: Entry, target: int, limit: int, per_entry: float,
         tokenize: Tokenize) -> tuple[str, int]:
    count = max(asks.n, round(target / per_entry))
    for _ in range(8):
        count = min(max(count, asks.n), len(doc))
        text = window_text(doc, count, asks)
        n = len(tokenize(text))
        if target <= n <= limit:
            return text, n
        # Aim half an entry above the target: the windows stay in order and near their
        # targets, so a prefix cache prefills only the difference between them.
        shift = max(1, round(abs(n - (target + per_entry / 2)) / per_entry))
        count += shift if n < target else -shift
    raise ValueError(f"could not fit a long-context prompt between {target} and {limit} "
                     f"tokens (last try {n} tokens of {count} entries)")


def build_long_reference(endpoint: Endpoint, context_tokens: int, *,
                         api_key: str | None = None, timeout_s: float = 900.0,
                         progress: Progress | None = None) -> LongContextReference:
    """The reference's greedy continuations of the windows, scored by itself, at half the
    served context; halved while the reference refuses that length. Raises ValueError when
    no length of at least MIN_PROMPT_TOKENS could be scored."""
    tried: list[str] = []
    ctx = context_tokens
    while True:
        try:
            plan = window_plan(ctx)
        except ValueError as exc:
            raise ValueError(f"{exc}; tried: {'; '.join(tried) or 'nothing'}") from None
        try:
            prompts = window_prompts(plan, _tokenizer(endpoint, timeout_s))
            ref = build_reference(endpoint, tokens=WINDOW_TOKENS, prompts=prompts,
                                  api_key=api_key, timeout_s=timeout_s, progress=progress)
        except ScoringError as exc:
            tried.append(f"{plan.targets[0]}-token prompts refused ({str(exc)[:160]})")
            ctx //= 2
            continue
        lengths = [len(s.prompt_ids) for s in ref.sequences]
        return LongContextReference(
            reference=ref, served_context_tokens=context_tokens, prompt_tokens=lengths,
            shortened="; ".join(tried) or None)


def _tokenizer(endpoint: Endpoint, timeout_s: float) -> Tokenize:
    sc, base = endpoint.scoring, endpoint.base_url.rstrip("/")
    assert sc is not None  # the gate runs only on engines with exact scoring

    def tokenize(text: str) -> list[int]:
        with httpx.Client(timeout=timeout_s) as client:
            return sc.tokenize(client, base, endpoint.model, text)
    return tokenize


def long_check_reason(candidate: AnyServingConfig, incumbent: AnyServingConfig | None
                      ) -> str | None:
    """What makes `candidate` need the long-context check against the configuration it
    modifies: a change of KV precision or of weights; None for any other change (its numerics
    at long context are the incumbent's, which passed or was the reference)."""
    if incumbent is None:
        return None
    knobs = adapter_for(candidate.engine).kv_dtype_knobs
    kv = [f"{k} {getattr(incumbent, k, None)} -> {getattr(candidate, k, None)}" for k in knobs
          if getattr(candidate, k, None) != getattr(incumbent, k, None)]
    if kv:
        return "KV precision (" + ", ".join(kv) + ")"
    if candidate.model_path != incumbent.model_path:
        return (f"weights ({PurePath(incumbent.model_path).name} -> "
                f"{PurePath(candidate.model_path).name})")
    return None
