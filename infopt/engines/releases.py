"""Is a newer engine release out? The package index's JSON API (PyPI and its mirrors answer
`GET <base>/<package>/json` with `info.version`, the newest release) against the version the
installed build came from (the adapter's `installed_release`). Network trouble is a note, never
a failure: the re-optimization compares what is installed either way."""

from __future__ import annotations

import httpx
from packaging.version import InvalidVersion, Version

from infopt.engines.base import EngineAdapter
from infopt.specs.reoptimize import ReleaseCheck


def newest_release(index_url: str, package: str, timeout_s: float = 10.0) -> str:
    """The index's newest release of `package` (raises httpx errors and ValueError)."""
    url = f"{index_url.rstrip('/')}/{package}/json"
    resp = httpx.get(url, timeout=timeout_s, follow_redirects=True)
    resp.raise_for_status()
    try:
        version = resp.json()["info"]["version"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{url} is not a package index JSON API answer (no info.version)"
                         ) from None
    if not isinstance(version, str) or not version:
        raise ValueError(f"{url}: info.version is {version!r}, not a version")
    return version


def _newer(newest: str, installed: str) -> bool | None:
    try:
        return Version(newest) > Version(installed)
    except InvalidVersion:
        return None


def check_release(adapter: EngineAdapter, executable: str, index_url: str) -> ReleaseCheck:
    package = adapter.release_package
    installed = adapter.installed_release(executable) if adapter.installed_release else None
    base = ReleaseCheck(package=package, installed=installed, index_url=index_url)
    if package is None:
        return base.model_copy(update={"note": f"{adapter.name.value} is not published on a "
                                       "package index: only the installed build is compared"})
    try:
        newest = newest_release(index_url, package)
    except (httpx.HTTPError, ValueError) as exc:
        return base.model_copy(update={"note": f"the index did not answer for {package} "
                                       f"({type(exc).__name__}: {str(exc)[:160]})"})
    newer = _newer(newest, installed) if installed else None
    if installed is None:
        note = (f"{package} {newest} is the newest release; the installed build's release is "
                "not known (built elsewhere)")
    elif newer:
        note = f"{package} {newest} is out; {installed} is installed"
    else:
        note = f"{package} {installed} is the newest release"
    return base.model_copy(update={"newest": newest, "newer_available": newer, "note": note})
