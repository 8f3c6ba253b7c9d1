"""`run`: the check on the GPU machine (or `--dry-run` here), from the repository root with
.gpucheck/ carried; what it leaves under $OUT comes back.

Standard library only (see common.py): infopt and its dependencies are run as commands, with
the carried wheels on their PYTHONPATH once the wheels step has installed them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from bench.gpu_check import commands
from bench.gpu_check.build import build_progress
from bench.gpu_check.common import Config, capture, die2, echo, say, tail
from bench.gpu_check.stages import Budget, Runner, build_cap, optimize_limit

LLAMA_SERVER = "from infopt.bootstrap import default_paths\nprint(default_paths().llama_server)"
LLAMACPP_DIR = "from infopt.bootstrap import default_paths\nprint(default_paths().llamacpp_dir)"
CUDA_TOTALS = """from infopt.hardware.cuda_visible import probe_cuda_totals
for bus, total in sorted(probe_cuda_totals().items()):
    print(f"cuda_total_bytes: {bus} {total} ({total / 2**30:.2f} GiB)")"""
# Everything of an earlier run but the unpacked sources and the build (it resumes).
STALE = ("bench", "runs", "prefect", "site", "cache", "standin.gguf", "server.log",
         "optimize.log", "cublas-libdir", "*.json", "*.err", "*.tsv", "*.csv", "*.yaml")


def check_prerequisites(cfg: Config) -> None:
    if not ((cfg.pack / "model").is_dir() and (cfg.pack / "llama.cpp.tar.xz").is_file()):
        die2(f"no .gpucheck/ in {cfg.repo}: run `bash bench/gpu_check.sh prepare` on a machine "
             "with network and `make engines`, then call the device tool with carry "
             "[\".gpucheck\"] (git ignores it, so it travels only when carried).")
    if shutil.which(cfg.py) is None:
        die2(f"no {cfg.py} on PATH (set GPU_CHECK_PYTHON).")
    if cfg.dry:
        return
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout
    except OSError:
        listed = ""
    if not any(line.startswith("GPU 0:") for line in listed.splitlines()):
        die2("no NVIDIA GPU here (nvidia-smi lists none), so there is nothing to measure: this "
             "check builds llama.cpp with CUDA and measures its decode on the GPU. Run it on a "
             "machine with an NVIDIA GPU, its driver, CUDA's nvcc and cuBLAS, CMake and PyTorch "
             "(the device tool), or rehearse the steps here with "
             "`bash bench/gpu_check.sh run --dry-run`.")
    try:
        nvcc_ok = subprocess.run(["nvcc", "--version"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        nvcc_ok = False
    if not nvcc_ok:
        die2("no working nvcc on PATH, so llama.cpp's CUDA backend cannot be built: install the "
             "CUDA toolkit (nvcc and cuBLAS) or put its bin/ on PATH, then run again.")
    if shutil.which("cmake") is None:
        die2("no cmake on PATH: llama.cpp cannot be built.")


def clean_work(work: Path) -> None:
    for pattern in STALE:
        for p in work.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()


def child_env(cfg: Config) -> dict[str, str]:
    """What every command of the run sees: the carried wheels and the checkout on PYTHONPATH,
    infopt's caches and runs and Prefect's home under $WORK, nothing fetched or reported."""
    w = cfg.work
    return {"PYTHONUNBUFFERED": "1", "PYTHONPATH": f"{w / 'site'}:{cfg.repo}",
            "INFOPT_CACHE_DIR": str(w / "cache"), "INFOPT_RUNS_DIR": str(w / "runs"),
            "PREFECT_HOME": str(w / "prefect"), "HF_HUB_OFFLINE": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "TRANSFORMERS_OFFLINE": "1",
            "DO_NOT_TRACK": "1"}


def env_report(cfg: Config, runner: Runner) -> str:
    """What the machine is (env.txt); no line of it may stop the run. Issue 46: the engines size
    against CUDA's total (cudaMemGetInfo), not NVML's: the two side by side per device."""
    steps: list[tuple[str, list[str], slice]] = [
        ("", ["uname", "-a"], slice(None)),
        ("python: ", [cfg.py, "-c", "import sys; print(sys.executable, sys.version.split()[0])"],
         slice(None)),
        ("", ["nvidia-smi"], slice(0, 20)),
        ("nvml_total_mib: ", ["nvidia-smi", "--query-gpu=index,pci.bus_id,memory.total",
                              "--format=csv,noheader,nounits"], slice(None)),
        ("", [cfg.py, "-c", CUDA_TOTALS], slice(None)),
        ("", ["nvcc", "--version"], slice(-2, None)),
        ("", ["cmake", "--version"], slice(0, 1)),
        ("", ["free", "-g"], slice(0, 2)),
        ("checkout: ", ["git", "rev-parse", "HEAD"], slice(None)),
    ]
    lines = [f"date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"]
    for prefix, argv, keep in steps:
        if argv[0] == "free":
            lines.append(f"cores: {len(os.sched_getaffinity(0))}")
        lines += [prefix + ln for ln in runner.capture(argv, timeout_s=60)[1].splitlines()[keep]]
    manifest = cfg.pack / "MANIFEST.txt"
    lines += manifest.read_text().splitlines() if manifest.is_file() else [
        f"{manifest}: no such file"]
    return "\n".join(lines) + "\n"


def has_gpus(inventory: Path) -> bool:
    try:
        return bool(json.loads(inventory.read_text()).get("gpus"))
    except (OSError, ValueError, AttributeError):
        return False


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _reenter(step: str, arg: Path) -> list[str]:
    """A step of this module run as its own process (`_build`, `_served`), so that its time box
    stops everything it started."""
    return [sys.executable, "-m", "bench.gpu_check", step, str(arg)]


def run_steps(cfg: Config, runner: Runner) -> int:
    """The run after its setup: 0, or 1 when there is nothing to measure (no engine)."""
    py, work, out, env, budget = cfg.py, cfg.work, cfg.outdir, runner.env, runner.budget
    say(f"start: {socket.gethostname()}, budget {cfg.budget_s} s"
        + (", DRY RUN (no GPU: a CPU llama-server)" if cfg.dry else ""))
    (work / "env.txt").write_text(env_report(cfg, runner))
    # The build first, in the background: it takes every core for minutes, and needs nothing
    # but the sources and infopt.bootstrap (standard library). The Python steps run beside it.
    build = None
    if cfg.dry:
        server = cfg.llama_server or runner.capture(
            [py, "-c", LLAMA_SERVER],
            {**env, "INFOPT_CACHE_DIR": str(cfg.cache), "INFOPT_ENGINE_DEVICE": "cpu"},
            merge=False)[1].strip()
        llama_dir = Path(server).parent.parent
        runner.record("build", "skipped", 0, f"dry run: the CPU build in {llama_dir}")
    else:
        rc, where = runner.capture([py, "-c", LLAMACPP_DIR],
                                   {**env, "INFOPT_ENGINE_DEVICE": "cuda"}, merge=False)
        if rc or not where.strip():
            say(f"{py} cannot import infopt.bootstrap (above): no place to build llama.cpp into")
            return 1
        llama_dir = Path(where.strip())
        build = runner.background("build", build_cap(budget.left()), _reenter("_build", llama_dir))
    if runner.capture([py, "-c", commands.PRESENT])[0] == 0:
        say(f"wheels: not needed ({py} imports infopt's dependencies already)")
    else:
        wheels = sorted((cfg.pack / "wheels").glob("*.whl"))
        runner.stage("wheels", 120, commands.wheels_install(py, work / "site", wheels))
    runner.stage("import", 90, commands.import_check(py))
    runner.stage("standin", 60, commands.standin(py, cfg.pack / "model", cfg.model),
                 stdout=work / "standin.json")
    # NVML's inventory now (the host's bandwidth is measured after the build, on a quiet CPU).
    inventory = work / "hardware-nvml.json"
    runner.stage("hardware-nvml", 60, commands.hardware(py, measure=False), stdout=inventory)
    # The catalog's figures for a rehearsal, or where NVML lists no GPU.
    gpu = cfg.plan_gpu if cfg.dry or not has_gpus(inventory) else None
    shape = (cfg.in_tokens, cfg.out_tokens, cfg.streams)
    runner.stage("plan", 90, commands.plan(py, cfg.model, inventory, gpu, *shape),
                 stdout=out / "plan.json")
    if gpu is None and not _nonempty(out / "plan.json"):  # NVML's GPU not in the catalog?
        runner.stage("plan-catalog", 90,
                     commands.plan(py, cfg.model, inventory, cfg.plan_gpu, *shape),
                     stdout=out / "plan.json")
    if not cfg.dry:  # the GPU is idle during the build
        runner.stage("copybw", 90, commands.copybw(py, work / "copybw.json"))
    if build is not None:
        say("waiting for the build")
        build.join()
        libdir = (work / "cublas-libdir").read_text().strip() \
            if (work / "cublas-libdir").is_file() else ""
        if libdir:
            env["LD_LIBRARY_PATH"] = ":".join(filter(None, [libdir, env.get("LD_LIBRARY_PATH")]))
    runner.stage("hardware", 60, commands.hardware(py, measure=True), stdout=out / "hardware.json")
    server_bin = llama_dir / "bin" / "llama-server"
    env["INFOPT_LLAMA_SERVER"] = str(server_bin)
    if not os.access(server_bin, os.X_OK) or not _nonempty(cfg.model):
        say(f"no llama-server ({server_bin}) or no model ({cfg.model}): nothing to measure")
        if _nonempty(work / "build.log"):
            say(f"the build had reached {build_progress(work)}: run again at once (the machine "
                "stays warm ~30 s after a call) and it resumes there")
        return 1
    runner.stage("llama-bench", budget.within(60, 20),
                 commands.llama_bench(llama_dir / "bin" / "llama-bench", cfg.model,
                                      cfg.in_tokens, cfg.out_tokens, gpu=not cfg.dry),
                 stdout=work / "llama-bench.json", stderr=work / "llama-bench.err")
    (work / "workload.yaml").write_text(
        commands.workload_yaml(cfg.streams, cfg.in_tokens, cfg.out_tokens, cfg.requests))
    runner.stage("served", budget.within(180, 60), _reenter("_served", server_bin))
    compare = commands.compare(py, out / "plan.json", out / "bench.json", work / "copybw.json",
                               work / "llama-bench.json", work / "comparison.json")
    runner.execute(compare, stdout=subprocess.DEVNULL)
    # A short optimize with the time left: Prefect's temporary server, the tuning ladder's
    # scheduling dimension alone, one repeat: the flow on a GPU end to end, not a tuned result.
    if cfg.optimize:
        runner.stage("optimize", optimize_limit(budget.left(), cfg.optimize_min_s),
                     commands.optimize(py, cfg.model, work / "runs", cfg.streams, cfg.in_tokens,
                                       cfg.out_tokens, cfg.optimize_requests),
                     stdout=work / "optimize.log", stderr=subprocess.STDOUT)
        echo(tail(work / "optimize.log", 6))
    say("measured decode against the plan (summary.json holds everything):")
    runner.execute(compare)
    return 0


def served(cfg: Config, server_bin: Path) -> int:
    """`_served`: llama-server up, `infopt bench` at 1 and N streams against it, server down."""
    work = cfg.work
    url = f"http://127.0.0.1:{commands.SERVER_PORT}"
    argv = commands.llama_server(server_bin, cfg.model, cfg.streams, cfg.ctx_per_slot)
    with (work / "server.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        tries = 0
        while tries < 240 and not _healthy(url):  # a minute for the model to load
            tries += 1
            if proc.poll() is not None:
                echo(tail(work / "server.log", 20))
                return 1
            time.sleep(0.25)
        say(f"llama-server up after ~{tries // 4} s")
        _echo_matching(work / "server.log",
                       r"offloaded [0-9]+/[0-9]+ layers|model buffer size|CUDA0")
        (work / "gpu-apps.csv").write_text(capture(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"])[1])
        with (cfg.outdir / "bench.json").open("wb") as fh, (work / "bench.err").open("wb") as err:
            sys.stdout.flush()
            rc = subprocess.run(commands.bench(cfg.py, url, work / "workload.yaml", work / "bench"),
                                stdout=fh, stderr=err).returncode
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
    _echo_matching(work / "server.log", r"eval time", last=2)
    if rc:
        echo(tail(work / "bench.err", 15))
    return rc


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5):
            return True
    except OSError:
        return False


def _echo_matching(log: Path, pattern: str, last: int = 0) -> None:
    """The log's lines that match (`grep -E`), or the last `last` of them."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if re.search(pattern, ln)] \
        if log.is_file() else []
    echo("\n".join(lines[-last:] if last else lines))


