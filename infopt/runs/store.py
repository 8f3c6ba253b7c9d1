"""A results store: a copy of run folders outside this machine (a local path or any fsspec URL,
e.g. s3://bucket/prefix), so a run whose pod loses its disk resumes elsewhere with every
completed trial.

Layout: `<url>/<run-id>/<path inside the run folder>`, the same tree as `<runs root>/<run-id>/`.
Each file is written whole: on an object store one PUT (an object is visible only once
complete, multipart uploads included); on a local path a temporary name, then a rename. A
reader therefore never sees half a trial.json, and `pull` never restores one.

Plain fsspec, no Prefect: the `ResultsStore` block (blocks/results_store.py) builds one from
its saved fields. Every failure is a `StoreError` naming the store's URL.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infopt.specs.base import InfoptError

# A store-side temporary name (local stores only); never restored, never listed as a file.
_TMP_MARK = ".infopt-tmp-"


class StoreError(InfoptError):
    """The results store could not be read or written (URL, bucket, endpoint or credentials)."""


class RunStore:
    """Run folders under `url`. `storage_options` go to fsspec as they are (endpoint_url,
    region, config_kwargs...); `secret_options` too (key, secret, token), but are kept out of
    `repr`, `record()` and every message."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None,
                 secret_options: Mapping[str, str] | None = None):
        if not url or not url.strip():
            raise StoreError("results store URL is empty: give a local path or an fsspec URL "
                             "such as s3://bucket/prefix")
        self.url = url.strip().rstrip("/")
        self.storage_options = dict(storage_options or {})
        self._secret_options = {k: v for k, v in (secret_options or {}).items() if v}
        self._fs_root: tuple[Any, str] | None = None

    def __repr__(self) -> str:
        return f"RunStore({self.url!r})"

    def record(self) -> dict[str, Any]:
        """What a run folder says about its store (store.json): no secret in it."""
        return {"url": self.url, "storage_options": self.storage_options}

    # -- writing ----------------------------------------------------------------------------

    def put_file(self, run_dir: Path, path: Path) -> str:
        """Mirror one file of `run_dir` (already complete locally) to
        `<url>/<run-id>/<relative path>`; returns the object's path in the store."""
        rel = Path(path).resolve().relative_to(Path(run_dir).resolve()).as_posix()
        dest = self._object(Path(run_dir).name, rel)
        try:
            data = Path(path).read_bytes()
            fs, _ = self._fs()
            if self._is_local(fs):
                _replace_local(Path(dest), data)
            else:
                fs.pipe_file(dest, data)
        except StoreError:
            raise
        except Exception as exc:  # fsspec backends raise their own types (botocore's too)
            raise self._error(f"could not write {Path(run_dir).name}/{rel}", exc) from exc
        return dest

    def put(self, run_dir: Path) -> list[str]:
        """Mirror every file of `run_dir` (e.g. a run made before a store was attached)."""
        files = sorted(p for p in Path(run_dir).rglob("*") if p.is_file()
                       and not p.name.endswith(".tmp") and _TMP_MARK not in p.name)
        return [self.put_file(run_dir, p) for p in files]

    # -- reading ----------------------------------------------------------------------------

    def pull(self, run_id: str, runs_root: Path, overwrite: bool = False) -> list[Path]:
        """Restore what the store holds of `run_id` into `<runs_root>/<run_id>/`. Files already
        there are kept unless `overwrite`: every local write is mirrored right after it is
        made, so a local file is as new as the store's. Returns the files written (none: the
        store has nothing of this run)."""
        run_dir = Path(runs_root) / run_id
        prefix = self._object(run_id, "")
        try:
            fs, _ = self._fs()
            fs.invalidate_cache(prefix)  # another machine may have written since we listed
            objects = [o for o in fs.find(prefix)
                       if o.startswith(prefix + "/") and _TMP_MARK not in o]
        except Exception as exc:
            raise self._error(f"could not list run {run_id}", exc) from exc
        restored = []
        for obj in objects:
            rel = obj[len(prefix) + 1:]
            local = run_dir / rel
            if local.exists() and not overwrite:
                continue
            try:
                _replace_local(local, fs.cat_file(obj))
            except Exception as exc:
                raise self._error(f"could not read {run_id}/{rel}", exc) from exc
            restored.append(local)
        return restored

    def runs(self) -> list[str]:
        """The run ids the store holds, sorted (run ids start with their date)."""
        try:
            fs, root = self._fs()
            fs.invalidate_cache(root)
            entries = fs.ls(root, detail=True)
        except FileNotFoundError:
            return []  # nothing written under the URL yet
        except Exception as exc:
            raise self._error("could not list runs", exc) from exc
        return sorted(Path(e["name"].rstrip("/")).name for e in entries
                      if e.get("type") == "directory")

    # -- internals ----------------------------------------------------------------------------

    def _fs(self) -> tuple[Any, str]:
        """(filesystem, root path inside it), made on first use so a store can be described
        without its backend installed or reachable."""
        if self._fs_root is None:
            from fsspec.core import url_to_fs

            try:
                self._fs_root = url_to_fs(self.url, **self.storage_options,
                                          **self._secret_options)
            except Exception as exc:  # an unknown protocol, a backend not installed
                raise self._error("could not open it", exc) from exc
        return self._fs_root

    def _object(self, run_id: str, rel: str) -> str:
        _, root = self._fs()
        return f"{root.rstrip('/')}/{run_id}/{rel}".rstrip("/")

    @staticmethod
    def _is_local(fs: Any) -> bool:
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        return "file" in protocols or "local" in protocols

    def _error(self, what: str, exc: BaseException) -> StoreError:
        detail = str(exc)
        for value in self._secret_options.values():  # a backend may echo a credential
            detail = detail.replace(str(value), "***")
        return StoreError(f"results store {self.url}: {what}: {type(exc).__name__}: {detail}. "
                          "Check the URL (the bucket must exist), the endpoint and the "
                          "credentials of the store")


def _replace_local(path: Path, data: bytes) -> None:
    # Write a temporary sibling, then rename over the target: a reader sees the old file or
    # the whole new one, never a part.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}{_TMP_MARK}{secrets.token_hex(4)}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
