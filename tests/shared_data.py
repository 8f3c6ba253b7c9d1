"""Locate ../shared (beside the checkout, for developers and CI alike). Tests that need its
fixtures fail, never skip, when it is missing: a skipped fixture test would hide a regression."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
MODEL_CONFIGS = SHARED / "data" / "model-configs"
GPU_SPECS_CSV = SHARED / "data" / "gpu_specs.csv"


def require(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"fixture {path} missing: tests expect ../shared beside the checkout")
    return path
