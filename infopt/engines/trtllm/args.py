"""TensorRT-LLM 1.2's own argument checks, rebuilt from recorded data: what trtllm-serve refuses
in the --extra_llm_api_options YAML and on its command line, checked without TensorRT-LLM.

The data (infopt/engines/data/trtllm-1.2-llm-args.json) records the LLM API models' fields,
types and defaults at v1.2.1 with their lines in tensorrt_llm/llmapi/llm_args.py, and the click
options of tensorrt_llm/commands/serve.py; its `why_recorded` says why it is data (TensorRT-LLM
cannot be imported without NVIDIA's wheel index and CUDA). Each model is rebuilt here as a
pydantic model with extra="forbid", as llm_args.py builds them on llmapi/utils.py's
StrictBaseModel, so an unknown field, a wrong type or a bound is refused by pydantic itself, in
pydantic's words. The YAML is read as trtllm-serve reads it (serve.py: yaml.safe_load, then
llmapi/llm_utils.py update_llm_args_with_extra_dict: each nested block built by its own class,
speculative_config through DecodingBaseConfig.from_dict), then TorchLlmArgs validates the whole.
Fields infopt never renders carry the type `any` when the source's type is an object: their
names still count for extra="forbid". A field missing from the record is refused here but not by
TensorRT-LLM: the check errs towards refusing."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, create_model

DATA = Path(__file__).parent.parent / "data" / "trtllm-1.2-llm-args.json"


@cache
def record() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def _annotation(spec: str) -> Any:
    """A recorded type ("int|null", "list[int]", "enum[a,b]", "model:X") as an annotation."""
    optional = spec.endswith("|null")
    base = spec.removesuffix("|null")
    if base.startswith("model:"):
        ann: Any = model(base.removeprefix("model:"))
    elif base.startswith("enum["):
        ann = Literal[tuple(base[5:-1].split(","))]
    else:
        ann = {"bool": bool, "int": int, "float": float, "str": str, "any": Any,
               "list[int]": list[int], "decoding": Any}[base]
    return Optional[ann] if optional else ann  # noqa: UP045 (a runtime type expression)


@cache
def model(name: str) -> type[BaseModel]:
    """The recorded model `name` as a pydantic model that refuses unknown fields."""
    rec = record()["llm_api"]["models"][name]
    fields: dict[str, Any] = {}
    for field, spec in rec["fields"].items():
        default = spec["default"]
        if isinstance(default, str) and default.endswith("()"):  # a default_factory
            default = None
        aliases = spec.get("aliases")
        ann = _annotation(spec["type"])
        if field == "model":  # trtllm-serve gives MODEL on the command line, never the YAML
            ann = Optional[ann]  # noqa: UP045
        fields[field] = (ann, Field(
            default, ge=spec.get("ge"), le=spec.get("le"), gt=spec.get("gt"),
            validation_alias=AliasChoices(field, *aliases) if aliases else None))
    return create_model(name, __config__=ConfigDict(extra="forbid", populate_by_name=True),
                        **fields)


def _errors(cls: type[BaseModel], data: Any, where: str) -> list[str]:
    if not isinstance(data, dict):
        return [f"{where}: a mapping expected, got {type(data).__name__}"]
    try:
        cls.model_validate(data)
    except ValidationError as err:
        return [f"{where}{'.' if e['loc'] else ''}{'.'.join(map(str, e['loc']))}: {e['msg']} "
                f"[type={e['type']}]" for e in err.errors()]
    return []


def speculative_refusals(block: Any) -> list[str]:
    """speculative_config as 1.2 reads it: DecodingBaseConfig.from_dict's registry, the chosen
    class (extra="forbid"), then TorchLlmArgs.validate_speculative_config's asserts."""
    api = record()["llm_api"]
    if not isinstance(block, dict):
        return [f"speculative_config: a mapping expected, got {type(block).__name__}"]
    kind = block.get("decoding_type")
    cls = api["decoding_types"]["registry"].get(kind)
    if cls is None:
        return [f"speculative_config: ValueError: Invalid decoding type: {kind}"]
    if cls not in api["models"]:
        return [f"speculative_config: {kind} ({cls}) is not recorded here"]
    data = {k: v for k, v in block.items() if k != "decoding_type"}  # from_dict pops it
    out = _errors(model(cls), data, f"speculative_config ({cls})")
    checks = api["speculative_checks"].get(kind, {})
    for name in checks.get("positive", []):
        value = data.get(name, api["models"][cls]["fields"][name]["default"])
        if not (isinstance(value, int) and value > 0):
            out.append(f"speculative_config: AssertionError: {kind} needs {name} > 0 "
                       f"(got {value!r})")
    for name in checks.get("required", []):
        if data.get(name) is None and not any(data.get(a) is not None for a in
                                              api["models"][cls]["fields"][name].get("aliases", [])):
            out.append(f"speculative_config: {kind} needs {name} (the drafter)")
    return out


