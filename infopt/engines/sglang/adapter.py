"""SGLang adapter (`python -m sglang.launch_server`, OpenAI-compatible routes).

Pinned: SGLang 0.5.23 (PyPI wheel sglang-0.5.23-cp311, read, not installed). Flags checked against
its argument definitions: python/sglang/srt/arg_groups/fields/{model,schedule,parallel,exec_,spec,
serving,observability}.py (ServerArgs is assembled from these since the 0.5 arg-groups refactor)
and python/sglang/srt/server_args.py `add_cli_args` (deprecated spellings). Doc:
https://docs.sglang.io/advanced_features/server_arguments.html

  --model-path --served-model-name --host --port --context-length --mem-fraction-static
  --max-running-requests --chunked-prefill-size --max-prefill-tokens --kv-cache-dtype --tp-size
  --pp-size --attention-backend --cuda-graph-backend-decode/-prefill disabled
  --cuda-graph-max-bs-decode --enable-torch-compile --disable-radix-cache --enable-metrics
  --enable-hierarchical-cache --hicache-size --speculative-algorithm
  --speculative-draft-model-path --speculative-num-steps --speculative-eagle-topk
  --speculative-num-draft-tokens

`--disable-cuda-graph` still parses in 0.5.23 but is deprecated (server_args.py: "Use
--cuda-graph-backend-{decode,prefill}=disabled instead"), so the replacement is rendered.
There is no `--cuda-graph-max-bs` in 0.5.23 (fields/exec_.py has the per-phase
--cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill), and SGLang's parser
(server_args.py prepare_server_args: a plain argparse.ArgumentParser, abbreviations allowed)
refuses the old spelling: "ambiguous option: --cuda-graph-max-bs could match
--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill".
Every command built here goes through SGLang 0.5.23's own parser and resolution hooks on a
simulated 1- and 8-GPU H100 host (tests/integration/test_sglang_argv.py, `make sglang-args`).
Routes (python/sglang/srt/entrypoints/http_server.py): GET /health, /health_generate, /v1/models;
Prometheus on /metrics with --enable-metrics, names prefixed `sglang:`.
SGLang is not installed on the optimizer's machines: this adapter is tested on argv (parsed by
the real wheel's argument code, with no GPU kernels), version text and startup-log lines quoted
from upstream threads.
"""

from __future__ import annotations

import re
from functools import cache

from infopt.costmodel.allocation import (
    CUDA_CONTEXT_BYTES,
    NCCL_BYTES,
    EngineKnobs,
    KvBudget,
)
from infopt.engines.base import (
    CONTINUOUS_USAGE,
    CheckedVersions,
    CpuKernelRequirement,
    EngineAdapter,
    MemoryShape,
    listed_names,
    locate_executable,
    min_tokens_and_ignore_eos,
    version_report,
)
from infopt.engines.launch import Launch, ServingTarget
from infopt.engines.scoring import SGLANG_SCORING
from infopt.engines.sglang.kernel_log import KERNEL_LOG
from infopt.engines.sglang.rules import LAYOUT, default_mem_fraction_static
from infopt.engines.sglang.rules import RULES as LADDER
from infopt.specs.fit import KvObservation
from infopt.specs.inspection import ModelInspection
from infopt.specs.serving import EngineName, SglangConfig

ENV_OVERRIDE = "INFOPT_SGLANG_PYTHON"
PINNED_VERSION = "0.5.23"
GIB = 2**30


def locate() -> str:
    return locate_executable(
        ENV_OVERRIDE, None, executable=False,
        missing="SGLang is not installed for infopt (it needs a Linux host with an NVIDIA or AMD "
        f"GPU). Create an environment with `pip install \"sglang[all]=={PINNED_VERSION}\"` and "
        f"set {ENV_OVERRIDE} to that environment's python.",
        invalid=f"${ENV_OVERRIDE} is not a file: set it to the python of an environment where "
        "`import sglang` works")


