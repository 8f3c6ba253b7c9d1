"""A per-machine record of the engines infopt started, so an optimizer killed with SIGKILL (no
atexit, no signal handler) leaves no engine running once the next `infopt` command starts.

One JSON file per engine process group under `$INFOPT_CACHE_DIR/live-engines/`: the engine's
pid (its group id), the owning optimizer's pid and that pid's kernel start time (so a recycled
pid is never mistaken for the owner), and the engine's own start time (so a recycled engine pid
is never killed). `reap_stale()` ends every group whose owner is gone.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

from infopt.bootstrap import cache_root


def registry_dir() -> Path:
    return cache_root() / "live-engines"


def process_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])


@dataclass(frozen=True)
class EngineEntry:
    pgid: int
    engine_start_ticks: int | None
    owner_pid: int
    owner_start_ticks: int | None
    command: str


def record(pgid: int, command: str) -> Path:
    entry = EngineEntry(pgid=pgid, engine_start_ticks=process_start_ticks(pgid),
                        owner_pid=os.getpid(), owner_start_ticks=process_start_ticks(os.getpid()),
                        command=command)
    d = registry_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{pgid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(entry)))
    tmp.replace(path)
    return path


def forget(pgid: int) -> None:
    (registry_dir() / f"{pgid}.json").unlink(missing_ok=True)


def _alive(pid: int, start_ticks: int | None) -> bool:
    ticks = process_start_ticks(pid)
    return ticks is not None and (start_ticks is None or ticks == start_ticks)


def reap_stale() -> list[EngineEntry]:
    """SIGKILL the process group of every recorded engine whose optimizer is gone; returns them.
    Engines of live optimizers (another run on this machine) are left alone."""
    reaped = []
    d = registry_dir()
    for path in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            entry = EngineEntry(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # unreadable: nothing we could safely act on
            continue
        if _alive(entry.owner_pid, entry.owner_start_ticks):
            continue
        if _alive(entry.pgid, entry.engine_start_ticks):
            try:
                os.killpg(entry.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            reaped.append(entry)
        path.unlink(missing_ok=True)
    return reaped
