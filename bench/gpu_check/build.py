"""The CUDA build of llama.cpp on the GPU machine (`run`'s background step, re-entered under its
time box as `python -m bench.gpu_check _build LLAMA_DIR`).

Standard library only (see common.py): it starts before the wheels are installed.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

from bench.gpu_check import commands
from bench.gpu_check.common import Config, echo, say, sha256_file, tail

# The project's recipe (infopt.bootstrap.ensure_llamacpp): Release, static, no curl, native CPU
# (AMX off where the CPU reports it), CUDA where nvcc is.
FLAGS = """import platform
from infopt.bootstrap import _cpu_flags, llamacpp_cmake_flags, llamacpp_device_flags
print("\\n".join(llamacpp_cmake_flags(platform.machine(), _cpu_flags())
                + llamacpp_device_flags("cuda", "nvcc")))"""
# The marker `make engines` writes: infopt reads the build's release from it.
MARKER = """from infopt.bootstrap import LLAMA_CPP_PYTHON_VERSION as v, cpu_flags_key
print(f"llama-cpp-python=={v} cpu={cpu_flags_key()}")"""


def jobs() -> int:
    """The cores this process may use (`nproc`)."""
    return len(os.sched_getaffinity(0))


def build_progress(work: Path) -> str:
    """ninja's last "[N/M]" in the build log: how far a build cut off by its time box got."""
    log = work / "build.log"
    found = re.findall(r"^\[\d+/\d+\]", log.read_text(errors="replace"), re.M) \
        if log.is_file() else []
    return found[-1] if found else ""


def cuda_root() -> Path:
    """The toolkit nvcc belongs to (its TOP: nvcc on PATH may be a wrapper script)."""
    try:
        p = subprocess.run(["nvcc", "--dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace")
        tops = re.findall(r"^#\$ TOP=(.*)$", p.stdout, re.M)
    except OSError:
        tops = []
    if tops:
        return Path(os.path.realpath(tops[0]))
    return Path(os.path.realpath(Path(os.path.realpath(shutil.which("nvcc") or "nvcc")).parent
                                 / ".."))


def cublas_candidates(root: Path) -> list[tuple[Path, Path]]:
    """(library folder, header folder) pairs to look in, the toolkit's first."""
    libs = [root / "lib64", root / "lib", root / "targets/x86_64-linux/lib",
            Path("/usr/local/cuda/lib64"), Path("/usr/lib/x86_64-linux-gnu")]
    incs = [root / "include", Path("/usr/local/cuda/include"), Path("/usr/include")]
    return [(d, i) for d in libs for i in incs]


def find_cublas(root: Path) -> tuple[Path, Path] | None:
    """cuBLAS (libcublas.so and cublas_v2.h): the toolkit's, else PyTorch's nvidia wheels'
    (nvidia/cu13/{lib,include} for CUDA 13, nvidia/cublas/... for 12)."""
    for d, inc in cublas_candidates(root):
        if (d / "libcublas.so").exists() and (inc / "cublas_v2.h").exists():
            return d, inc
    roots = [p for p in sys.path if p.endswith("-packages")] + site.getsitepackages()
    for r in roots:
        for lib in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib", "libcublas.so*"))):
            inc = Path(lib).parent.parent / "include"
            if (inc / "cublas_v2.h").exists():
                return Path(lib).parent, inc
    return None


def _first(pattern: str) -> str:
    found = sorted(glob.glob(pattern))
    return found[0] if found else pattern


def _driver_library() -> str:
    """The driver's own libcuda.so(.1): ldconfig's, else the usual folders'; "" when none."""
    try:
        lines = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True).stdout.splitlines()
    except OSError:
        lines = []
    found = [ln.split()[-1] for ln in lines if re.search(r"libcuda\.so(\.1)? ", ln)]
    found += sorted(glob.glob("/usr/local/nvidia/lib64/libcuda.so*")
                    + glob.glob("/usr/lib/x86_64-linux-gnu/libcuda.so*"))
    return found[0] if found else ""


def link_definitions(root: Path, libdir: Path) -> list[str]:
    """What CMake cannot find by itself: cuBLAS, the CUDA runtime and the driver library where
    the toolkit lacks them (a pip-made toolkit), as -D definitions."""
    extra: list[str] = []
    if not (libdir / "libcublas.so").exists():  # the wheel ships libcublas.so.N alone
        extra += [f"-DCUDA_cublas_LIBRARY={_first(f'{libdir}/libcublas.so.*')}",
                  f"-DCUDA_cublasLt_LIBRARY={_first(f'{libdir}/libcublasLt.so.*')}"]
    if not glob.glob(f"{root}/lib*/libcudart.so") \
            and not Path("/usr/local/cuda/lib64/libcudart.so").exists():
        runtimes = sorted(glob.glob(f"{libdir}/libcudart.so.*")) \
            + sorted(glob.glob(f"{root}/lib*/libcudart.so.*"))
        if runtimes:
            extra += [f"-DCUDA_CUDART={runtimes[0]}", f"-DCUDA_cudart_LIBRARY={runtimes[0]}"]
    # The driver library ggml-cuda links for its virtual-memory pool: the toolkit's stub, else
    # the driver's own libcuda.so.1; with neither (a machine with no driver: a compile test),
    # the pool without VMM.
    if not glob.glob(f"{root}/lib*/stubs/libcuda.so") \
            and not Path("/usr/local/cuda/lib64/stubs/libcuda.so").exists():
        driver = _driver_library()
        if driver:
            extra.append(f"-DCUDA_cuda_driver_LIBRARY={driver}")
        else:
            say("no libcuda (driver or stub): building without ggml's VMM pool")
            extra.append("-DGGML_CUDA_NO_VMM=ON")
    return extra