def build_launch(cfg: SglangConfig, python: str, port: int) -> Launch:
    argv = [
        python, "-m", "sglang.launch_server", "--model-path", cfg.model_path,
        "--served-model-name", cfg.served_model_name, "--host", cfg.host, "--port", str(port),
        "--context-length", str(cfg.context_length), "--enable-metrics",
    ]
    optional = (("--mem-fraction-static", cfg.mem_fraction_static),
                ("--max-running-requests", cfg.max_running_requests),
                ("--schedule-policy", cfg.schedule_policy),
                ("--chunked-prefill-size", cfg.chunked_prefill_size),
                ("--max-prefill-tokens", cfg.max_prefill_tokens),
                ("--tp-size", cfg.tp_size), ("--pp-size", cfg.pp_size),
                ("--dp-size", cfg.dp_size), ("--ep-size", cfg.ep_size),
                ("--attention-backend", cfg.attention_backend),
                ("--cuda-graph-max-bs-decode", cfg.cuda_graph_max_bs_decode),
                ("--speculative-algorithm", cfg.speculative_algorithm),
                ("--speculative-draft-model-path", cfg.speculative_draft_model_path),
                ("--speculative-num-steps", cfg.speculative_num_steps),
                ("--speculative-eagle-topk", cfg.speculative_eagle_topk),
                ("--speculative-num-draft-tokens", cfg.speculative_num_draft_tokens))
    for flag, value in optional:
        if value is not None:
            argv += [flag, str(value)]
    if cfg.kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", cfg.kv_cache_dtype]
    if cfg.disable_cuda_graph:
        argv += ["--cuda-graph-backend-decode", "disabled",
                 "--cuda-graph-backend-prefill", "disabled"]
    if cfg.enable_torch_compile:
        argv.append("--enable-torch-compile")
    if cfg.disable_radix_cache:
        argv.append("--disable-radix-cache")
    if cfg.hicache_size_gb is not None:
        argv += ["--enable-hierarchical-cache", "--hicache-size", str(cfg.hicache_size_gb)]
    # Local weights only: the optimizer never lets an engine reach a hub on its own.
    return Launch(argv=argv, env={"HF_HUB_OFFLINE": "1"}, engine=EngineName.SGLANG.value,
                  port=port, model_path=cfg.model_path)


# python/sglang/srt/mem_cache/memory_pool.py `_finalize_allocation_log` (0.5.23):
#   "KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, K size: X GB, V size: Y GB"
#   "KV Cache is allocated. dtype: ..., #tokens: N, KV size: X GB"     (MLA: one latent pool)
# Older releases omit "dtype: ...," (0.4.x), the oldest also "#tokens" (then the count is on the
# "max_total_num_tokens=N" line). Hybrid models log "Full KV Cache ..." and "SWA KV Cache ...";
# speculative decoding logs the draft pool after the target's; every TP rank repeats its line.
# SGLang's "GB" is 2**30 bytes (memory_pool.py divides by GB = 1 << 30); sizes are per rank.
_ALLOC_RE = re.compile(
    r"(?:^|\]\s|\s)(?P<label>Full |SWA |[A-Za-z][\w .-]* )?KV Cache is allocated\."
    r"(?: dtype: [\w.]+,)?(?: #tokens: (?P<tokens>\d+),)?"
    r" (?:K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|KV size: (?P<kv>[\d.]+) GB)")
# Post-capture resizing (0.5.23 kv_pool_runtime.py) reports the final pool last.
_POST_CAPTURE_RE = re.compile(
    r"Post-capture KV sizing: KV cache allocated\. dtype: [\w.]+, #tokens: (?P<tokens>\d+), "
    r"KV size: (?P<kv>[\d.]+) GB")
_MAX_TOTAL_RE = re.compile(r"max_total_num_tokens=(\d+)")


def kv_from_log(text: str) -> KvObservation | None:
    """Token capacity (and K+V bytes per rank) of the target model's KV pool."""
    post = [(m, ln) for ln in text.splitlines() if (m := _POST_CAPTURE_RE.search(ln))]
    if post:
        m, line = post[-1]
        return KvObservation(tokens=int(m.group("tokens")),
                             bytes=int(round(float(m.group("kv")) * GIB)), line=line.strip())
    found = [(m, ln) for ln in text.splitlines() if (m := _ALLOC_RE.search(ln))]
    # The target pool is the first unlabelled (or "Full") allocation; drafts and SWA come later.
    target = next(((m, ln) for m, ln in found if (m.group("label") or "").strip() in ("", "Full")),
                  None)
    if target is None:
        return None
    m, line = target
    size_gb = (float(m.group("k")) + float(m.group("v"))) if m.group("kv") is None \
        else float(m.group("kv"))
    tokens = m.group("tokens")
    lines = [line.strip()]
    if tokens is None:
        total = _MAX_TOTAL_RE.search(text)
        if total is None:
            return KvObservation(bytes=int(round(size_gb * GIB)), line=line.strip())
        tokens = total.group(1)
        lines.append(next(ln for ln in text.splitlines() if _MAX_TOTAL_RE.search(ln)).strip())
    return KvObservation(tokens=int(tokens), bytes=int(round(size_gb * GIB)),
                         line="\n".join(lines))


