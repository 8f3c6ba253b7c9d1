"""Fixtures several unit-test modules share."""

from __future__ import annotations

import shutil

import pytest

from tests.fixture_data import FIXTURES


@pytest.fixture
def runs(tmp_path):
    """A runs root holding one recorded optimize run, `r1` (report.json and request.json)."""
    run = tmp_path / "r1"
    run.mkdir()
    reports = FIXTURES / "reports"
    shutil.copy(reports / "llamacpp-optimize-report.json", run / "report.json")
    shutil.copy(reports / "llamacpp-optimize-request.json", run / "request.json")
    return tmp_path
