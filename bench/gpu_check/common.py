"""What every step of the GPU check shares: its settings, its console lines, its refusals.

Standard library only: `run` imports this on the GPU machine before the carried wheels are
installed (its python3 lacks the project's dependencies until then).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[2]
LIMIT_MIB = 64  # the most the device tool sends: working tree and carried files together
USAGE = ("usage: bash bench/gpu_check.sh prepare | run [--dry-run] | fixture DIR "
         "(`python3 -m bench.gpu_check --help` says what each does)")

_say_lock = threading.Lock()  # the background build's lines and the main thread's


def die2(message: str) -> NoReturn:
    """A refusal the user can fix: one paragraph on stderr, exit status 2."""
    sys.stdout.flush()
    print(f"gpu_check: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def say(message: str) -> None:
    with _say_lock:
        print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", flush=True)


def mib(n_bytes: int) -> str:
    return f"{n_bytes / 1048576:.2f}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_bytes(path: Path) -> int:
    """What `du -sb` reports: the apparent sizes of a tree's files and folders, links unfollowed."""
    if not path.exists():
        return 0
    total = path.lstat().st_size
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            total += os.lstat(os.path.join(root, name)).st_size
    return total


def capture(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout_s: float = 120,
            merge: bool = True) -> tuple[int, str]:
    """(exit status, stdout and, with `merge`, stderr; else stderr goes to the console): a line
    in place of a missing command's output (127) or of one that hangs (124), as the shell would
    have put there."""
    sys.stdout.flush()
    try:
        p = subprocess.run(list(argv), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT if merge else None, text=True,
                           errors="replace", timeout=timeout_s,
                           env=None if env is None else dict(env))
    except OSError:
        return 127, f"{argv[0]}: command not found\n"
    except subprocess.TimeoutExpired:
        return 124, f"{argv[0]}: no answer in {timeout_s:.0f} s\n"
    return p.returncode, p.stdout


def output(argv: Sequence[str]) -> str:
    """A command's stdout, stripped (its stderr on the console); CalledProcessError when it
    fails, which the entry reports as one line."""
    sys.stdout.flush()
    return subprocess.run(list(argv), stdout=subprocess.PIPE, text=True,
                          check=True).stdout.strip()


def tail(path: Path, n: int) -> str:
    """The last `n` lines of a text file, or "" when it is missing."""
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def echo(text: str) -> None:
    """Print `text` when there is any (a file's tail, a command's selected lines)."""
    if text:
        print(text, flush=True)


def _whole(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or str(default)
    try:
        return int(raw)
    except ValueError:
        die2(f"{name}={raw!r} is not a whole number; unset it for the default ({default}).")


@dataclass(frozen=True)
class Config:
    """The settings of one `prepare` or `run`, from the GPU_CHECK_* knobs (empty = default)."""

    repo: Path
    pack: Path  # .gpucheck/: what `prepare` assembles and `run` is given
    cache: Path  # INFOPT_CACHE_DIR of the caller: where `prepare` keeps its downloads
    py: str  # the python `run` uses on the GPU machine (its python3: no venv there)
    device_py_version: str
    cuda_arch: str
    cmake_extra: tuple[str, ...]
    outdir: Path  # what is left here comes back from the device machine
    work: Path  # the build and every intermediate file; kept between calls for the resume
    budget_s: int
    streams: int
    in_tokens: int
    out_tokens: int
    requests: int
    optimize: bool
    optimize_min_s: int
    optimize_requests: int
    plan_gpu: str
    llama_server: str  # GPU_CHECK_LLAMA_SERVER: the dry run's CPU llama-server, when set
    dry: bool = False

    @property
    def ctx_per_slot(self) -> int:
        """Each slot's context: prompt, output and a margin, in llama.cpp's 256-token steps."""
        return (self.in_tokens + self.out_tokens + 64 + 255) // 256 * 256

    @property
    def model(self) -> Path:
        return self.work / "standin.gguf"


def config(env: Mapping[str, str], repo: Path = REPO, dry: bool = False) -> Config:
    home = Path(env.get("HOME") or Path.home())
    return Config(
        repo=repo, pack=repo / ".gpucheck",
        cache=Path(env.get("INFOPT_CACHE_DIR") or home / ".cache" / "infopt"),
        py=env.get("GPU_CHECK_PYTHON") or "python3",
        device_py_version=env.get("GPU_CHECK_DEVICE_PY") or "3.12",  # the GPU machine's python3
        cuda_arch=env.get("GPU_CHECK_CUDA_ARCH") or "90-real",  # Hopper alone: a short build
        cmake_extra=tuple((env.get("GPU_CHECK_CMAKE_EXTRA") or "").split()),
        outdir=Path(env.get("OUT") or env.get("GPU_CHECK_OUT") or "/tmp/gpu-check-out"),
        work=Path(env.get("GPU_CHECK_WORK") or "/tmp/gpucheck"),
        budget_s=_whole(env, "GPU_CHECK_BUDGET_S", 480),
        streams=_whole(env, "GPU_CHECK_STREAMS", 8),
        in_tokens=_whole(env, "GPU_CHECK_INPUT_TOKENS", 128),
        out_tokens=_whole(env, "GPU_CHECK_OUTPUT_TOKENS", 256),
        requests=_whole(env, "GPU_CHECK_REQUESTS", 16),
        optimize=_whole(env, "GPU_CHECK_OPTIMIZE", 1) != 0,
        optimize_min_s=_whole(env, "GPU_CHECK_OPTIMIZE_MIN_S", 90),
        optimize_requests=_whole(env, "GPU_CHECK_OPTIMIZE_REQUESTS", 8),
        plan_gpu=env.get("GPU_CHECK_PLAN_GPU") or "H200",
        llama_server=env.get("GPU_CHECK_LLAMA_SERVER") or "",
        dry=dry)
