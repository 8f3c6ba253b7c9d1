"""One memo for the results a machine keeps between runs (issue 48): the contract probes' tables
and the quality gate's references, floors, scores and verdicts. Each kind of result is a folder
of files named by a content key under the machine's cache ($INFOPT_CACHE_DIR/<kind>, or where
its own variable points: tests give every session a folder of its own, so no verdict comes from
an earlier session). What a key covers is each domain's (infopt.contract.keys.contract_key,
infopt.quality.keys.quality_key): a memo only stores and recalls by it."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from infopt.bootstrap import cache_root
from infopt.runs.rundir import atomic_write


@dataclass(frozen=True)
class Memo:
    kind: str  # the folder under the machine's cache
    variable: str  # the environment variable that moves it

    @property
    def root(self) -> Path:
        where = os.environ.get(self.variable)
        return Path(where).expanduser() if where else cache_root() / self.kind

    def path(self, name: str) -> Path:
        return self.root / name

    def recall(self, name: str) -> str | None:
        """The kept text of `name`, or None when this machine has none."""
        path = self.path(name)
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def keep(self, name: str, text: str) -> None:
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)

    def recall_into(self, path: Path) -> bool:
        """Whether `path` (a run folder's copy) is there, copied from the memo when only the
        memo has it."""
        if path.is_file():
            return True
        kept = self.path(path.name)
        if not kept.is_file():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kept, path)
        return True

    def keep_from(self, path: Path) -> None:
        """Keep a run folder's file under its own name."""
        self.keep(path.name, path.read_text(encoding="utf-8"))


CONTRACT = Memo("contract", "INFOPT_CONTRACT_CACHE_DIR")
QUALITY = Memo("quality", "INFOPT_QUALITY_CACHE_DIR")
