"""MLX-LM adapter (`python -m mlx_lm server`, OpenAI-compatible routes on Apple silicon).

Pinned: mlx-lm 0.31.3. Flags checked against mlx_lm/server.py `main()` at ml-explore/mlx-lm tag
v0.31.3 (commit ed1fca4cef15a824c5f1702c80f70b4cffc8e4dd) and its mlx_lm/SERVER.md
(https://github.com/ml-explore/mlx-lm/blob/v0.31.3/mlx_lm/SERVER.md):
  --model --host --port --max-tokens --decode-concurrency --prompt-concurrency
  --prefill-step-size --prompt-cache-size --prompt-cache-bytes --draft-model --num-draft-tokens
`python -m mlx_lm.server` is deprecated there (it prints a notice); mlx_lm/cli.py dispatches
`python -m mlx_lm server ...` and answers `python -m mlx_lm --version` with the bare version.

Routes (server.py `do_GET`): GET /health -> {"status": "ok"}, GET /v1/models. /health answers as
soon as the HTTP thread runs, while the generation thread is still loading the model
(`ResponseGenerator._generate` calls `load_default()` first): requests queue behind the load,
so readiness on /health means "accepting requests", and the warm-up request pays the load.
No Prometheus endpoint (metric_prefix ""), no KV-capacity line in the log (the cache grows on
demand, so kv_from_log is always None), no --served-model-name: a request's "model" is a path
the server loads, except "default_model" and the --model value itself (MlxConfig enforces that).
The request fields it reads (server.py `do_POST`): max_tokens /
max_completion_tokens, temperature, top_p, top_k, min_p, penalties, logit_bias, seed -- there is
no ignore_eos or min_tokens, so output length cannot be forced: forced_length_fields sends
max_tokens only and a benchmark must count the tokens it actually got.
MLX needs Apple silicon; it is not installed on the optimizer's Linux machines.
"""

from __future__ import annotations

import re
from functools import cache

from infopt.costmodel.allocation import (
    EngineKnobs,
    KvBudget,
)
from infopt.engines.base import EngineAdapter, MemoryShape, locate_executable, version_report
from infopt.engines.launch import Launch, ServingTarget
from infopt.engines.layout import LayoutKnobs
from infopt.specs.inspection import ModelInspection
from infopt.specs.serving import EngineName, MlxConfig

ENV_OVERRIDE = "INFOPT_MLX_PYTHON"
PINNED_VERSION = "0.31.3"
DEFAULT_DECODE_CONCURRENCY = 32  # server.py --decode-concurrency default


def locate() -> str:
    return locate_executable(
        ENV_OVERRIDE, None, executable=False,
        missing="MLX-LM is not installed for infopt (it runs on Apple silicon Macs only). On such "
        f"a Mac create an environment with `pip install mlx-lm=={PINNED_VERSION}` and set "
        f"{ENV_OVERRIDE} to that environment's python.",
        invalid=f"${ENV_OVERRIDE} is not a file: set it to the python of an environment where "
        "`import mlx_lm` works")


def build_launch(cfg: MlxConfig, python: str, port: int) -> Launch:
    argv = [python, "-m", "mlx_lm", "server", "--model", cfg.model_path, "--host", cfg.host,
            "--port", str(port)]
    for flag, value in (("--max-tokens", cfg.max_tokens),
                        ("--decode-concurrency", cfg.decode_concurrency),
                        ("--prompt-concurrency", cfg.prompt_concurrency),
                        ("--prefill-step-size", cfg.prefill_step_size),
                        ("--prompt-cache-size", cfg.prompt_cache_size),
                        # _parse_size: a bare integer is bytes.
                        ("--prompt-cache-bytes", cfg.prompt_cache_bytes),
                        ("--draft-model", cfg.draft_model_path),
                        ("--num-draft-tokens", cfg.num_draft_tokens)):
        if value is not None:
            argv += [flag, str(value)]
    # Local weights only: mlx_lm loads through huggingface_hub, which must not reach the hub.
    return Launch(argv=argv, env={"HF_HUB_OFFLINE": "1"}, engine=EngineName.MLX.value,
                  port=port, model_path=cfg.model_path)


