"""Upstream issue search through GitHub's REST search API (GET /search/issues), with httpx.

The base URL is a parameter (tests point it at a local fake speaking the same wire format); the
token comes from the caller (an InfoptCredentials block or $GITHUB_TOKEN) and is only ever sent
as an Authorization header, and only to https://api.github.com unless the caller trusts the
other URL explicitly (`token_to_url`, the request's `github_token_to_url`): a `github_url` typed
into a request file must not be a way to collect the token. What leaves the machine is the
search terms of the root error line (numbers, paths, quoted values and hex dropped) plus the
repository qualifiers, never the log; every search says so in one INFO line before it sends.
Rate limits are respected: a 403/429 with X-RateLimit-Remaining: 0 or Retry-After stops
searching and says so; nothing is retried in a tight loop. Offline (the API
unreachable) -> no upstream results, and the diagnosis says "catalog only".
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass

import httpx

from infopt.specs.diagnosis import IssueMatch

DEFAULT_API = "https://api.github.com"
_LOG = logging.getLogger(__name__)


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


def token_allowed(base_url: str, token_to_url: bool = False) -> bool:
    """Whether the GitHub token may go to `base_url`: GitHub's own API over TLS, or a URL the
    caller explicitly trusts (a GitHub Enterprise host). A bare `github_url` is not trust: it
    can come from a request file or a deployment parameter someone else wrote."""
    if token_to_url:
        return True
    url = httpx.URL(base_url)
    return url.scheme == "https" and url.host == httpx.URL(DEFAULT_API).host


def search_notice(base: str, repos: list[str], terms: str, who: str) -> str:
    """The line every search logs before it sends: where, what and how to turn it off."""
    return (f"github: searching issues of {', '.join(repos)} at {httpx.URL(base).host} "
            f"({who}): the search terms of the engine log's error line leave this machine "
            f"('{terms}'); set github_search: false (infopt diagnose --no-search) to keep "
            "them here")


def search_issues(root_error: str, engine: str, *, base_url: str | None = None,
                  token: str | None = None, token_to_url: bool = False, per_repo: int = 5,
                  timeout_s: float = 10.0,
                  log: logging.Logger | logging.LoggerAdapter | None = None) -> SearchOutcome:
    """`token` goes only where `token_allowed` says; `log` (default: this module's logger;
    a task passes its run logger) gets the notice before anything is sent."""
    log = log or _LOG
    base = (base_url or os.environ.get("INFOPT_GITHUB_API") or DEFAULT_API).rstrip("/")
    terms = search_terms(root_error)
    if not terms:
        return SearchOutcome([], "github: nothing distinctive to search for")
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    withheld = ""
    if token and token_allowed(base, token_to_url):
        headers["Authorization"] = f"Bearer {token}"
    elif token:
        withheld = (f"token withheld from {httpx.URL(base).host} (not api.github.com); "
                    "set github_token_to_url to send it")
    repos = upstream_repos(engine)
    who = ("with the GitHub token" if "Authorization" in headers
           else f"unauthenticated: {withheld}" if withheld else "unauthenticated")
    log.info("%s", search_notice(base, repos, terms, who))
    outcome = _search(base, headers, repos, terms, per_repo, timeout_s)
    # Said again in the outcome: the diagnosis (and so the report) keeps it.
    return SearchOutcome(outcome.matches,
                         f"{outcome.status}; github: {withheld}" if withheld else outcome.status)


def _search(base: str, headers: dict[str, str], repos: list[str], terms: str, per_repo: int,
            timeout_s: float) -> SearchOutcome:
    matches: list[IssueMatch] = []
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
