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


Counts = tuple[float, float, float | None]  # drafted, accepted, verification steps


def _get(endpoint: Endpoint, path: str, timeout_s: float) -> httpx.Response | None:
    try:
        r = httpx.get(endpoint.base_url.rstrip("/") + path, timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return r if r.status_code == 200 else None


def read_counters(endpoint: Endpoint, timeout_s: float = 5.0) -> Counts | None:
    """(drafted, accepted, steps) now, or None (no counters known, unreachable, not
    exposed); steps None where the server has no such counter."""
    c: SpecCounters | None = endpoint.spec_counters
    if c is None or (r := _get(endpoint, c.path, timeout_s)) is None:
        return None
    drafted, accepted = parse_counter(r.text, c.drafted), parse_counter(r.text, c.accepted)
    steps = parse_counter(r.text, c.drafts) if c.drafts else None
    return None if drafted is None or accepted is None else (drafted, accepted, steps)


def read_accept_length(endpoint: Endpoint, timeout_s: float = 5.0) -> float | None:
    """The server's own mean accepted length (SGLang: internal_states[0].
    avg_spec_accept_length of /get_server_info, cumulative since it started; absent until it
    has drafted); None where it gives none."""
    route = endpoint.spec_accept_length_route
    if route is None or (r := _get(endpoint, route, timeout_s)) is None:
        return None
    try:
        states = r.json().get("internal_states") or [{}]
        value = states[0].get("avg_spec_accept_length")
    except (ValueError, AttributeError, IndexError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def with_counted_drafts(level: LevelResult, before: Counts | None, after: Counts | None,
                        accept_length: float | None = None) -> LevelResult:
    """The level with the counters' difference as its drafted/accepted tokens (where the
    requests themselves reported none and the server drafted during the scenario), and the
    mean accepted length from the steps counter or the server's own figure."""
    update: dict = {}
    if accept_length is not None:
        update["spec_accept_length"] = round(accept_length, 3)
    if before is not None and after is not None:
        drafted, accepted = after[0] - before[0], after[1] - before[1]
        steps = (after[2] - before[2]) if after[2] is not None and before[2] is not None \
            else None
        if drafted > 0 and accepted >= 0:
            if level.draft_tokens_total is None:
                update |= {"draft_tokens_total": int(drafted),
                           "draft_tokens_accepted_total": int(accepted),
                           "draft_counts_source": "engine counters"}
            if steps:
                update["spec_accept_length"] = round(1 + accepted / steps, 3)
    return level.model_copy(update=update) if update else level
