"""The SIMULATED trtllm-serve's command line and LLM API options (tests/sim/trtllm_gpu.py runs
them): the options and aliases of tensorrt_llm/commands/serve.py at
NVIDIA/TensorRT-LLM@00209af149e7774406881a37283dce303571eb11, parsed and refused the way click
parses and refuses them (pallets/click src/click/exceptions.py and parser.py, 8.0-8.3), and the
--extra_llm_api_options YAML refused the way TorchLlmArgs' extra="forbid" pydantic models refuse
an unknown key. Standard library and yaml only."""

from __future__ import annotations

import difflib
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


LOG_LEVELS = ("internal_error", "error", "warning", "info", "verbose")  # logger.severity_map
OPTIONS = (
    Opt(("--tokenizer",), "tokenizer"), Opt(("--custom_tokenizer",), "custom_tokenizer"),
    Opt(("--host",), "host"), Opt(("--port",), "port", "integer"),
    Opt(("--backend",), "backend", "choice", ("pytorch", "tensorrt", "_autodeploy")),
    Opt(("--custom_module_dirs",), "custom_module_dirs"),
    Opt(("--log_level",), "log_level", "choice", LOG_LEVELS),
    Opt(("--max_beam_width",), "max_beam_width", "integer"),
    Opt(("--max_batch_size",), "max_batch_size", "integer"),
    Opt(("--max_num_tokens",), "max_num_tokens", "integer"),
    Opt(("--max_seq_len",), "max_seq_len", "integer"),
    Opt(("--tensor_parallel_size", "--tp_size"), "tensor_parallel_size", "integer"),
    Opt(("--pipeline_parallel_size", "--pp_size"), "pipeline_parallel_size", "integer"),
    Opt(("--context_parallel_size", "--cp_size"), "context_parallel_size", "integer"),
    Opt(("--moe_expert_parallel_size", "--ep_size"), "moe_expert_parallel_size", "integer"),
    Opt(("--moe_cluster_parallel_size", "--cluster_size"), "moe_cluster_parallel_size",
        "integer"),
    Opt(("--gpus_per_node",), "gpus_per_node", "integer"),
    Opt(("--free_gpu_memory_fraction", "--kv_cache_free_gpu_memory_fraction"),
        "free_gpu_memory_fraction", "float"),
    Opt(("--num_postprocess_workers",), "num_postprocess_workers", "integer"),
    Opt(("--trust_remote_code",), "trust_remote_code", "flag"),
    Opt(("--revision",), "revision"),
    Opt(("--config", "--extra_llm_api_options"), "extra_llm_api_options"),
    Opt(("--reasoning_parser",), "reasoning_parser"), Opt(("--tool_parser",), "tool_parser"),
    Opt(("--metadata_server_config_file",), "metadata_server_config_file"),
    Opt(("--server_role",), "server_role"),
    Opt(("--fail_fast_on_attention_window_too_large",),
        "fail_fast_on_attention_window_too_large", "flag"),
    Opt(("--otlp_traces_endpoint",), "otlp_traces_endpoint"),
    Opt(("--disagg_cluster_uri",), "disagg_cluster_uri"),
    Opt(("--enable_chunked_prefill",), "enable_chunked_prefill", "flag"),
    Opt(("--media_io_kwargs",), "media_io_kwargs"), Opt(("--chat_template",), "chat_template"),
)
BY_NAME = {name: o for o in OPTIONS for name in o.names}
BACKEND_ALIASES = {"trt": "tensorrt"}  # serve.py's ChoiceWithAlias
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

TOP_LEVEL_KEYS = frozenset({
    "kv_cache_config", "cuda_graph_config", "enable_attention_dp", "disable_overlap_scheduler",
    "enable_chunked_prefill", "print_iter_log", "return_perf_metrics", "enable_iter_perf_stats",
    "max_batch_size", "max_num_tokens", "max_seq_len", "max_beam_width",
    "tensor_parallel_size", "pipeline_parallel_size", "moe_expert_parallel_size",
    "moe_config", "speculative_config", "attn_backend", "sampler_type", "stream_interval",
    "enable_autotuner", "trust_remote_code", "scheduler_config", "guided_decoding_backend",
    "load_format", "lora_config", "torch_compile_config", "cache_transceiver_config",
    "enable_layerwise_nvtx_marker", "batch_wait_timeout_ms", "num_postprocess_workers"})
KV_CACHE_KEYS = frozenset({
    "enable_block_reuse", "max_tokens", "max_attention_window", "sink_token_length",
    "free_gpu_memory_fraction", "host_cache_size", "onboard_blocks", "cross_kv_cache_fraction",
    "secondary_offload_min_priority", "event_buffer_max_size", "enable_partial_reuse",
    "copy_on_partial_reuse", "use_uvm", "dtype", "mamba_ssm_cache_dtype", "tokens_per_block"})


def read_extra(path: str | None) -> dict:
    """The YAML document (yaml.safe_load, as serve.py reads it); {} when none is given."""
    if path is None:
        return {}
    return yaml.safe_load(Path(path).read_text()) or {}


def extra_forbidden(extra: dict) -> tuple[str, list[tuple[str, object]]]:
    """The pydantic model that refuses the document, and its unknown keys (none: [])."""
    unknown = [(k, v) for k, v in extra.items() if k not in TOP_LEVEL_KEYS]
    if unknown:
        return "TorchLlmArgs", unknown
    kv = extra.get("kv_cache_config") or {}
    # update_llm_args_with_extra_dict builds KvCacheConfig(**block) on its own.
    return "KvCacheConfig", [(k, v) for k, v in kv.items() if k not in KV_CACHE_KEYS]


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