_VERSION_RE = re.compile(r"^\s*(\d+\.\d+(?:\.\d+)?(?:[.\w+-]*)?)\s*$", re.MULTILINE)


def parse_version(text: str) -> str:
    """The last bare version line of `python -c 'print(importlib.metadata.version("sglang"))'`
    (importing sglang itself would load torch and take seconds)."""
    found = _VERSION_RE.findall(text)
    return found[-1] if found else "unknown"


@cache
def detect_version(python: str) -> str:
    status, text = version_report(
        [python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
        engine="the python of an SGLang environment", env_var=ENV_OVERRIDE, timeout_s=60)
    return parse_version(text) if status == 0 else "unknown"


def readiness_timeout_s(weights_bytes: int, cfg: SglangConfig) -> float:
    # Estimates (not measured here): load at ~30 s/GiB from cold disk, then CUDA-graph capture
    # (tens of seconds) and, with --enable-torch-compile, compilation (several minutes).
    base = 300.0 + (600.0 if cfg.enable_torch_compile else 0.0)
    return base + 30.0 * weights_bytes / GIB


def memory_shape(cfg: SglangConfig, target_concurrency: int, is_cpu: bool,
                 native_context_tokens: int | None = None) -> MemoryShape:
    seqs = min(cfg.max_running_requests or target_concurrency, target_concurrency)
    knobs: dict = {"max_num_seqs": cfg.max_running_requests, "device_is_cpu": is_cpu,
                   "enforce_eager": cfg.disable_cuda_graph}
    if cfg.mem_fraction_static is not None:  # else SGLang's own default (kv_allocation)
        knobs["mem_fraction_static"] = cfg.mem_fraction_static
    if cfg.chunked_prefill_size is not None and cfg.chunked_prefill_size > 0:
        knobs["max_num_batched_tokens"] = cfg.chunked_prefill_size
    return MemoryShape(kv_dtype=cfg.kv_cache_dtype, context_tokens=cfg.context_length,
                       max_sequences=seqs, knobs=EngineKnobs(**knobs),
                       tensor_parallel=cfg.tp_size or 1, pipeline_parallel=cfg.pp_size or 1)


def control_config(t: ServingTarget) -> SglangConfig:
    """`python -m sglang.launch_server --model-path MODEL`: context_length defaults to the
    model's own (model_config.py), so naming it changes nothing."""
    return SglangConfig(model_path=t.model_path, served_model_name=t.served_model_name,
                        port=t.port, context_length=t.native_context_tokens)


baseline_config = control_config


def kv_allocation(m: ModelInspection, memory_bytes: int, weights_bytes: int, tp: int, device: str,
           k: EngineKnobs) -> KvBudget:
    """SGLang: total x mem_fraction_static - weights - CUDA context, one token per cell
    (python/sglang/srt/model_executor/model_runner.py profile_max_num_token); the fraction is
    SGLang's own default for this GPU and shape when the configuration names none."""
    frac = k.mem_fraction_static
    why = "mem_fraction_static"
    if frac is None:
        frac = default_mem_fraction_static(
            memory_bytes, tp, chunked_prefill_size=k.max_num_batched_tokens,
            mla=m.attention.kind.value == "MLA", graphs=not k.enforce_eager)
        why = "SGLang's default for this GPU and shape (memory_hook.py)"
    budget = int(memory_bytes * frac)
    ctx = CUDA_CONTEXT_BYTES + (NCCL_BYTES if tp > 1 else 0)
    return KvBudget(budget, ctx, budget - weights_bytes - ctx, 1, (
        f"SGLang: static memory = {frac:g} x device memory ({why})",
        f"CUDA context ~{ctx / GIB:.2f} GiB (estimate)", "token-granular KV pool"))


# SGLang's ModelRegistry registers each module of sglang/srt/models by its `EntryClass` (a class
# or a list of them; python/sglang/srt/models/registry.py import_model_classes, 0.5.23), under
# the class's name. Importing them all needs torch and each model's kernels, so the installed
# package's files are read instead, in its own python: the same names, without the imports.
_REGISTRY_SCRIPT = """
import ast, importlib.util, json, pathlib
spec = importlib.util.find_spec("sglang")
names = set()
for f in (pathlib.Path(spec.submodule_search_locations[0]) / "srt" / "models").glob("*.py"):
    for node in ast.parse(f.read_text(errors="replace")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EntryClass"
                                                for t in node.targets):
            v = node.value
            names.update(getattr(e, "id", None) for e in
                         (v.elts if isinstance(v, (ast.List, ast.Tuple)) else [v]))
print(json.dumps(sorted(n for n in names if n)))
"""


@cache
def architectures(python: str) -> frozenset[str] | None:
    """The architectures the installed SGLang's model registry lists, read from its package's
    sglang/srt/models; None when the probe did not answer."""
    return listed_names(python, _REGISTRY_SCRIPT)


ADAPTER = EngineAdapter(
    executable_env=ENV_OVERRIDE,
    venv_executable="bin/python",
    release_package="sglang",
    installed_release=detect_version,
    kv_allocator=kv_allocation,
    name=EngineName.SGLANG,
    # The knob capping how many requests run at once: the first tuning dimension.
    concurrency_knob="max_running_requests",
    concurrency_knob_why="SGLang's cap on running requests",
    display_name="SGLang",
    config_type=SglangConfig,
    locate=locate,
    architectures=architectures,
    build_launch=build_launch,
    detect_version=detect_version,
    health_path="/health",
    # protocol.py (0.5.23) CompletionRequest and ChatCompletionRequest both carry min_tokens and
    # ignore_eos (mapped to min_new_tokens / ignore_eos in the sampling params).
    forced_length_fields=min_tokens_and_ignore_eos,
    # SGLang's StreamOptions (openai_api/protocol.py) has the same vLLM extension.
    stream_counting=CONTINUOUS_USAGE,
    readiness_timeout_s=readiness_timeout_s,
    metric_prefix="sglang:",
    # scheduler get_internal_state: avg_spec_accept_length (cumulative since the server
    # started; absent without speculation), as SGLang's own tests read it.
    spec_accept_length_route="/get_server_info",
    kv_from_log=kv_from_log,
    kernel_log=KERNEL_LOG,
    memory_shape=memory_shape,
    control_config=control_config,
    upstream_repos=("sgl-project/sglang",),
    baseline_config=baseline_config,
    doc_url="https://docs.sglang.io/advanced_features/server_arguments.html",
    container_image="lmsysorg/sglang:v0.5.23",
    checked_versions=CheckedVersions((PINNED_VERSION,), (
        "every command parsed by SGLang 0.5.23's own argument parser and resolved by its "
        "resolution hooks on a simulated 1- and 8-GPU H100 host: "
        "tests/integration/test_sglang_argv.py")),
    kv_dtypes=("auto", "fp8_e4m3"),  # server_args.py: SGLang spells its FP8 KV fp8_e4m3/e5m2
    cpu_kernel_requirements=(CpuKernelRequirement(
        knob="attention_backend", values=frozenset({"intel_amx"}),
        isa_any_of=(frozenset({"amx_tile"}),),
        what="the Intel AMX attention backend",
        # cpu_has_amx_support() = torch's _is_amx_tile_supported() and sgl_kernel's CPU build;
        # docs/platforms/cpu_server.md: "enabled and optimized on the CPUs equipped with AMX".
        source="sgl-project/sglang python/sglang/srt/utils.py cpu_has_amx_support, "
               "docs/platforms/cpu_server.md"),),
    container_executable="python3",
    # The native /tokenize (docs: basic_usage/native_api.md) takes vLLM's body and answers
    # {"tokens", "count", "max_model_len"}; /generate scores teacher-forced tokens exactly.
    tokenize_path="/tokenize",
    # http_server.py: GET /get_model_info answers {"model_path", "is_generation", ...}.
    identity_probe=("/get_model_info", "is_generation"),
    tokenize_body=lambda model, text: {"model": model, "prompt": text, "add_special_tokens": False},
    tokenize_count=lambda js: int(js["count"]),
    token_scoring=SGLANG_SCORING,
    layout_knobs=LAYOUT,
    ladder=LADDER,
)
