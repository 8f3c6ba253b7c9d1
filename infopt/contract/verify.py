"""The whole contract: every route's probes in one registry, run against one endpoint, each a
`ContractCheck` with its evidence file. `infopt verify` and the verify-contract task call
`verify_endpoint`; `required` marks what the caller depends on (the load generator's own needs
and each requested route's basics are always required)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from infopt.runs.rundir import atomic_write
from infopt.specs.base import InputError
from infopt.specs.contract import ContractCheck
from infopt.specs.endpoint import Endpoint

from . import anthropic_messages, chat_tools, errors, openai_chat, reasoning, responses
from .context import Probe, ProbeContext, run_probe

PROBES: dict[str, tuple[str, bool, Probe]] = {
    **openai_chat.PROBES, **reasoning.PROBES, **chat_tools.PROBES, **errors.PROBES,
    **responses.PROBES, **anthropic_messages.PROBES}
FEATURES = tuple(PROBES)
# What a client of each route needs at the least: required whenever the route is requested.
ROUTE_BASICS = {"chat_completions": openai_chat.BASE_REQUIRED, "completions": ("models",),
                "responses": ("responses_create", "responses_stream"),
                "anthropic_messages": ("messages_create", "messages_stream")}


def required_for(routes: list[str], features: list[str]) -> tuple[str, ...]:
    """The required checks of a request: each route's basics plus the features it names that
    have a probe (the others are reported as not checked by the caller)."""
    out = [f for r in routes for f in ROUTE_BASICS.get(r, ())] + [
        f for f in features if f in PROBES]
    return tuple(dict.fromkeys(out))


def require_openai_server(endpoint: Endpoint, headers: dict[str, str],
                           timeout_s: float) -> None:
    """One paragraph, before any probe, for a URL that is no OpenAI-compatible server at all
    (a web page, another API): every probe would only fail the same way. A 401 is not this:
    it is an authenticating server, and the probes report it."""
    try:
        r = httpx.get(f"{endpoint.base_url.rstrip('/')}/v1/models", headers=headers,
                      timeout=timeout_s)
    except httpx.TransportError as exc:
        raise InputError(f"cannot reach {endpoint.base_url} ({exc}); give the base URL of a "
                         "running OpenAI-compatible server, e.g. http://127.0.0.1:8000") from None
    if r.status_code in (401, 403):
        return
    try:
        ok = r.status_code == 200 and isinstance(r.json().get("data"), list)
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        raise InputError(f"{endpoint.base_url} is not an OpenAI-compatible server: GET "
                         f"/v1/models answered HTTP {r.status_code} "
                         f"({r.headers.get('content-type', 'no content type')}: "
                         f"{r.text[:80]!r}); give the base URL the server's /v1 routes hang "
                         "off (without /v1), e.g. http://127.0.0.1:8000")


def only_served_model(base_url: str, api_key: str | None = None, timeout_s: float = 10.0
                      ) -> str:
    """The one model a server lists on /v1/models, for a verify that names none; InputError
    (one paragraph, the names listed) when it lists none or several, or cannot be asked."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/v1/models"
    try:
        r = httpx.get(url, headers=headers, timeout=timeout_s)
        ids = [m["id"] for m in r.json()["data"]] if r.status_code == 200 else None
    except httpx.TransportError as exc:
        raise InputError(f"cannot reach {base_url} ({exc}); give the base URL of a running "
                         "OpenAI-compatible server, e.g. http://127.0.0.1:8000") from None
    except (ValueError, KeyError, TypeError):
        ids = None
    if ids is None:
        raise InputError(f"--model not given and GET {url} did not list the served models "
                         f"(HTTP {r.status_code}); give --model, the name the server serves "
                         "the model under")
    if len(ids) != 1:
        listed = ", ".join(repr(i) for i in ids[:10]) or "none"
        raise InputError(f"--model not given and the server lists {len(ids)} models "
                         f"({listed}); give --model with the one to verify")
    return str(ids[0])


def _writable(evidence_dir: Path) -> None:
    try:
        evidence_dir.mkdir(parents=True, exist_ok=True)
        (evidence_dir / ".write-test").touch()
        (evidence_dir / ".write-test").unlink()
    except OSError as exc:
        raise InputError(f"cannot write contract evidence to {evidence_dir} "
                         f"({exc.strerror or exc}); give a writable folder") from None


def verify_endpoint(endpoint: Endpoint, *, required: tuple[str, ...] = (),
                    features: tuple[str, ...] = FEATURES, api_key: str | None = None,
                    evidence_dir: Path | None = None, timeout_s: float = 60.0
                    ) -> list[ContractCheck]:
    """Probe each feature; `required` (plus the chat basics) marks what the caller needs."""
    if unknown := sorted((set(required) | set(features)) - set(PROBES)):
        raise InputError(f"unknown contract feature(s) {unknown}; known: {list(PROBES)}")
    c = ProbeContext(endpoint, api_key, timeout_s)
    must = set(required) | set(openai_chat.BASE_REQUIRED)
    if evidence_dir is not None:  # checked before any probe: a bad folder must not cost a run
        _writable(evidence_dir)
    require_openai_server(endpoint, c.headers, timeout_s)
    checks = []
    for feature in features:
        route, streamed, probe = PROBES[feature]
        status, detail, evidence = run_probe(probe, c)
        path = None
        if evidence_dir is not None:
            path = evidence_dir / f"{feature}.json"
            atomic_write(path, json.dumps({"feature": feature, "status": status.value,
                                           "detail": detail, "evidence": evidence},
                                          indent=2, default=str)[:200_000])
        checks.append(ContractCheck(route=route, feature=feature, stream=streamed,
                                    status=status, detail=detail, required=feature in must,
                                    evidence=str(path) if path else None))
    return checks
