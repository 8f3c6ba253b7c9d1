"""The SIMULATED trtllm-serve's command line and LLM API options (tests/sim/trtllm_gpu.py runs
them): the options and aliases of tensorrt_llm/commands/serve.py, parsed and refused the way click
parses and refuses them (pallets/click src/click/exceptions.py and parser.py, 8.0-8.3), and the
--extra_llm_api_options YAML refused the way TensorRT-LLM 1.2 refuses it: an unknown key at any
level (its pydantic models are extra="forbid"), a decoding_type DecodingBaseConfig.from_dict
does not know. The option list, the models' field names and the decoding types are the ones
recorded, with their sources, in infopt/engines/data/trtllm-1.2-llm-args.json (read here as a
file: the stand-in imports nothing of infopt). Standard library and yaml only."""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

PROG = "trtllm-serve"
MARK = "[SIMULATED] "


# -- the command line, parsed as click parses it -------------------------------------------------

@dataclass(frozen=True)
class Opt:
    names: tuple[str, ...]  # in serve.py's order, which click's error hint keeps
    dest: str
    kind: str = "text"  # text, integer, float, flag, choice
    choices: tuple[str, ...] = ()


# TensorRT-LLM 1.2's recorded argument models and serve.py options (see the module docstring).
RECORD = json.loads((Path(__file__).resolve().parents[2] / "infopt" / "engines" / "data"
                     / "trtllm-1.2-llm-args.json").read_text())
OPTIONS = tuple(Opt(tuple(o["names"]), o["dest"], o["kind"], tuple(o.get("choices", ())))
                for o in RECORD["trtllm_serve"]["options"])
BY_NAME = {name: o for o in OPTIONS for name in o.names}
BACKEND_ALIASES = RECORD["trtllm_serve"]["backend_aliases"]  # serve.py's ChoiceWithAlias
SERVE_USAGE = f"Usage: {PROG} serve [OPTIONS] MODEL"
GROUP_USAGE = f"Usage: {PROG} [OPTIONS] COMMAND [ARGS]..."
COMMANDS = ("serve", "grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve")


class UsageError(Exception):
    """click's UsageError: `message` under `usage`, exit status 2."""

    def __init__(self, message: str, usage: str = SERVE_USAGE) -> None:
        super().__init__(message)
        self.message, self.usage = message, usage


def no_such_option(name: str, usage: str = SERVE_USAGE) -> UsageError:
    """click's NoSuchOption, with parser.py's difflib suggestions among the command's long
    options (the group has only --help)."""
    known = list(BY_NAME) + ["--help"] if usage == SERVE_USAGE else ["--help"]
    close = difflib.get_close_matches(name, known)
    message = f"No such option: {name}"
    if len(close) == 1:
        message += f" Did you mean {close[0]}?"
    elif close:
        message += f" (Possible options: {', '.join(sorted(close))})"
    return UsageError(message, usage)


def split_args(argv: list[str]) -> tuple[list[str], dict[str, str | bool]]:
    """Positional words and raw option values (`--name value`, `--name=value`, flags)."""
    words, raw, rest = [], {}, list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            words += rest
            break
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name == "--help":
            raw["help"] = True
            continue
        opt = BY_NAME.get(name)
        if opt is None:
            raise no_such_option(name)
        if opt.kind == "flag":
            if eq:
                raise UsageError(f"Option '{name}' does not take a value.")
            raw[opt.dest] = True
            continue
        if not eq:
            if not rest:
                raise UsageError(f"Option '{name}' requires an argument.")
            value = rest.pop(0)
        raw[opt.dest] = value
    return words, raw


def convert(opt: Opt, value: str | bool) -> object:
    """click's types: the value, or BadParameter's "Invalid value for ..." message."""
    hint = " / ".join(f"'{n}'" for n in opt.names)
    try:
        if opt.kind == "integer":
            return int(value)
        if opt.kind == "float":
            return float(value)
    except ValueError:
        raise UsageError(f"Invalid value for {hint}: {value!r} is not a valid "
                         f"{opt.kind}.") from None
    if opt.kind == "choice":
        value = BACKEND_ALIASES.get(value, value) if opt.dest == "backend" else value
        if value not in opt.choices:
            listed = ", ".join(repr(c) for c in opt.choices)
            raise UsageError(f"Invalid value for {hint}: {value!r} is not one of {listed}.")
    return value


def parse_cli(argv: list[str]) -> dict:
    """`serve`'s arguments as a dict (click's parameter names); UsageError when refused."""
    words, raw = split_args(argv)
    if raw.get("help"):
        return {"help": True}
    if not words:
        raise UsageError("Missing argument 'MODEL'.")
    if len(words) > 1:
        raise UsageError(f"Got unexpected extra argument ({words[1]})")
    opts = {o.dest: convert(o, raw[o.dest]) for o in OPTIONS if o.dest in raw}
    return {"model": words[0], **opts}


