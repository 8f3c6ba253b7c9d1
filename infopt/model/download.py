"""Downloading weights, only behind the download gate: which files of a pinned hub revision,
their sizes, the license and gating, as the gate's description (pure), then the fetch itself
through `huggingface_hub` (its own atomic, resumable downloads into the infopt hub cache)."""

from __future__ import annotations

import hashlib
import re
from fnmatch import fnmatch
from pathlib import Path

from huggingface_hub import hf_hub_download

from infopt.specs.approval import GateKind, GateRequest
from infopt.specs.base import InputError
from infopt.specs.checkpoint import HubFile, HubModelFacts


def select_files(facts: HubModelFacts, patterns: list[str]) -> list[HubFile]:
    """The repository's files matching `patterns` (glob, e.g. "*Q8_0.gguf"), in tree order;
    each pattern must match at least one file."""
    chosen = [f for f in facts.files if any(fnmatch(f.path, p) for p in patterns)]
    if unmatched := [p for p in patterns if not any(fnmatch(f.path, p) for f in facts.files)]:
        names = ", ".join(f.path for f in facts.files[:12])
        raise InputError(f"model.download {unmatched} match no file of {facts.repo_id} at "
                         f"{facts.commit_sha[:12]}; its files: {names}")
    return chosen


def download_gate(facts: HubModelFacts, files: list[HubFile], cache_dir: Path) -> GateRequest:
    total = sum(f.size_bytes for f in files)
    rows = "\n".join(f"| `{f.path}` | {f.size_bytes / 1e9:.3f} GB |" for f in files)
    gating = facts.gated.value if facts.gated else "none"
    # One gate per file set: two GGUF files of one repository are two answers.
    what = facts.repo_id + (f"-{files[0].path.removesuffix('.gguf')}"
                            if len(files) == 1 and files[0].path.endswith(".gguf") else "")
    slug = re.sub(r"[^a-z0-9-]", "-", what.lower())
    if len(slug) > 90:  # still one key per file set: a hash of the whole name
        slug = slug[:81] + "-" + hashlib.sha1(what.encode()).hexdigest()[:8]
    return GateRequest(
        kind=GateKind.DOWNLOAD, key="download-" + slug,
        title=f"download {len(files)} file(s), {total / 1e9:.2f} GB, of {facts.repo_id}",
        description=(
            f"### Download weights from {facts.endpoint}\n\n"
            f"- **Repository:** `{facts.repo_id}` at revision `{facts.commit_sha}`"
            f" (asked: {facts.requested_revision or 'the default branch'})\n"
            f"- **License:** {facts.license or 'not stated'} "
            f"({facts.license_source or 'no card metadata'}); **gating:** {gating}\n"
            f"- **Into:** `{cache_dir}`\n"
            f"- **Total:** {total / 1e9:.2f} GB\n\n| file | size |\n|---|---|\n{rows}\n\n"
            "Deny to keep the run off the network: give `model.path` to a local copy instead."),
        details={"repository": facts.repo_id, "revision": facts.commit_sha,
                 "files": len(files), "total_bytes": total, "license": facts.license,
                 "gated": gating})


def fetch(facts: HubModelFacts, files: list[HubFile], cache_dir: Path,
          token: str | None) -> Path:
    """Download the files at the pinned commit; the local path of the model to serve (the one
    GGUF file, or the snapshot folder holding them)."""
    paths = [Path(hf_hub_download(facts.repo_id, f.path, revision=facts.commit_sha,
                                  cache_dir=cache_dir, endpoint=facts.endpoint,
                                  token=token or False)) for f in files]
    for f, p in zip(files, paths, strict=True):
        if p.stat().st_size != f.size_bytes:
            raise InputError(f"{facts.repo_id}/{f.path}: downloaded {p.stat().st_size} bytes, "
                             f"the hub lists {f.size_bytes}; delete {p} and retry")
    ggufs = [p for p in paths if p.suffix == ".gguf"]
    return ggufs[0] if len(ggufs) == 1 else paths[0].parent
