"""Target files: YAML -> a validated `OptimizeRequest`. Every problem is one InputError that
names the field, the value and what is allowed: unknown fields, duplicate keys, bytes that are
not UTF-8, .inf/.nan, values out of range, contradictions between fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .base import InputError
from .request import OptimizeRequest
from .traffic_file import (
    format_validation_error,
    load_traffic,
    non_finite,
    read_yaml,
    resolve_traces,
)


def parse_request(data: Any, source: str) -> OptimizeRequest:
    """Validate already-parsed request data (a target file, or its fields merged with CLI
    overrides); `source` names where it came from in the message."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping of request fields (model, workload, "
                         f"budgets, ...), got {type(data).__name__}")
    if bad := non_finite(data):
        raise InputError(f"{source}: {bad}: .inf and .nan are not numbers a request can use; "
                         "give a finite value")
    try:
        request = OptimizeRequest.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: invalid request:\n"
                         + format_validation_error(exc, OptimizeRequest)) from None
    if request.model.path is not None and not request.model.path.strip():
        # An empty path is falsy, so the flow would quietly serve the bundled model instead.
        raise InputError(f"{source}: model.path: empty; give a GGUF file or a Hugging Face "
                         "model directory, or leave it out for the bundled model")
    try:  # every length trace is read now, before an engine starts, not mid-run
        traffic = resolve_traces(request.workload, Path.cwd())
    except InputError as exc:
        raise InputError(f"{source}: workload.{exc}") from None
    return request.model_copy(update={"workload": traffic})


def read_request_data(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a target file (for merging CLI overrides before validation)."""
    p = Path(path)
    data = read_yaml(p, "target file")
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