def llm_args_refusals(doc: dict[str, Any]) -> list[str]:
    """Why TensorRT-LLM 1.2 would refuse this --extra_llm_api_options document ([]: it takes
    it): unknown or mistyped fields at any level, an unknown decoding type, a failed assert."""
    if not isinstance(doc, dict):
        return [f"the YAML document is a {type(doc).__name__}, not a mapping"]
    out = []
    top = dict(doc)
    if top.get("speculative_config") is not None:
        out += speculative_refusals(top["speculative_config"])
        top["speculative_config"] = None  # checked above, as update_llm_args_with_extra_dict does
    return out + _errors(model("TorchLlmArgs"), top, "TorchLlmArgs")


def mtp_draft_tokens(block: dict[str, Any]) -> int:
    """The draft length 1.2 runs for an MTP speculative_config: num_nextn_predict_layers
    (default 1), whatever max_draft_len says (record()['llm_api']['speculative_checks'])."""
    default = record()["llm_api"]["models"]["MTPDecodingConfig"]["fields"][
        "num_nextn_predict_layers"]["default"]
    return int(block.get("num_nextn_predict_layers", default))


def serve_options() -> list[dict[str, Any]]:
    return record()["trtllm_serve"]["options"]


def serve_argv_refusals(argv: list[str]) -> list[str]:
    """Why trtllm-serve 1.2's click parser would refuse these arguments (after the executable):
    an option serve.py lacks, a value click cannot convert, a missing value, other than one
    MODEL. Messages as click words them (8.0-8.3)."""
    by_name = {n: o for o in serve_options() for n in o["names"]}
    aliases = record()["trtllm_serve"]["backend_aliases"]
    out, words, rest = [], [], list(argv)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-"):
            words.append(arg)
            continue
        name, eq, value = arg.partition("=")
        opt = by_name.get(name)
        if opt is None:
            out.append(f"No such option: {name}")
            continue
        if opt["kind"] == "flag":
            if eq:
                out.append(f"Option '{name}' does not take a value.")
            continue
        if not eq:
            if not rest:
                out.append(f"Option '{name}' requires an argument.")
                continue
            value = rest.pop(0)
        hint = " / ".join(f"'{n}'" for n in opt["names"])
        if opt["kind"] in ("integer", "float"):
            try:
                (int if opt["kind"] == "integer" else float)(value)
            except ValueError:
                out.append(f"Invalid value for {hint}: {value!r} is not a valid {opt['kind']}.")
        elif opt["kind"] == "choice" and aliases.get(value, value) not in opt["choices"]:
            out.append(f"Invalid value for {hint}: {value!r} is not one of "
                       + ", ".join(repr(c) for c in opt["choices"]) + ".")
    if not words:
        out.append("Missing argument 'MODEL'.")
    elif len(words) > 1:
        out.append(f"Got unexpected extra argument ({words[1]})")
    return out
