"""Where a run's files go: `<runs root>/<run-id>/` with report.md, report.json and one folder per
trial (engine log, per-request records). The root is `--runs-dir`, else $INFOPT_RUNS_DIR, else
./runs (ignored by git).

A run folder may have a results store attached (`attach_store`, infopt.runs.store): then every
file written here through `atomic_write` (trials, reports, request.json, contract and quality
verdicts, per-request records) is also written to the store, once complete locally, so a run
whose disk goes away resumes elsewhere. The attachment lives in this process (the flow's tasks
run in its threads); store.json in the run folder records it for people, without secrets.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from infopt.runs.store import RunStore
from infopt.specs.base import InfoptError
from infopt.specs.results import NoFitReport, OptimizationReport, RequestRecord, Trial

# Run folder (resolved) -> the store its writes are mirrored to.
_ATTACHED: dict[Path, RunStore] = {}


def runs_root(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("INFOPT_RUNS_DIR") or "runs").expanduser().resolve()


def locate_run(ref: str, runs_dir: str | None = None) -> tuple[Path, str]:
    """(the runs root, the run id) of a run named by its id (a folder under --runs-dir,
    $INFOPT_RUNS_DIR or ./runs) or by its folder's path (anything with a slash: runs/A,
    /data/runs/A), so a path a shell completes and an id `infopt optimize` printed both work."""
    if "/" in ref or os.sep in ref:
        folder = Path(ref).expanduser().resolve()
        return folder.parent, folder.name
    return runs_root(runs_dir), ref


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{secrets.token_hex(2)}"


def trial_dir(run_dir: Path, trial_id: str) -> Path:
    return run_dir / "trials" / trial_id


def write_records(run_dir: Path, trial_id: str, records: list[RequestRecord]) -> Path:
    path = trial_dir(run_dir, trial_id) / "requests.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(r.model_dump_json() + "\n" for r in records))
    return path


def atomic_write(path: Path, text: str) -> None:
    """Write `path` whole (`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary sibling to write `path` through (any writer: text, Parquet, PNG), renamed
    onto `path` only once the block completes, so a crash or a full disk never leaves a
    half-written file; then mirrored to the run's results store when one is attached (a store
    failure raises StoreError: a run that cannot be resumed elsewhere must not pass as one that
    can). A write the filesystem refuses is one paragraph (`write_error`)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_error(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if _ATTACHED and (found := attached_store(path)) is not None:
        found[1].put_file(found[0], path)


def write_error(path: Path, exc: OSError) -> InfoptError:
    """What to do when the filesystem refuses a write (full, read-only, not permitted)."""
    where = next((p for p in Path(path).absolute().parents if p.exists()), Path("/"))
    try:
        free = f"; {shutil.disk_usage(where).free:,} bytes free there"
    except OSError:
        free = ""
    return InfoptError(
        f"cannot write {path}: {exc.strerror or exc}{free}. Free space on that filesystem or "
        "point --runs-dir (or --out) at another one; a run folder keeps every completed trial, "
        "and `infopt optimize --resume RUN_ID` finishes it without re-running them")


def attach_store(run_dir: Path, store: RunStore) -> None:
    """Mirror every later `atomic_write` under `run_dir` to `store` (in this process), and
    record the store in run_dir/store.json (URL and options, no secrets)."""
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    _ATTACHED.pop(run_dir, None)  # store.json itself is local bookkeeping, not mirrored
    atomic_write(run_dir / "store.json", json.dumps(store.record(), indent=2))
    _ATTACHED[run_dir] = store


def detach_store(run_dir: Path) -> None:
    _ATTACHED.pop(Path(run_dir).resolve(), None)


def attached_store(path: Path) -> tuple[Path, RunStore] | None:
    """(run folder, store) of the attached run folder holding `path`, or None."""
    path = Path(path).resolve()
    return next(((d, s) for d, s in list(_ATTACHED.items()) if path.is_relative_to(d)), None)


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