def _unpack(cfg: Config) -> None:
    """Unpack the sources, or keep them and the build: a build cut off by its time box resumes
    on the next run on the same (warm) machine, and ninja redoes nothing it finished."""
    work, src = cfg.work, cfg.work / "src"
    archive = cfg.pack / "llama.cpp.tar.xz"
    origin = f"{sha256_file(archive)} {cfg.cuda_arch} {' '.join(cfg.cmake_extra)}"
    marker = src / ".from"
    if (work / "build").is_dir() and marker.is_file() \
            and marker.read_text().rstrip("\n") == origin:
        say(f"resuming the build in {work / 'build'} (it had reached {build_progress(work)})")
        return
    for p in (src, work / "build"):
        shutil.rmtree(p, ignore_errors=True)
    (work / "build.log").unlink(missing_ok=True)
    src.mkdir(parents=True)
    subprocess.run(["tar", "-xJf", str(archive), "-C", str(src)], check=True)
    marker.write_text(origin + "\n")


def _error_lines(log: Path) -> str:
    """The first five error lines of the build log with 8 lines after each (`grep -m5 -A8`)."""
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    hits = [i for i, ln in enumerate(lines) if " error" in ln or "error:" in ln][:5]
    out: list[str] = []
    end = -1
    for i in hits:
        if out and i > end:
            out.append("--")
        out += lines[max(i, end):i + 9]
        end = max(end, i + 9)
    return "\n".join(out[:40])


def build(cfg: Config, llama_dir: Path) -> int:
    """Configure and build in $WORK/build; install bin/ at `llama_dir`. 0, or 3 (no cuBLAS),
    4 (configure failed), 5 (compile failed)."""
    work, log = cfg.work, cfg.work / "build.log"
    _unpack(cfg)
    root = cuda_root()
    found = find_cublas(root)
    if found is None:
        say("no cuBLAS (libcublas.so and cublas_v2.h) beside nvcc, in /usr/local/cuda or in "
            "python's nvidia packages: llama.cpp's CUDA backend links it")
        return 3
    libdir, incdir = found
    say(f"cuBLAS: {libdir} (headers: {incdir})")
    (work / "cublas-libdir").write_text(f"{libdir}\n")
    extra = link_definitions(root, libdir)
    extra += cfg.cmake_extra  # anything else, e.g. -DGGML_CUDA_FA_ALL_QUANTS=ON
    flags = subprocess.run([cfg.py, "-c", FLAGS], stdout=subprocess.PIPE, text=True,
                           check=True).stdout.splitlines()
    if not (libdir / "libcublas.so").exists():  # headers outside the toolkit
        flags, cuda_flags = commands.with_include(flags, f"-I{incdir}")
        extra.append(cuda_flags)
    say(f"configure: {' '.join(flags)} {' '.join(extra)} "
        f"-DCMAKE_CUDA_ARCHITECTURES={cfg.cuda_arch}")
    configure = commands.cmake_configure(work / "src/llama.cpp", work / "build", flags, extra,
                                         cfg.cuda_arch, ninja=shutil.which("ninja") is not None)
    with log.open("a") as fh:
        rc = subprocess.run(configure, stdout=fh, stderr=subprocess.STDOUT).returncode
    if rc:
        echo(tail(log, 25))
        return 4
    n = jobs()
    say(f"compiling with {n} jobs (build.log is in logs.tar.gz)")
    with log.open("a") as fh:
        fh.write(f"=== gpu_check compile, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
                 f"{n} jobs\n")
        fh.flush()
        rc = subprocess.run(commands.cmake_build(work / "build", n), stdout=fh,
                            stderr=subprocess.STDOUT).returncode
    if rc:
        echo(_error_lines(log))
        return 5
    (llama_dir / "bin").mkdir(parents=True, exist_ok=True)
    for name in commands.BUILD_TARGETS:
        shutil.copy(work / "build/bin" / name, llama_dir / "bin" / name)
    marker = subprocess.run([cfg.py, "-c", MARKER], stdout=subprocess.PIPE, text=True, check=True)
    (llama_dir / ".complete").write_text(marker.stdout)
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(
        filter(None, [str(libdir), os.environ.get("LD_LIBRARY_PATH")]))}
    server = str(llama_dir / "bin/llama-server")
    for args, n_lines in ((["--version"], 2), (["--list-devices"], 3)):
        p = subprocess.run([server, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", env=env)
        echo("\n".join(p.stdout.splitlines()[-n_lines:]))
    return 0
