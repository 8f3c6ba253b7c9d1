"""The flows run in this process against the session's one real Prefect server
(tests/conftest.py: `prefect server start`, shared with the tests that drive it from other
processes; one server instead of two saves its ~20 s start)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def prefect_api(prefect_server):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        yield