def kv_from_log(text: str) -> None:
    # mlx_lm.server preallocates nothing and logs no KV capacity: there is nothing to read.
    return None


_VERSION_RE = re.compile(r"^\s*(\d+\.\d+\.\d+\S*)\s*$", re.MULTILINE)


def parse_version(text: str) -> str:
    """`python -m mlx_lm --version` prints mlx_lm.__version__ alone on a line."""
    found = _VERSION_RE.findall(text)
    return found[-1] if found else "unknown"


@cache
def detect_version(python: str) -> str:
    status, text = version_report([python, "-m", "mlx_lm", "--version"],
                                  engine="the python of an MLX-LM environment",
                                  env_var=ENV_OVERRIDE, timeout_s=60)
    return parse_version(text) if status == 0 else "unknown"


def readiness_timeout_s(weights_bytes: int, cfg: MlxConfig) -> float:
    # /health answers before the model is loaded (see the module docstring), so this bounds
    # only the interpreter and HTTP start-up; the load time lands on the first request.
    return 60.0 + 20.0 * weights_bytes / 2**30


def memory_shape(cfg: MlxConfig, target_concurrency: int, is_cpu: bool,
                 native_context_tokens: int | None = None) -> MemoryShape:
    # With a draft model the server does not batch (server.py: is_batchable = draft_model is None).
    width = 1 if cfg.draft_model_path else (cfg.decode_concurrency or DEFAULT_DECODE_CONCURRENCY)
    return MemoryShape(kv_dtype="auto", context_tokens=cfg.context_tokens,
                       max_sequences=min(width, target_concurrency),
                       knobs=EngineKnobs(device_is_cpu=is_cpu))


def control_config(t: ServingTarget) -> MlxConfig:
    """`python -m mlx_lm server --model MODEL` (clients name the model by its path)."""
    return MlxConfig(model_path=t.model_path, served_model_name=t.model_path, port=t.port,
                     context_tokens=t.native_context_tokens)


baseline_config = control_config


def kv_allocation(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
        k: EngineKnobs) -> KvBudget:
    # MLX grows its KV cache on demand in unified memory; macOS lets the GPU wire roughly 75%
    # of RAM by default (iogpu.wired_limit_mb), the practical budget. Estimate.
    budget = int(memory_bytes * 0.75)
    return KvBudget(budget, 0, budget - weights_bytes, 1, (
        "MLX: KV grows on demand in unified memory; budget ~75% of RAM (default GPU wired "
        "limit, estimate)",))


ADAPTER = EngineAdapter(
    executable_env=ENV_OVERRIDE,
    venv_executable="bin/python",
    release_package="mlx-lm",
    kv_allocator=kv_allocation,
    name=EngineName.MLX,
    # The knob capping how many requests run at once: the first tuning dimension.
    concurrency_knob="decode_concurrency",
    concurrency_knob_why="MLX-LM server's concurrent decodes",
    display_name="MLX-LM mlx_lm.server",
    config_type=MlxConfig,
    locate=locate,
    build_launch=build_launch,
    detect_version=detect_version,
    health_path="/health",
    # No ignore_eos/min_tokens in mlx_lm.server: max_tokens caps the length, nothing forces it.
    forced_length_fields=lambda n: {"max_tokens": n},
    # mlx_lm.server is http.server's BaseHTTPRequestHandler (HTTP/1.0 unless set otherwise):
    # one response per connection.
    stream_keepalive=False,
    kv_dtype_knobs=(),  # mlx_lm.server has no KV cache type option
    readiness_timeout_s=readiness_timeout_s,
    metric_prefix="",
    kv_from_log=kv_from_log,
    memory_shape=memory_shape,
    control_config=control_config,
    upstream_repos=("ml-explore/mlx-lm",),
    baseline_config=baseline_config,
    doc_url="https://github.com/ml-explore/mlx-lm/blob/v0.31.3/mlx_lm/SERVER.md",
    layout_knobs=LayoutKnobs(missing="MLX-LM serves on one Apple device"),
)