def serve_args(argv: list[str]) -> list[str] | None:
    """DefaultGroup: `serve ARGS` or `MODEL ARGS` are serve's arguments; `--help` prints the
    group's help (None); another subcommand is not simulated."""
    if not argv or argv[0] == "--help":
        print(f"{GROUP_USAGE}\n\nOptions:\n  --help  Show this message and exit.\n\nCommands:\n"
              + "".join(f"  {c}\n" for c in COMMANDS), end="", flush=True)
        return None
    if argv[0].startswith("--"):
        raise no_such_option(argv[0].partition("=")[0], GROUP_USAGE)
    if argv[0] == "serve":
        return argv[1:]
    if argv[0] in COMMANDS:
        raise SystemExit(f"{MARK}SIMULATED TensorRT-LLM: `{PROG} {argv[0]}` is not simulated")
    return argv


def refuse(err: UsageError) -> None:
    """What click prints for a UsageError (exceptions.py UsageError.show), then exit 2."""
    command = f"{PROG} serve" if err.usage == SERVE_USAGE else PROG
    print(f"{err.usage}\nTry '{command} --help' for help.\n\nError: {err.message}",
          file=sys.stderr, flush=True)
    raise SystemExit(2)


def print_serve_help() -> None:
    names = "\n".join(f"  {', '.join(o.names)}" for o in OPTIONS)
    print(f"{SERVE_USAGE}\n\n  Running an OpenAI API compatible server (SIMULATED)\n\n  MODEL: "
          f"model name | HF checkpoint path | TensorRT engine path\n\nOptions:\n{names}\n"
          "  --help  Show this message and exit.", flush=True)


# -- the LLM API options (--extra_llm_api_options YAML) -----------------------------------------

MODELS = RECORD["llm_api"]["models"]
DECODING_TYPES = RECORD["llm_api"]["decoding_types"]["registry"]
TOP_LEVEL_KEYS = frozenset(MODELS["TorchLlmArgs"]["fields"])
KV_CACHE_KEYS = frozenset(MODELS["KvCacheConfig"]["fields"])


def _keys(model: str) -> frozenset[str]:
    """A model's accepted keys: its fields and their aliases (speculative_model_dir)."""
    fields = MODELS[model]["fields"]
    return frozenset(fields) | {a for f in fields.values() for a in f.get("aliases", ())}


def read_extra(path: str | None) -> dict:
    """The YAML document (yaml.safe_load, as serve.py reads it); {} when none is given."""
    if path is None:
        return {}
    return yaml.safe_load(Path(path).read_text()) or {}


def decoding_class(extra: dict) -> str | None:
    """The class DecodingBaseConfig.from_dict picks for speculative_config (None: no block).
    An unknown decoding_type is its ValueError ("Invalid decoding type: Eagle3"); a class the
    record has no fields for is not simulated."""
    block = extra.get("speculative_config")
    if not block:
        return None
    kind = block.get("decoding_type")
    if kind not in DECODING_TYPES:
        raise ValueError(f"Invalid decoding type: {kind}")
    if DECODING_TYPES[kind] not in MODELS:
        raise SystemExit(f"{MARK}SIMULATED TensorRT-LLM: decoding_type {kind} is not simulated")
    return DECODING_TYPES[kind]


def extra_forbidden(extra: dict) -> tuple[str, list[tuple[str, object]]]:
    """The pydantic model that refuses the document, and its unknown keys (none: []).
    update_llm_args_with_extra_dict builds each nested block with its own class before
    TorchLlmArgs(**args) sees the whole, so a nested block's model refuses first."""
    nested = [("KvCacheConfig", extra.get("kv_cache_config")),
              ("CudaGraphConfig", extra.get("cuda_graph_config"))]
    if (spec := decoding_class(extra)) is not None:  # from_dict pops decoding_type first
        nested.insert(0, (spec, {k: v for k, v in extra["speculative_config"].items()
                                 if k != "decoding_type"}))
    for model, block in nested:
        unknown = [(k, v) for k, v in (block or {}).items() if k not in _keys(model)]
        if unknown:
            return model, unknown
    return "TorchLlmArgs", [(k, v) for k, v in extra.items() if k not in TOP_LEVEL_KEYS]


def validation_error(model: str, unknown: list[tuple[str, object]]) -> str:
    """pydantic v2's ValidationError text for extra="forbid" (the URL names the pydantic
    release; 2.11 is a plausible one for a 1.2 image)."""
    n = len(unknown)
    lines = [f"pydantic_core._pydantic_core.ValidationError: {n} validation "
             f"error{'s' if n > 1 else ''} for {model}"]
    for key, value in unknown:
        lines += [key, f"  Extra inputs are not permitted [type=extra_forbidden, input_value="
                       f"{value!r}, input_type={type(value).__name__}]",
                  "    For further information visit "
                  "https://errors.pydantic.dev/2.11/v/extra_forbidden"]
    return "\n".join(lines)
