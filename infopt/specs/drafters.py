"""The drafter search's record (infopt.model.drafters): what it asked the hub, what it verified
as a drafter of the exact model, and what it turned down with the reason."""

from __future__ import annotations

from typing import Literal

from .base import Spec


class DrafterFinding(Spec):
    repo_id: str
    commit_sha: str | None  # every file read at this commit (None: unreadable)
    kind: Literal["eagle3", "eagle", "draft_model", "unknown"]
    verified: bool
    why: str  # what was checked, or why it was turned down


class DrafterSearch(Spec):
    base_model: str
    base_commit_sha: str
    endpoint: str
    queries: list[str]
    native_mtp: str | None  # the model's own MTP layers, with the config key that says so
    drafters: list[DrafterFinding]
    rejected: list[DrafterFinding]
