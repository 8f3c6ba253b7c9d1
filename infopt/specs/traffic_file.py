"""Workload files: YAML -> a validated `TrafficSpec`, with every problem reported as one
InputError line per field (`field.path: what is wrong; allowed: ...`).

`read_yaml` is the one reader of YAML a person wrote (workload and target files): UTF-8 only,
at most MAX_FILE_BYTES, no key given twice, and no alias expansion past MAX_YAML_NODES. PyYAML
builds `*alias` as a shared reference, so a "billion laughs" file loads in microseconds; it is
every later walk of the tree (the .inf/.nan check, pydantic, a dump) that expands it, which is
why the cap is checked on the composed node graph, before anything is constructed."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from .base import InputError
from .traffic import TRACE_COLUMNS, PairedTrace, TraceLengths, TrafficSpec, read_length_trace

MAX_FILE_BYTES = 1 << 20  # a target or workload file is a page of YAML, not a data set
# Values (scalars, lists, mappings) after aliases are expanded. The example files have under
# 100 (examples/, 2026-12); a file past this is a data set or an alias bomb, not a request.
MAX_YAML_NODES = 100_000

_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16",
         b"\xfe\xff": "UTF-16"}


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last)."""


def _no_duplicates(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):  # `[a]: 1` would fail `in seen` below
            kind = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a name, got a {kind}", key_node.start_mark)
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line "
                f"{seen[key].start_mark.line + 1})", key_node.start_mark)
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def _read_text(p: Path, what: str) -> str:
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{p}: {size:,} bytes is not a {what} (at most "
                             f"{MAX_FILE_BYTES:,}); give the YAML {what}, not data")
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    if bom := next((name for mark, name in _BOMS.items() if raw.startswith(mark)), None):
        raise InputError(f"{p}: {bom} text (it starts with a {bom} byte-order mark); save the "
                         "file as UTF-8")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text (byte {exc.start}: {raw[exc.start]:#04x}); save "
                         "the file as UTF-8") from None


def _expanded_nodes(node: yaml.Node, memo: dict[int, int], open_: set[int]) -> int:
    """Values under `node` with every alias expanded, counted over the shared graph (each node
    once), so a bomb is measured without being expanded."""
    if id(node) in memo:
        return memo[id(node)]
    if id(node) in open_:  # `&a [*a]`: PyYAML builds a list that contains itself
        raise InputError(f"line {node.start_mark.line + 1}: an alias refers to itself (a value "
                         "that contains itself); write the value out")
    open_.add(id(node))
    children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else node.value if isinstance(node, yaml.SequenceNode) else [])
    memo[id(node)] = total = 1 + sum(_expanded_nodes(c, memo, open_) for c in children)
    open_.discard(id(node))
    return total


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed YAML of a `what` ("target file", "workload file") a person wrote; every
    problem is one InputError naming the file (and line) and what to change."""
    p = Path(path)
    text = _read_text(p, what)
    try:
        loader = StrictLoader(text)
    except yaml.reader.ReaderError as exc:  # a control character, found before parsing
        line = text.count("\n", 0, exc.position) + 1
        raise InputError(f"{p}: invalid YAML at line {line}: character #x{exc.character:04x} "
                         "is not allowed (special characters are not allowed in YAML text); "
                         "remove it") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        memo: dict[int, int] = {}
        try:
            n = _expanded_nodes(node, memo, set())
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None
        if n > MAX_YAML_NODES:
            why = (f"{n:,} values once its aliases (*name) are expanded" if len(memo) <=
                   MAX_YAML_NODES else f"{len(memo):,} values")
            raise InputError(f"{p}: {why}, more than the {MAX_YAML_NODES:,} a {what} may "
                             "have; write the values out instead of nesting aliases, and give "
                             "data (traces) as files of their own")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{p}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise InputError(f"{p}: values nested too deeply to read (hundreds of levels of [ or "
                         f"{{); a {what} is a few levels deep: check the brackets") from None
    finally:
        loader.dispose()


def non_finite(data: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite number, if any."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    if isinstance(data, dict):
        return next((p for k, v in data.items() if (p := non_finite(v, f"{path}.{k}".strip(".")))),
                    None)
    if isinstance(data, list):
        return next((p for i, v in enumerate(data) if (p := non_finite(v, f"{path}[{i}]"))),
                    None)
    return None


def load_traffic(path: str | Path) -> TrafficSpec:
    """Read and validate a workload YAML file; relative trace paths resolve against its folder.
    Every problem becomes one InputError naming the field path and what is allowed."""
    p = Path(path)
    data = read_yaml(p, "workload file")
    if data is None:
        raise InputError(f"{p}: the file is empty; expected a mapping of workload fields "
                         "(name, input_lengths, output_lengths, measured_requests, ...)")
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping of workload fields (name, arrival, ...), "
                         f"got {type(data).__name__}")
    if bad := non_finite(data):
        raise InputError(f"{p}: {bad}: .inf and .nan are not numbers a workload can use; give "
                         "a finite value")
    try:
        spec = TrafficSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{p}: invalid workload:\n" + format_validation_error(exc)) from None
    try:
        return resolve_traces(spec, p.parent)
    except InputError as exc:  # the trace's own message, under the workload that names it
        raise InputError(f"{p}: {exc}") from None


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
            names = _field_names(_walk(root, err["loc"][:-1])[1])
            msg = f"unknown field {fields[-1]!r}; allowed: {', '.join(names)}"
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
