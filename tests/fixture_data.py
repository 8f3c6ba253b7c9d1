"""Paths of the fixture data shipped in tests/fixtures/ (a clone has no shared folder beside it).

The model configs were copied from the project's shared data folder on 2026-12-01 with their
SOURCES.txt (upstream repo, path and commit for each file). Tests that need a fixture fail,
never skip, when it is missing: a skipped fixture test would hide a regression."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODEL_CONFIGS = FIXTURES / "model_configs"


def require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"fixture {path} missing from tests/fixtures/")
    return path
