"""Every command line the GPU check runs, built by pure functions (tested without running them).

Standard library only (see common.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# The distributions infopt imports on the steps `run` takes (hardware, plan, bench, and optimize
# on a temporary Prefect server) that the GPU machine's image lacks (its package list in the
# device tool's KINDS.md, read 2026-11-17), at the versions of this checkout's .venv. Found by
# tracing the imports of those commands here, then by rehearsing `run --dry-run` under a
# CPython 3.12 venv that holds only the image's packages (2026-12-05: openai needs httpx2, the
# contract probes need anthropic, Prefect's server burner-redis). Pure Python but for
# pydantic-core, rpds-py, orjson, sqlalchemy, greenlet, asyncpg, cryptography, cffi, jiter,
# pendulum, whenever and burner-redis.
WHEELS = (
    "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "gguf", "httpx-sse",
    "jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "jsonpointer", "openai",
    "anthropic", "jiter", "sniffio", "httpx2", "httpcore2", "truststore", "prefect", "fastapi",
    "starlette", "uvicorn", "sqlalchemy", "greenlet", "alembic", "mako", "aiosqlite", "asyncpg",
    "asgi-lifespan", "pydantic-settings", "pydantic-extra-types", "python-dotenv", "orjson",
    "pendulum", "whenever", "tzdata", "tzlocal", "pytz", "python-slugify", "text-unidecode",
    "coolname", "cronsim", "cachetools", "jinja2-humanize-extension", "graphviz", "griffelib",
    "griffecli", "docstring-parser", "exceptiongroup", "opentelemetry-api", "websockets",
    "rfc3339-validator", "ruamel-yaml", "toml", "readchar", "pydocket", "burner-redis",
    "py-key-value-aio", "redis", "uncalled-for", "beartype", "python-json-logger",
    "cryptography", "cffi", "pycparser", "amplitude-analytics", "great-expectations", "altair",
    "marshmallow", "mistune",
    # On the image, but carried at the versions rehearsed here: infopt's CLI and HTTP clients
    # and pydantic's typing floor (an older one there would fail an import, ~1 MiB in all).
    "typing-extensions", "anyio", "h11", "httpx", "httpcore", "click", "typer", "rich",
)
# The x86-64 glibc platforms pip may pick a wheel for: the GPU machine's glibc takes them all.
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
             "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux1_x86_64")
# What the check imports to know infopt runs (a wheel missing shows here, not mid-measurement).
IMPORTS = ("import infopt.cli, infopt.hardware.host, infopt.costmodel.plan\n"
           "import infopt.loadgen.bench_command, flows.optimize")
# The packages whose import says the wheels are not needed (the python has them already).
PRESENT = "import prefect, pydantic, gguf, openai, httpx_sse"
SERVER_PORT = 18932

# ---------------------------------------------------------------------------------------------
# prepare (here)


def pip_download_sdist(py: str, cache: Path, version: str) -> list[str]:
    return [py, "-m", "pip", "download", "-q", "--no-deps", "--no-binary=:all:", "-d", str(cache),
            f"llama-cpp-python=={version}"]


def pip_download_wheel(py: str, cache: Path, name: str, version: str,
                       python_version: str) -> list[str]:
    """A binary wheel for the GPU machine's CPython (never an sdist: it cannot build one)."""
    plats = [a for p in PLATFORMS for a in ("--platform", p)]
    return [py, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            "--python-version", python_version, "--implementation", "cp", *plats,
            "-d", str(cache), f"{name}=={version}"]


def prune_paths(tree: Path) -> list[Path]:
    """What of the vendored llama.cpp the CPU and CUDA build never reads (the pack's size)."""
    top = ("models", "docs", "media", ".github", ".devops", "tests", "examples", "pocs", "benches",
           "gguf-py", "conversion", "skills")
    backends = ("cann", "et", "hexagon", "hip", "metal", "musa", "opencl", "openvino", "sycl",
                "virtgpu", "vulkan", "webgpu", "zdnn", "zendnn")
    # The web UI's sources: the build embeds no UI (LLAMA_BUILD_UI=OFF, no prebuilt download).
    ui = ("src", "static", "tests", "scripts", "node_modules", "package-lock.json")
    return ([tree / t for t in top] + [tree / "ggml" / "src" / f"ggml-{b}" for b in backends]
            + [tree / "tools" / "ui" / u for u in ui])


