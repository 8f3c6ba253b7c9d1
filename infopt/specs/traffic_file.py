"""Workload files: YAML -> a validated `TrafficSpec`, with every problem reported as one
InputError line per field (`field.path: what is wrong; allowed: ...`)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from .base import InputError
from .traffic import TRACE_COLUMNS, PairedTrace, TraceLengths, TrafficSpec, read_length_trace



def load_traffic(path: str | Path) -> TrafficSpec:
    """Read and validate a workload YAML file; relative trace paths resolve against its folder.
    Every problem becomes one InputError naming the field path and what is allowed."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InputError(f"cannot read workload file {p}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{p}: invalid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping of workload fields (name, arrival, ...), "
                         f"got {type(data).__name__}")
    try:
        spec = TrafficSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{p}: invalid workload:\n" + format_validation_error(exc)) from None
    return resolve_traces(spec, p.parent)


def resolve_traces(spec: TrafficSpec, base: Path) -> TrafficSpec:
    update: dict[str, Any] = {}
    for field, columns in (("input_lengths", ("input_tokens",)),
                           ("output_lengths", ("output_tokens",)),
                           ("lengths_trace", TRACE_COLUMNS)):
        d = getattr(spec, field)
        if not isinstance(d, (TraceLengths, PairedTrace)):
            continue
        resolved = Path(d.path) if Path(d.path).is_absolute() else base / d.path
        try:
            read_length_trace(resolved, columns)
        except InputError as exc:
            raise InputError(f"{field}.path: {exc}") from None
        update[field] = d.model_copy(update={"path": str(resolved)})
    return spec.model_copy(update=update) if update else spec


def format_validation_error(exc: ValidationError, root: type[BaseModel] = TrafficSpec) -> str:
    """One line per error: `field.path: what is wrong; allowed: ...`."""
    lines = []
    for err in exc.errors():
        fields, annotation = _walk(root, err["loc"])
        typ, ctx = err["type"], err.get("ctx") or {}
        path = _dotted(fields)
        got = f", got {_short(err['input'])}" if "input" in err else ""
        if typ == "extra_forbidden":
            allowed = _field_names(_walk(root, err["loc"][:-1])[1])
            msg = f"unknown field {fields[-1]!r}; allowed: {', '.join(allowed)}"
        elif typ in ("union_tag_invalid", "union_tag_not_found"):
            tag = str(ctx.get("discriminator", "kind")).strip("'\"")
            path = _dotted(fields + [tag])
            allowed = ", ".join(_allowed(annotation))
            what = f"{ctx.get('tag')!r} is not allowed" if typ == "union_tag_invalid" \
                else "missing"
            msg = f"{what}; allowed: {allowed}"
        elif typ in ("literal_error", "enum"):
            msg = f"{_short(err.get('input'))} is not allowed; allowed: " + \
                ", ".join(_allowed(annotation))
        elif typ == "missing":
            msg = "required"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            msg += got if typ != "value_error" and "got" not in msg else ""
        lines.append(f"  {path or '(top level)'}: {msg}")
    return "\n".join(lines)


def _walk(model: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[list[str], Any]:
    """Follow a pydantic error location through the model: the user-facing path segments
    (union tags dropped, list indices as [i]) and the annotation found at its end."""
    fields: list[str] = []
    ann: Any = model
    for seg in loc:
        ann = _unwrap(ann)
        if isinstance(seg, int) and get_origin(ann) is list:
            fields[-1:] = [f"{fields[-1]}[{seg}]"] if fields else [f"[{seg}]"]
            ann = get_args(ann)[0]
        elif _is_model(ann) and seg in ann.model_fields:
            fields.append(str(seg))
            ann = ann.model_fields[seg].annotation
        elif get_origin(ann) is Union and (variant := _variant(ann, seg)) is not None:
            ann = variant  # a discriminated union's tag: not part of the user's path
        else:
            fields.append(str(seg))
            ann = None
    return fields, ann


def _unwrap(ann: Any) -> Any:
    """Strip Annotated[...] and Optional (X | None)."""
    while True:
        if get_origin(ann) is Annotated:
            ann = get_args(ann)[0]
            continue
        args = get_args(ann)
        if get_origin(ann) in (Union, type(int | None)) and type(None) in args:
            rest = [a for a in args if a is not type(None)]
            ann = rest[0] if len(rest) == 1 else Union[tuple(rest)]
            if len(rest) == 1:
                continue
        return ann


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _variant(union: Any, tag: Any) -> type[BaseModel] | None:
    for v in get_args(union):
        if _is_model(v) and "kind" in v.model_fields and v.model_fields["kind"].default == tag:
            return v
    return None


def _allowed(ann: Any) -> list[str]:
    ann = _unwrap(ann)
    if get_origin(ann) is Literal:
        return [str(a) for a in get_args(ann)]
    if isinstance(ann, type) and issubclass(ann, StrEnum):
        return [m.value for m in ann]
    if get_origin(ann) is Union:
        return [str(v.model_fields["kind"].default) for v in get_args(ann)
                if _is_model(v) and "kind" in v.model_fields]
    return []


def _field_names(ann: Any) -> list[str]:
    ann = _unwrap(ann)
    return list(ann.model_fields) if _is_model(ann) else []


def _dotted(fields: list[str]) -> str:
    return ".".join(fields)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
