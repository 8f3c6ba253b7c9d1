"""Thin Prefect tasks, one module per loop stage. Logic lives in `infopt`; a task adds retries,
caching policy, logging and UI visibility only."""
