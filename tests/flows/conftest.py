"""One Prefect test server for the whole session (~11 s to start on 2 cores)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def prefect_api():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
