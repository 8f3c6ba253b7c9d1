"""Where a run's files go: `<runs root>/<run-id>/` with report.md, report.json and one folder per
trial (engine log, per-request records). The root is `--runs-dir`, else $INFOPT_RUNS_DIR, else
./runs (ignored by git)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from pydantic import ValidationError

from infopt.specs.results import NoFitReport, OptimizationReport, RequestRecord, Trial


def runs_root(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("INFOPT_RUNS_DIR") or "runs").expanduser().resolve()


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{secrets.token_hex(2)}"


def trial_dir(run_dir: Path, trial_id: str) -> Path:
    return run_dir / "trials" / trial_id


def write_records(run_dir: Path, trial_id: str, records: list[RequestRecord]) -> Path:
    path = trial_dir(run_dir, trial_id) / "requests.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def atomic_write(path: Path, text: str) -> None:
    # Write then rename: a crash never leaves a half-written file behind.
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_trial(run_dir: Path, key: str, trial: Trial) -> Path:
    """trials/<key>/trial.json, atomically: it exists only once the trial is complete."""
    path = trial_dir(run_dir, key) / "trial.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, trial.model_dump_json(indent=2))
    return path


def load_trial(run_dir: Path, key: str) -> Trial | None:
    """A completed trial of this key, or None (never run, interrupted, or unreadable: then it
    is run again rather than trusted)."""
    path = trial_dir(run_dir, key) / "trial.json"
    try:
        return Trial.model_validate_json(path.read_text())
    except (OSError, ValidationError):
        return None


def write_report(run_dir: Path, report: OptimizationReport | NoFitReport, markdown: str
                 ) -> tuple[Path, Path]:
    run_dir.mkdir(parents=True, exist_ok=True)
    md, js = run_dir / "report.md", run_dir / "report.json"
    atomic_write(js, report.model_dump_json(indent=2))
    atomic_write(md, markdown)
    return md, js
