"""`prepare` and `fixture`, here (network, `make engines` done): assemble .gpucheck/ and check
that what travels fits the device tool's 64 MiB; file a run's returned files as a fixture.

The steps that need infopt, gguf or pip run under the project's venv; this module itself is
standard library only (see common.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.gpu_check import commands
from bench.gpu_check.common import (
    LIMIT_MIB,
    Config,
    die2,
    mib,
    output,
    say,
    sha256_file,
    tree_bytes,
)

VERSION = "from infopt.bootstrap import LLAMA_CPP_PYTHON_VERSION as v; print(v)"
GGUF = "from infopt.bootstrap import default_paths; print(default_paths().gguf)"
# Each name's installed version, "-" where it is not installed: one python for all the wheels.
VERSIONS = """import sys, importlib.metadata as m
for name in sys.argv[1:]:
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "-")"""
PIP_NOISE = "is neither a file nor a directory"  # pip on a local index folder that is absent


def venv_py(repo: Path) -> str:
    py = repo / ".venv/bin/python"
    if not os.access(py, os.X_OK):
        die2(f"this step needs the project's venv ({py}): run `make engines` first (it also puts "
             "the bundled model in the cache the recipe is read from).")
    return str(py)


def _pip(argv: Sequence[str]) -> None:
    """A pip download, its output on the console but for its warnings about absent index
    folders; its failure shows in what is then missing."""
    sys.stdout.flush()
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace")
    for line in p.stdout.splitlines():
        if PIP_NOISE not in line:
            print(line, flush=True)


def pack_sources(cfg: Config, py: str) -> None:
    """The llama.cpp that `make engines` builds (vendored in the llama-cpp-python sdist), pruned
    of what the CPU and CUDA build never reads: .gpucheck/llama.cpp.tar.xz."""
    version = output([py, "-c", VERSION])
    cache = cfg.cache / "gpucheck"
    sdist = cache / f"llama_cpp_python-{version}.tar.gz"
    if not (sdist.is_file() and sdist.stat().st_size):
        say(f"downloading the llama-cpp-python=={version} sdist (73 MiB: the source of make "
            "engines)")
        cache.mkdir(parents=True, exist_ok=True)
        _pip(commands.pip_download_sdist(py, cache, version))
        if not (sdist.is_file() and sdist.stat().st_size):
            die2(f"could not download llama-cpp-python=={version} (pip, above).")
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["tar", "-xzf", str(sdist), "-C", work], check=True)
        tree = Path(work) / f"llama_cpp_python-{version}/vendor/llama.cpp"
        if not (tree / "CMakeLists.txt").is_file():
            die2(f"{sdist} holds no vendor/llama.cpp.")
        for p in commands.prune_paths(tree):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
        (tree / "GPU_CHECK_SOURCE").write_text(
            f"llama-cpp-python=={version}\nsdist sha256 {sha256_file(sdist)}\n")
        tar, xz = commands.pack_sources(tree.parent)
        with (cfg.pack / "llama.cpp.tar.xz").open("wb") as fh:
            t = subprocess.Popen(tar, stdout=subprocess.PIPE)
            assert t.stdout is not None
            x = subprocess.run(xz, stdin=t.stdout, stdout=fh)
            t.stdout.close()
            if t.wait() or x.returncode:
                die2("could not pack the llama.cpp sources (tar or xz, above).")


def wheel_pattern(name: str, version: str) -> re.Pattern[str]:
    """A wheel's file name: the name with each of -_. as any of them, any case; then -VERSION-."""
    return re.compile(f"^{re.sub(r'[-_.]', '[-_.]', name)}-{re.escape(version)}-.*\\.whl$", re.I)


def _cached_wheel(cache: Path, pattern: re.Pattern[str]) -> Path | None:
    found = sorted(p for p in cache.iterdir() if p.is_file() and pattern.match(p.name))
    return found[0] if found else None


def pack_wheels(cfg: Config, py: str) -> None:
    """The wheels of what infopt imports and the GPU machine's image lacks, at this venv's
    versions, for its CPython: .gpucheck/wheels/ (downloads kept in the cache)."""
    cache = cfg.cache / "gpucheck" / f"wheels-cp{cfg.device_py_version.replace('.', '')}"
    dest = cfg.pack / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()
    versions = dict(ln.split(" ", 1) for ln in output([py, "-c", VERSIONS, *commands.WHEELS])
                    .splitlines())
    for name in commands.WHEELS:
        version = versions.get(name, "-")
        if version == "-":
            die2(f"{name} is not installed in .venv: run `make venv`.")
        pattern = wheel_pattern(name, version)
        wheel = _cached_wheel(cache, pattern)
        if wheel is None:
            _pip(commands.pip_download_wheel(py, cache, name, version, cfg.device_py_version))
            wheel = _cached_wheel(cache, pattern)
        if wheel is None:
            die2(f"no CPython {cfg.device_py_version} x86-64 wheel of {name}=={version} on the "
                 "index (pip, above); the GPU machine cannot build one.")
        shutil.copy(wheel, dest / wheel.name)