def finish(cfg: Config, runner: Runner, rc: int) -> None:
    """Always, as the run ends: the summary and the logs; what is under $OUT comes back."""
    work, out, budget = cfg.work, cfg.outdir, runner.budget
    runner.execute(commands.summary(cfg.py, work, out, cfg.budget_s, budget.elapsed(), cfg.dry))
    runner.execute(commands.logs_tar(work, out / "logs.tar.gz"), stderr=subprocess.DEVNULL)
    if (work / "runs").is_dir():
        runner.execute(commands.optimize_tar(work, out / "optimize.tar.gz"),
                       stderr=subprocess.DEVNULL)
    names = "".join(f"{e.name} " for e in os.scandir(out) if e.is_file(follow_symlinks=False))
    say(f"results in {out}: {names}")
    say(f"done in {budget.elapsed()} s (budget {cfg.budget_s} s), exit {rc}")


@contextlib.contextmanager
def console_copy(log: Path) -> Iterator[None]:
    """This process's lines and its commands' to the console and appended to `log` (through
    `tee`, as the shell's `exec > >(tee -a log) 2>&1` did)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    tee = subprocess.Popen(["tee", "-a", str(log)], stdin=subprocess.PIPE)
    assert tee.stdin is not None
    os.dup2(tee.stdin.fileno(), 1)
    os.dup2(tee.stdin.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        tee.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a straggler holds the pipe
            tee.wait(timeout=10)


def cmd_run(cfg: Config) -> int:
    budget = Budget(cfg.budget_s, cfg.dry)
    os.chdir(cfg.repo)
    check_prerequisites(cfg)
    cfg.outdir.mkdir(parents=True, exist_ok=True)
    cfg.work.mkdir(parents=True, exist_ok=True)
    clean_work(cfg.work)
    runner = Runner(cfg.work, budget, {**os.environ, **child_env(cfg)})
    rc = 1
    with console_copy(cfg.outdir / "gpu_check.log"):
        try:
            rc = run_steps(cfg, runner)
        except Exception:  # a fault of the check itself: its trace in the log, the rest kept
            traceback.print_exc()
        finally:
            finish(cfg, runner, rc)
    return rc
