"""The run's clock and its steps: the time budget, each step time-boxed, logged and recorded.

Standard library only (see common.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from bench.gpu_check.common import capture, say

KILL_AFTER_S = 10  # a step stopped at its time box gets this long to end before SIGKILL
RESERVE_S = 95  # after the build: the measured inventory, llama-bench, the served measurement
BUILD_MAX_S = 450
DRY_SLOWDOWN = 5  # a rehearsal on the CPU llama-server: its decode is ~50x slower


# ---------------------------------------------------------------------------------------------
# the budget arithmetic (pure)


def build_cap(left_s: int) -> int:
    """The background build's time box: what the budget leaves after the steps that need the
    build, at most 450 s."""
    return min(left_s - RESERVE_S, BUILD_MAX_S)


def within(left_s: int, want_s: int, floor_s: int, dry: bool) -> int:
    """A measurement's time box: `want_s`, or what is left of the budget (less 5 s for the
    summary), but at least `floor_s` (a measurement cut short says nothing)."""
    if dry:
        want_s, floor_s = want_s * DRY_SLOWDOWN, floor_s * DRY_SLOWDOWN
    return max(min(left_s - 5, want_s), floor_s)


def optimize_limit(left_s: int, min_s: int) -> int:
    """The optimize step gets what is left less 15 s (the summary and the logs), or 0 (skipped)
    under `min_s`: a shorter run would not reach its report."""
    t = left_s - 15
    return t if t >= min_s else 0


class Budget:
    """GPU_CHECK_BUDGET_S, counted in whole seconds from the run's start."""

    def __init__(self, total_s: int, dry: bool, clock: Callable[[], float] = time.monotonic):
        self.total_s, self.dry, self._clock = total_s, dry, clock
        self._t0 = clock()

    def now(self) -> float:
        return self._clock()

    def elapsed(self) -> int:
        return int(self._clock() - self._t0)

    def left(self) -> int:
        return self.total_s - self.elapsed()

    def within(self, want_s: int, floor_s: int) -> int:
        return within(self.left(), want_s, floor_s, self.dry)


# ---------------------------------------------------------------------------------------------
# running the steps

Out = Path | int | None  # a file to write, subprocess.STDOUT / DEVNULL, or the console


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


class Runner:
    """Every command of a run goes through here: `execute` (time-boxed, in a process group of
    its own so the box stops everything it started, as `timeout -k 10` did) and `capture`.
    Tests replace those two and keep the rest (skips, records, console lines)."""

    def __init__(self, work: Path, budget: Budget, env: dict[str, str]):
        self.work, self.budget, self.env = work, budget, env
        self._lock = threading.Lock()

    def execute(self, argv: Sequence[str], limit_s: float | None = None, stdout: Out = None,
                stderr: Out = None) -> int:
        """The exit status as the shell gives it: 124 when stopped at `limit_s`, 137 when it
        then needed SIGKILL, 127 when the program is not there, 128 + N when signal N ended it."""
        sys.stdout.flush()
        files: list[IO[bytes]] = []

        def target(o: Out) -> int | IO[bytes] | None:
            if isinstance(o, Path):
                files.append(o.open("wb"))
                return files[-1]
            return o

        try:
            try:
                proc = subprocess.Popen(list(argv), stdout=target(stdout), stderr=target(stderr),
                                        env=self.env, start_new_session=True)
            except OSError as exc:
                print(f"gpu_check: {argv[0]}: {exc.strerror}", file=sys.stderr, flush=True)
                return 127
            try:
                rc = proc.wait(timeout=limit_s)
                return rc if rc >= 0 else 128 - rc  # killed by a signal: the shell's number
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=KILL_AFTER_S)
                    return 124
                except subprocess.TimeoutExpired:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return 137
            except BaseException:  # interrupted: leave nothing of the step running
                _signal_group(proc.pid, signal.SIGKILL)
                raise
        finally:
            for f in files:
                f.close()

    def capture(self, argv: Sequence[str], env: Mapping[str, str] | None = None,
                timeout_s: float = 120, merge: bool = True) -> tuple[int, str]:
        """common.capture in the run's environment, or in `env`."""
        return capture(argv, self.env if env is None else env, timeout_s, merge)

    def record(self, name: str, status: int | str, seconds: int, note: str = "") -> None:
        """One line of $WORK/stages.tsv, which the summary reads."""
        with self._lock, (self.work / "stages.tsv").open("a") as fh:
            fh.write(f"{name}\t{status}\t{seconds}\t{note}\n")

    def stage(self, name: str, limit_s: int, argv: Sequence[str], stdout: Out = None,
              stderr: Out = None) -> int:
        """Run one step in its time box, or skip it (exit 1, recorded) when the box is empty."""
        if limit_s <= 0:
            say(f"skip {name}: too little of the {self.budget.total_s} s budget left")
            self.record(name, "skipped", 0, "too little time left")
            return 1
        say(f"{name} (at most {limit_s} s)")
        t = self.budget.now()
        rc = self.execute(argv, limit_s, stdout, stderr)
        secs = int(self.budget.now() - t)
        note = f"stopped at its {limit_s} s limit" if rc in (124, 137) else ""
        self.record(name, rc, secs, note)
        say(f"{name}: exit {rc} after {secs} s" + (f" ({note})" if note else ""))
        return rc

    def background(self, name: str, limit_s: int, argv: Sequence[str]) -> threading.Thread:
        """A stage beside the others (the build: it takes every core for minutes)."""
        thread = threading.Thread(target=self.stage, args=(name, limit_s, argv), daemon=True)
        thread.start()
        return thread
