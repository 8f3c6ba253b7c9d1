"""What a flow's user error looks like on the terminal: the CLI's one paragraph, not Prefect's
traceback. Prefect logs every exception that ends a flow or task run with its traceback; for an
`InfoptError` (an input or an environment the user can fix) that trace says nothing the message
does not, and buries it. Its console handlers drop those records; the API's log handler keeps
them, so the run's page in the UI still has the full trace for whoever debugs it.
"""

from __future__ import annotations

import logging

from infopt.specs.base import InfoptError


class _UserErrorTraceFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, InfoptError)


def hide_user_error_traces() -> None:
    """Add the filter to every console handler under the `prefect` logger tree (call after
    Prefect has configured its logging, i.e. after `import prefect`)."""
    import prefect  # noqa: F401 - its import configures the handlers this filters

    loggers = [logging.getLogger(), logging.getLogger("prefect"),
               *(logging.getLogger(n) for n in logging.root.manager.loggerDict
                 if n.startswith("prefect."))]
    for logger in loggers:
        for handler in logger.handlers:
            console = (isinstance(handler, logging.StreamHandler)
                       and not isinstance(handler, logging.FileHandler))
            if console and not any(isinstance(f, _UserErrorTraceFilter)
                                   for f in handler.filters):
                handler.addFilter(_UserErrorTraceFilter())


def check_prefect_api(what: str, temporary_ok: bool = True) -> None:
    """When PREFECT_API_URL names a server, that it answers: a server that is down would
    otherwise surface as Prefect's `Failed to reach API` traceback once the flow starts (or an
    httpx ConnectError from the approvals client). `what` says what needed it; `temporary_ok`:
    a temporary local server would do instead (not for answering another run's gate)."""
    import os

    import httpx

    from infopt.specs.base import InputError

    url = os.environ.get("PREFECT_API_URL")
    if not url:
        return
    try:
        answer = httpx.get(url.rstrip("/") + "/health", timeout=5.0)
        problem = None if answer.status_code == 200 else f"HTTP {answer.status_code}"
    except httpx.HTTPError as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        raise InputError(
            f"PREFECT_API_URL is {url}, but no Prefect server answers there ({problem}), and "
            f"{what} needs it. Start it (`prefect server start`) or point PREFECT_API_URL at the "
            "running one" + ("; or unset PREFECT_API_URL to run on a temporary local server"
                             if temporary_ok else ""))
