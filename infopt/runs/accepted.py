"""The accepted run of a runs root: the configuration a person deployed (`infopt accept
RUN_ID`, or a promoted re-tune), which the scheduled re-optimization re-measures after an engine
upgrade. One pointer per runs root (`<runs root>/accepted.json`, written atomically); keep one
runs root per deployed model and machine."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import ValidationError

from infopt.runs.rundir import atomic_write
from infopt.specs.base import InputError, Spec
from infopt.specs.request import OptimizeRequest
from infopt.specs.results import OptimizationReport

POINTER = "accepted.json"


class Accepted(Spec):
    run_id: str
    engine: str
    engine_version: str
    winner_label: str
    accepted_at: str
    accepted_by: str  # who or what: "infopt accept", "promoted by <gate answer>"


def load_optimization(run_dir: Path) -> tuple[OptimizationReport, OptimizeRequest]:
    """An optimize run's report and request, or one paragraph saying what is wrong."""
    report_path, request_path = run_dir / "report.json", run_dir / "request.json"
    if not report_path.is_file():
        raise InputError(f"{run_dir} holds no report.json: name a finished `infopt optimize` "
                         "run (its folder under the runs root)")
    try:
        report = OptimizationReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise InputError(f"{report_path} is not an optimize report (a no-fit report has no "
                         f"winner to re-measure): {str(exc).splitlines()[0][:200]}") from None
    try:
        request = OptimizeRequest.model_validate_json(request_path.read_text(encoding="utf-8"))
    except (OSError, ValidationError, UnicodeDecodeError) as exc:
        raise InputError(f"{request_path} is missing or unreadable ({type(exc).__name__}); "
                         "the re-measurement needs the run's own request") from None
    return report, request


def accept(root: Path, run_id: str, by: str) -> Accepted:
    report, _ = load_optimization(root / run_id)
    acc = Accepted(run_id=run_id, engine=report.engine, engine_version=report.engine_version,
                   winner_label=report.winner_label,
                   accepted_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), accepted_by=by)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write(root / POINTER, acc.model_dump_json(indent=2))
    return acc


def accepted(root: Path) -> Accepted:
    path = root / POINTER
    if not path.is_file():
        raise InputError(f"no accepted run in {root}: run `infopt accept RUN_ID --runs-dir "
                         f"{root}` for the configuration you deployed, or name the run with "
                         "baseline_run")
    try:
        return Accepted.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is corrupt ({str(exc).splitlines()[0][:160]}); run `infopt "
                         "accept RUN_ID` again") from None