def working_tree_bytes(repo: Path) -> int:
    """What the device tool sends of the checkout: tracked and untracked files git does not
    ignore (a tracked file deleted here is not sent)."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=repo,
                            stdout=subprocess.PIPE, check=True).stdout
    total = 0
    for name in filter(None, listed.split(b"\0")):
        try:
            total += os.lstat(repo / os.fsdecode(name)).st_size
        except FileNotFoundError:
            pass
    return total


def travel_bytes(repo: Path, pack: Path) -> tuple[int, int, int]:
    """(working tree, .gpucheck/, shared/) in bytes: what the device tool sends."""
    return working_tree_bytes(repo), tree_bytes(pack), tree_bytes(repo / "shared")


def carry_lines(files: int, pack: int, shared: int, limit_mib: int = LIMIT_MIB) -> list[str]:
    return [f"working tree (tracked + untracked, not ignored) {mib(files)} MiB; shared/ "
            f"{mib(shared)} MiB; .gpucheck/ {mib(pack)} MiB",
            f"what travels: {mib(files + pack + shared)} MiB of the {limit_mib} MiB the device "
            "tool takes"]


def check_carry(files: int, pack: int, shared: int, limit_mib: int = LIMIT_MIB) -> None:
    """Print what travels; exit 1 when it is over the device machine's limit."""
    for line in carry_lines(files, pack, shared, limit_mib):
        print(line)
    if files + pack + shared > limit_mib * 1048576:
        sys.stdout.flush()
        print(f"gpu_check: over the device machine's {limit_mib} MiB: not ready.",
              file=sys.stderr)
        raise SystemExit(1)


READY = """
Ready. On the GPU machine (the device tool's run), from the repository root:
  command:   bash bench/gpu_check.sh run
  carry:     [".gpucheck"]
  timeout_s: 600   (the script ends itself after GPU_CHECK_BUDGET_S, default 480 s)
If it says the build was cut off, at once (the machine stays warm ~30 s), the same carry and:
  command:   GPU_CHECK_BUDGET_S=240 bash bench/gpu_check.sh run     (the build resumes)
then here:   bash bench/gpu_check.sh fixture <the folder its files came back to>"""


def _ignore_pack(repo: Path) -> None:
    """.gpucheck/ must not travel with the working tree (it travels when carried)."""
    exclude = repo / output(["git", "rev-parse", "--git-path", "info/exclude"])
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text() if exclude.is_file() else ""
    if "/.gpucheck/" not in text.splitlines():
        with exclude.open("a") as fh:
            fh.write("/.gpucheck/\n")
    if subprocess.run(["git", "check-ignore", "-q", ".gpucheck/x"]).returncode:
        die2(f".gpucheck/ is not ignored by git (see {exclude}).")


def manifest(cfg: Config, gguf: Path) -> str:
    pack, wheels = cfg.pack, sorted(p.name for p in (cfg.pack / "wheels").glob("*.whl"))
    dirty = subprocess.run(["git", "diff", "--quiet"]).returncode != 0
    source = output(["tar", "-xJOf", str(pack / "llama.cpp.tar.xz"),
                     "llama.cpp/GPU_CHECK_SOURCE"]).splitlines()[0]
    return "\n".join([
        "# .gpucheck/, made by bench/gpu_check.sh prepare "
        + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        f"# checkout {output(['git', 'rev-parse', '--short', 'HEAD'])}"
        + (" + local changes" if dirty else ""),
        f"llama.cpp.tar.xz {mib((pack / 'llama.cpp.tar.xz').stat().st_size)} MiB ({source})",
        f"model/ {mib(tree_bytes(pack / 'model'))} MiB (recipe of {gguf.name})",
        f"wheels/ {mib(tree_bytes(pack / 'wheels'))} MiB ({len(wheels)} wheels)",
        *wheels]) + "\n"


def cmd_prepare(cfg: Config) -> int:
    py = venv_py(cfg.repo)
    os.chdir(cfg.repo)
    _ignore_pack(cfg.repo)
    cfg.pack.mkdir(exist_ok=True)
    say("llama.cpp sources")
    pack_sources(cfg, py)
    say("model recipe (the bundled GGUF's header; the stand-in is rebuilt from it there)")
    gguf = Path(output([py, "-c", GGUF]))
    if not (gguf.is_file() and gguf.stat().st_size):
        die2(f"the bundled model is not in the cache ({gguf}): run `make engines`.")
    shutil.rmtree(cfg.pack / "model", ignore_errors=True)
    sys.stdout.flush()
    subprocess.run(commands.recipe(py, gguf, cfg.pack / "model"), check=True)
    say(f"wheels for CPython {cfg.device_py_version} (what the GPU machine's image lacks)")
    pack_wheels(cfg, py)
    sizes = travel_bytes(cfg.repo, cfg.pack)
    text = manifest(cfg, gguf)
    (cfg.pack / "MANIFEST.txt").write_text(text)
    print()
    print("\n".join(text.splitlines()[2:5]))
    check_carry(*sizes)
    print(READY)
    return 0


# ---------------------------------------------------------------------------------------------
# fixture


def fixture_name(summary: dict) -> str:
    """`<date>-<gpu>` (`-dry-run` after a rehearsal): the run's day and NVML's name of its GPU."""
    gpu = re.sub(r"[^A-Za-z0-9._-]+", "-", summary.get("gpu") or "no-gpu")
    return (str(summary.get("date") or "undated")[:10] + "-" + gpu
            + ("-dry-run" if summary.get("dry_run") else ""))


def cmd_fixture(repo: Path, src: str | None) -> int:
    if not src or not (Path(src) / "summary.json").is_file():
        die2("fixture DIR: DIR must hold the files a run returned (summary.json, hardware.json, "
             "...), e.g. the device tool's files_at.")
    try:
        summary = json.loads((Path(src) / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        die2(f"fixture DIR: {src}/summary.json is not a run's summary ({exc}).")
    if not isinstance(summary, dict):
        die2(f"fixture DIR: {src}/summary.json is not a run's summary (not a JSON object).")
    dest = repo / "tests/fixtures/gpu_check" / fixture_name(summary)
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(Path(src).iterdir()):
        if f.is_file():
            shutil.copy(f, dest / f.name)
    size = output(["du", "-sh", str(dest)]).split()[0]
    say(f"fixture: {dest} ({size}); note it in tests/fixtures/gpu_check/README.md")
    return 0
