"""The drafter search's record (infopt.model.drafters): what it asked the hub, what it verified
as a drafter of the exact model, and what it turned down with the reason."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Drafter:
    """A drafter of the exact model for speculative decoding, found and verified by the drafter
    search (infopt.model.drafters; `why`: what was checked). `kind`: "mtp" (prediction heads in
    the model's own checkpoint), "eagle3"/"eagle" (a head trained on the model's hidden
    states), "draft_model" (a smaller model with the same tokenizer). `path`: the local copy
    (a GGUF file or a folder) when there is one; None for heads inside the checkpoint and for
    a hub drafter not downloaded (the download gate decides)."""

    kind: str
    path: str | None
    source: str | None = None  # "org/name" on the hub; None: in the checkpoint or made here
    why: str = ""

    @property
    def label(self) -> str:
        name = (self.source or self.path or "model").rsplit("/", 1)[-1]
        return f"{self.kind}-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in name)
