"""The quality gate's files that a run and the machine's memo keep (runs/memo.py QUALITY):
scored sequences, saved as they are scored so a crash loses nothing, and the short pool's
floor beside its reference. Shared by the short gate (gate_run.py) and the long-context check
(long_run.py)."""

from __future__ import annotations

import json
from pathlib import Path

from infopt.runs.memo import QUALITY
from infopt.runs.rundir import atomic_write
from infopt.specs.quality import FidelityResult, ScoredSequence


def load_scores(path: Path) -> list[ScoredSequence]:
    """What was scored into `path` (here or kept by the machine), else nothing."""
    if not QUALITY.recall_into(path):
        return []
    return [ScoredSequence.model_validate(r) for r in json.loads(path.read_text("utf-8"))]


def save_scores(path: Path, scores: list[ScoredSequence]) -> None:
    atomic_write(path, json.dumps([s.model_dump(mode="json") for s in scores]))
    QUALITY.keep_from(path)


def floor_path(reference_path: str | Path) -> Path:
    ref = Path(reference_path)
    return ref.with_name(ref.name.replace("reference-", "floor-", 1))


def load_floor(reference_path: str | Path) -> FidelityResult:
    """The short pool's floor saved beside its reference (gate_run.quality_reference)."""
    return FidelityResult.model_validate_json(
        floor_path(reference_path).read_text(encoding="utf-8"))