def pack_sources(tree_parent: Path) -> tuple[list[str], list[str]]:
    """tar of llama.cpp/ piped into xz on every core: the pack's llama.cpp.tar.xz."""
    return ["tar", "-C", str(tree_parent), "-cf", "-", "llama.cpp"], ["xz", "-T0", "-6"]


def recipe(py: str, gguf: Path, out: Path) -> list[str]:
    return [py, "-m", "bench.gpu_check", "recipe", "--gguf", str(gguf), "--out", str(out)]


# ---------------------------------------------------------------------------------------------
# run (there)


def wheels_install(py: str, site: Path, wheels: Sequence[Path]) -> list[str]:
    """Into $WORK/site (on PYTHONPATH), not the image's python: no root, nothing left behind."""
    return [py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
            "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)]


def import_check(py: str) -> list[str]:
    return [py, "-c", IMPORTS]


def standin(py: str, recipe_dir: Path, out: Path) -> list[str]:
    return [py, "-m", "bench.gpu_check", "standin", "--recipe", str(recipe_dir), "--out", str(out)]


def hardware(py: str, measure: bool) -> list[str]:
    """`infopt hardware`: NVML's inventory alone beside the build, the host measured after it."""
    return [py, "-m", "infopt.cli", "hardware", "--json", *([] if measure else ["--no-measure"])]


def plan(py: str, model: Path, inventory: Path, gpu: str | None, in_tokens: int,
         out_tokens: int, streams: int) -> list[str]:
    """`infopt plan` on the measured inventory; `gpu`: the catalog's GPU instead (a rehearsal,
    or NVML's GPU unknown to the catalog)."""
    return [py, "-m", "infopt.cli", "plan", "--model", str(model), "--engine", "llamacpp",
            "--inventory", str(inventory), *(["--gpu", gpu] if gpu else []),
            "--input-tokens", str(in_tokens), "--output-tokens", str(out_tokens),
            "--context", str(in_tokens + out_tokens), "--concurrency", str(streams), "--json"]


def copybw(py: str, out: Path) -> list[str]:
    return [py, "-m", "bench.gpu_check", "copybw", "--out", str(out)]


def llama_bench(binary: Path, model: Path, in_tokens: int, out_tokens: int,
                gpu: bool) -> list[str]:
    """llama.cpp's own decode rate (one sequence, no server); every layer on the GPU."""
    return [str(binary), "-m", str(model), *(["-ngl", "99"] if gpu else []),
            "-p", str(in_tokens), "-n", str(out_tokens), "-r", "3", "-o", "json"]


def llama_server(binary: Path, model: Path, streams: int, ctx_per_slot: int,
                 port: int = SERVER_PORT) -> list[str]:
    """llama-server at llama.cpp's defaults (its auto fit: every layer on the GPU)."""
    return [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--alias", "gpu-check", "--metrics", "-c", str(streams * ctx_per_slot),
            "--parallel", str(streams)]


def bench(py: str, url: str, workload: Path, out: Path) -> list[str]:
    return [py, "-m", "infopt.cli", "bench", "--endpoint", url, "--model", "gpu-check",
            "--engine", "llamacpp", "--workload", str(workload), "--out", str(out), "--json"]


def workload_yaml(streams: int, in_tokens: int, out_tokens: int, requests: int) -> str:
    return f"""\
# bench/gpu_check.sh: decode at 1 and {streams} closed-loop streams, fixed prompt, forced length.
name: gpu-check
description: issue 32's decode check
peak_active_generations: {streams}
arrival: {{kind: sweep, over: concurrency, values: [1, {streams}]}}
input_lengths: {{kind: fixed, tokens: {in_tokens}}}
output_lengths: {{kind: fixed, tokens: {out_tokens}}}
routes: [{{route: chat_completions, stream: true}}]
measured_requests: {requests}
cooldown_s: 1
seed: 0
"""


def compare(py: str, plan_json: Path, bench_json: Path, copybw_json: Path,
            llama_bench_json: Path, out: Path) -> list[str]:
    return [py, "-m", "bench.gpu_check", "compare", "--plan", str(plan_json),
            "--bench", str(bench_json), "--copybw", str(copybw_json),
            "--llama-bench", str(llama_bench_json), "--out", str(out)]


def optimize(py: str, model: Path, runs: Path, streams: int, in_tokens: int, out_tokens: int,
             requests: int) -> list[str]:
    """A short optimize: the tuning ladder's scheduling dimension alone, one repeat, no
    scenarios: the flow on a GPU end to end, not a tuned result."""
    return [py, "-m", "infopt.cli", "optimize", "--model", str(model), "--engine", "llamacpp",
            "--runs-dir", str(runs), "--concurrency", str(streams),
            "--input-tokens", str(in_tokens), "--output-tokens", str(out_tokens),
            "--requests", str(requests), "--repeats", "1", "--scenarios", "none",
            "--dimensions", "scheduling"]


def summary(py: str, work: Path, out: Path, budget_s: int, elapsed_s: int,
            dry: bool) -> list[str]:
    return [py, "-m", "bench.gpu_check", "summary", "--work", str(work), "--out", str(out),
            "--budget", str(budget_s), "--elapsed", str(elapsed_s), *(["--dry-run"] if dry else [])]


LOG_FILES = ("build.log", "server.log", "bench.err", "bench", "llama-bench.json",
             "llama-bench.err", "copybw.json", "standin.json", "comparison.json", "stages.tsv",
             "env.txt", "gpu-apps.csv", "optimize.log", "workload.yaml", "hardware-nvml.json")


def logs_tar(work: Path, out: Path) -> list[str]:
    """Every log and intermediate file there is (a step that did not run left none)."""
    return ["tar", "-C", str(work), "-czf", str(out), "--ignore-failed-read", *LOG_FILES]


def optimize_tar(work: Path, out: Path) -> list[str]:
    """The optimize run folder, without its per-request records (their size)."""
    return ["tar", "-C", str(work), "-czf", str(out), "--exclude=*.parquet", "runs"]


# ---------------------------------------------------------------------------------------------
# the CUDA build (there)


def cmake_configure(src: Path, build: Path, flags: Sequence[str], extra: Sequence[str],
                    cuda_arch: str, ninja: bool) -> list[str]:
    """The project's recipe (infopt.bootstrap's `flags`: Release, static, no curl, native CPU,
    CUDA) for the GPU's architecture alone, without the web UI or OpenSSL."""
    return ["cmake", "-S", str(src), "-B", str(build), *(["-G", "Ninja"] if ninja else []),
            "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF",
            "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_NATIVE=ON",
            *flags, *extra, f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}", "-DLLAMA_BUILD_UI=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF"]


BUILD_TARGETS = ("llama-server", "llama-quantize", "llama-bench")


def cmake_build(build: Path, jobs: int) -> list[str]:
    return ["cmake", "--build", str(build), "-j", str(jobs), "--target", *BUILD_TARGETS]


def with_include(flags: Sequence[str], include: str) -> tuple[list[str], str]:
    """cuBLAS headers outside the toolkit (the nvidia-cublas wheel): `-I` on every language's
    flags. Returns the flags and the CUDA definition to add after the other extras."""
    lang = ("-DCMAKE_CXX_FLAGS=", "-DCMAKE_C_FLAGS=")
    out = [f"{f} {include}" if f.startswith(lang) else f for f in flags]
    if not any(f.startswith(lang) for f in flags):
        out.append(f"-DCMAKE_CXX_FLAGS={include}")
    return out, f"-DCMAKE_CUDA_FLAGS={include}"
