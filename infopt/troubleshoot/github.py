"""Upstream issue search through GitHub's REST search API (GET /search/issues), with httpx.

The base URL is a parameter (tests point it at a local fake speaking the same wire format); the
token comes from the caller (an InfoptCredentials block or $GITHUB_TOKEN) and is only ever sent
as an Authorization header. Rate limits are respected: a 403/429 with X-RateLimit-Remaining: 0
or Retry-After stops searching and says so; nothing is retried in a tight loop. Offline (the API
unreachable) -> no upstream results, and the diagnosis says "catalog only".
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

import httpx

from infopt.specs.diagnosis import IssueMatch

DEFAULT_API = "https://api.github.com"


def upstream_repos(engine: str) -> list[str]:
    """The engine's upstream repositories (adapter data); every engine's for an unknown one."""
    from infopt.engines import ENGINES

    for name, adapter in ENGINES.items():
        if name.value == engine:
            return list(adapter.upstream_repos)
    return [r for a in ENGINES.values() for r in a.upstream_repos]


@dataclass(frozen=True)
class SearchOutcome:
    matches: list[IssueMatch]
    status: str  # "github: 3 results", "github: rate limited until ...", "offline: ..."


def github_token(environ: dict[str, str] | None = None) -> str | None:
    return (environ if environ is not None else os.environ).get("GITHUB_TOKEN") or None


_VOLATILE = re.compile(r"0x[0-9a-f]+|\d+(?:\.\d+)?|'[^']*'|\"[^\"]*\"|/[\w./-]+")


def search_terms(root_error: str, max_words: int = 12) -> str:
    """The distinctive words of a root error: numbers, paths, quoted values and hex dropped
    (they differ between reports), GitHub search syntax characters removed."""
    text = _VOLATILE.sub(" ", root_error)
    words = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", text)]
    seen: list[str] = []
    for w in words:
        if w.lower() not in {s.lower() for s in seen}:
            seen.append(w)
    return " ".join(seen[:max_words])


def _score(terms: str, title: str, body: str) -> float:
    want = {w.lower() for w in terms.split()}
    if not want:
        return 0.0
    have = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", f"{title} {body}")}
    return round(len(want & have) / len(want), 3)


def search_issues(root_error: str, engine: str, *, base_url: str | None = None,
                  token: str | None = None, per_repo: int = 5, timeout_s: float = 10.0
                  ) -> SearchOutcome:
    base = (base_url or os.environ.get("INFOPT_GITHUB_API") or DEFAULT_API).rstrip("/")
    terms = search_terms(root_error)
    if not terms:
        return SearchOutcome([], "github: nothing distinctive to search for")
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    matches: list[IssueMatch] = []
    repos = upstream_repos(engine)
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=timeout_s) as client:
            for repo in repos:
                r = client.get("/search/issues", params={
                    "q": f"{terms} repo:{repo} is:issue", "per_page": per_repo,
                    "sort": "best-match"})
                if r.status_code in (403, 429) and (
                        r.headers.get("x-ratelimit-remaining") == "0" or "retry-after" in r.headers):
                    reset = r.headers.get("retry-after") or r.headers.get("x-ratelimit-reset")
                    when = (f"retry after {reset} s" if "retry-after" in r.headers else
                            f"until {time.strftime('%H:%M:%S', time.gmtime(int(reset)))} UTC"
                            if reset and reset.isdigit() else "later")
                    return SearchOutcome(_rank(matches),
                                         f"github: rate limited ({when}); "
                                         f"{len(matches)} results before the limit")
                if r.status_code == 401:
                    return SearchOutcome(_rank(matches), "github: token rejected (401); set a "
                                         "valid GITHUB_TOKEN or InfoptCredentials block")
                r.raise_for_status()
                for item in r.json().get("items", []):
                    matches.append(IssueMatch(
                        title=item.get("title", ""), url=item.get("html_url", ""),
                        state=item.get("state"), source="github",
                        score=_score(terms, item.get("title", ""), item.get("body") or "")))
    except httpx.TransportError as exc:
        return SearchOutcome([], f"offline: {base} unreachable ({type(exc).__name__}); "
                             "catalog only")
    except httpx.HTTPStatusError as exc:
        return SearchOutcome(_rank(matches), f"github: HTTP {exc.response.status_code}; "
                             "catalog only")
    return SearchOutcome(_rank(matches), f"github: {len(matches)} results for '{terms}'")


def _rank(matches: list[IssueMatch]) -> list[IssueMatch]:
    return sorted(matches, key=lambda m: m.score, reverse=True)
