"""What every contract probe shares: the endpoint, the official SDK clients (openai; anthropic,
made on first use), raw httpx headers, and how an exception becomes a check status.

A probe is a function ProbeContext -> (CheckStatus, detail, evidence dict); it never depends on
what the model says being true (SmolLM2-135M's facts are unreliable), only on how the server
says it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import cached_property
from typing import Any

import httpx
import openai

from infopt.specs.base import InputError
from infopt.specs.contract import CheckStatus
from infopt.specs.endpoint import Endpoint

PROBE_TOKENS = 8
PROMPT = [{"role": "user", "content": "Write two sentences about the sea."}]

ProbeResult = tuple[CheckStatus, str, dict[str, Any]]
Probe = Callable[["ProbeContext"], ProbeResult]


class ProbeContext:
    def __init__(self, endpoint: Endpoint, api_key: str | None, timeout_s: float) -> None:
        self.endpoint, self.timeout_s = endpoint, timeout_s
        self.model = endpoint.model
        self.base = endpoint.base_url.rstrip("/")
        self.api_key = api_key
        self.sdk = openai.OpenAI(base_url=f"{self.base}/v1", api_key=api_key or "unused",
                                 max_retries=0, timeout=timeout_s, default_headers=self._close())
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s

    @cached_property
    def anthropic(self):  # -> anthropic.Anthropic
        # The SDK appends /v1/messages to the base URL; it sends the key as x-api-key.
        import anthropic  # 2.6 s to import: only the Messages probes need it

        return anthropic.Anthropic(base_url=self.base, api_key=self.api_key or "unused",
                                   max_retries=0, timeout=self.timeout_s,
                                   default_headers=self._close())

    def _close(self) -> dict[str, str]:
        """No connection reuse against a server that closes a connection after a stream
        without saying so (llama-server: Endpoint.keepalive False): a request sent on the
        reused connection races the close and fails as a connection error, a client artefact
        (seen in a flow run), not the server's contract. `Connection: close` works with
        either SDK's HTTP stack (the anthropic SDK 2.x brings its own httpx fork)."""
        return {} if self.endpoint.keepalive else {"Connection": "close"}

    def chat(self, **kw: Any):
        body = {"model": self.model, "messages": PROMPT, "temperature": 0.0, **kw}
        return self.sdk.chat.completions.create(**body)

    def forced(self, n: int = PROBE_TOKENS) -> dict[str, Any]:
        return {"extra_body": self.endpoint.forced_fields(n)}


# A 4xx that means "I do not do this": the server refused the feature, which is unsupported,
# not broken. Any other status on a well-formed request is a failure.
_REFUSED = {400, 404, 405, 422, 501}


def sdk_errors(name: str) -> tuple[type[Any], ...]:
    """openai's exception class `name`, and anthropic's once its SDK is loaded: it is imported
    only by the probes that use it, so none of its errors can be raised before. Typed Any: the
    two SDKs' classes share attributes (status_code) but no base class. Joined with other
    classes by `+`, as mypy does not read a starred item in an `except` tuple."""
    sdks = [openai] + ([sys.modules["anthropic"]] if "anthropic" in sys.modules else [])
    return tuple(getattr(m, name) for m in sdks)


def run_probe(probe: Probe, c: ProbeContext) -> ProbeResult:
    try:
        return probe(c)
    except sdk_errors("APIStatusError") as exc:
        status = CheckStatus.UNSUPPORTED if exc.status_code in _REFUSED else CheckStatus.FAIL
        return status, f"HTTP {exc.status_code}: {str(exc)[:200]}", {"error": str(exc)[:500]}
    except sdk_errors("APITimeoutError") + (httpx.TimeoutException,):
        # Reachable (the endpoint answered /v1/models first), but not within the probe's time.
        return CheckStatus.FAIL, f"no answer within {c.timeout_s:.0f} s", {}
    except sdk_errors("APIConnectionError") + (httpx.TransportError,) as exc:
        raise InputError(f"cannot reach {c.endpoint.base_url} ({exc}); give the base URL of a "
                         "running OpenAI-compatible server, e.g. http://127.0.0.1:8000") from None
    # The SDKs' response models are lenient (a missing field reads as None), so a response
    # without a documented field surfaces here, as the probe reads it.
    except ((json.JSONDecodeError, TypeError, AttributeError, IndexError, KeyError)
            + sdk_errors("APIResponseValidationError")) as exc:  # answered, but not in the shape
        return (CheckStatus.FAIL, f"the response is not in the documented shape "
                f"({type(exc).__name__}: {exc})"[:240], {})
