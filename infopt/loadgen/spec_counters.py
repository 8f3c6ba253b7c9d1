"""Speculative decoding's drafted and accepted tokens from a server's own Prometheus counters
(Endpoint.spec_counters), read before and after a scenario: for servers that report them only
in totals (vLLM). The difference covers the scenario's warm-up requests too, which draw from
the same distribution; a failed read gives nothing, never a guess."""

from __future__ import annotations

import httpx

from infopt.specs.endpoint import Endpoint, SpecCounters
from infopt.specs.results import LevelResult


def parse_counter(text: str, name: str) -> float | None:
    """The sum of `name` over its label sets in Prometheus text (None: not exposed)."""
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{", 1)[0].strip() != name:
            continue  # a longer name with this prefix (..._per_pos_total)
        try:
            total += float(value)
        except ValueError:
            continue
        seen = True
    return total if seen else None


def read_counters(endpoint: Endpoint, timeout_s: float = 5.0) -> tuple[float, float] | None:
    """(drafted, accepted) now, or None (no counters known, unreachable, not exposed)."""
    c: SpecCounters | None = endpoint.spec_counters
    if c is None:
        return None
    try:
        r = httpx.get(endpoint.base_url.rstrip("/") + c.path, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    drafted, accepted = parse_counter(r.text, c.drafted), parse_counter(r.text, c.accepted)
    return None if drafted is None or accepted is None else (drafted, accepted)


def with_counted_drafts(level: LevelResult, before: tuple[float, float] | None,
                        after: tuple[float, float] | None) -> LevelResult:
    """The level with the counters' difference as its drafted/accepted tokens, where the
    requests themselves reported none and the server drafted during the scenario."""
    if level.draft_tokens_total is not None or before is None or after is None:
        return level
    drafted, accepted = after[0] - before[0], after[1] - before[1]
    if drafted <= 0 or accepted < 0:
        return level
    return level.model_copy(update={"draft_tokens_total": int(drafted),
                                    "draft_tokens_accepted_total": int(accepted),
                                    "draft_counts_source": "engine counters, warm-up included"})
