"""Target files: YAML -> a validated `OptimizeRequest`. Every problem is one InputError that
names the field, the value and what is allowed: unknown fields, duplicate keys, bytes that are
not UTF-8, .inf/.nan, values out of range, contradictions between fields."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .base import InputError
from .request import OptimizeRequest
from .traffic_file import format_validation_error, load_traffic, resolve_traces

MAX_FILE_BYTES = 1 << 20  # a target file is a page of YAML, not a data set


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line "
                f"{seen[key].start_mark.line + 1})", key_node.start_mark)
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _non_finite(data: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite number, if any."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    if isinstance(data, dict):
        return next((p for k, v in data.items() if (p := _non_finite(v, f"{path}.{k}".strip(".")))),
                    None)
    if isinstance(data, list):
        return next((p for i, v in enumerate(data) if (p := _non_finite(v, f"{path}[{i}]"))),
                    None)
    return None


def _read_text(p: Path) -> str:
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{p}: {size:,} bytes is not a target file (at most "
                             f"{MAX_FILE_BYTES:,}); give the YAML request, not data")
        return p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read target file {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#04x});"
                         " save the file as UTF-8") from None


def parse_request(data: Any, source: str) -> OptimizeRequest:
    """Validate already-parsed request data (a target file, or its fields merged with CLI
    overrides); `source` names where it came from in the message."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping of request fields (model, workload, "
                         f"budgets, ...), got {type(data).__name__}")
    if bad := _non_finite(data):
        raise InputError(f"{source}: {bad}: .inf and .nan are not numbers a request can use; "
                         "give a finite value")
    try:
        request = OptimizeRequest.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: invalid request:\n"
                         + format_validation_error(exc, OptimizeRequest)) from None
    try:  # every length trace is read now, before an engine starts, not mid-run
        traffic = resolve_traces(request.workload, Path.cwd())
    except InputError as exc:
        raise InputError(f"{source}: workload.{exc}") from None
    return request.model_copy(update={"workload": traffic})


def read_request_data(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a target file (for merging CLI overrides before validation)."""
    p = Path(path)
    text = _read_text(p)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{p}: invalid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping of request fields (model, workload, "
                         f"budgets, ...), got {type(data).__name__}")
    return _resolve_workload(data, p.parent)


def _resolve_workload(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """`workload: FILE` is an `infopt bench` workload file (read and checked here); trace paths
    in an inline workload are relative to the target file, as in a workload file."""
    w = data.get("workload")
    if isinstance(w, str):
        path = Path(w).expanduser()
        spec = load_traffic(path if path.is_absolute() else base / path)
        return {**data, "workload": spec.model_dump(mode="json")}
    if isinstance(w, dict):
        w = dict(w)
        for field in ("input_lengths", "output_lengths", "lengths_trace"):
            d = w.get(field)
            if isinstance(d, dict) and isinstance(d.get("path"), str) and d["path"] \
                    and not Path(d["path"]).is_absolute():
                w[field] = {**d, "path": str(base / d["path"])}
        return {**data, "workload": w}
    return data


def load_request(path: str | Path) -> OptimizeRequest:
    return parse_request(read_request_data(path), str(path))
