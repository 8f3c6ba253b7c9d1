"""Test-wide settings: Prefect never writes to ~/.prefect and never phones home."""

from __future__ import annotations

import os
import tempfile

# Set before anything imports prefect (conftest is imported first).
_PREFECT_HOME = tempfile.mkdtemp(prefix="infopt-test-prefect-")
os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
# Helpers of the flow are also called directly in tests (outside a flow run).
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
