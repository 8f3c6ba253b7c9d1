#!/usr/bin/env bash
# Issue 32: the one-shot check on a machine with an NVIDIA GPU, CUDA (nvcc, cuBLAS), CMake and
# PyTorch but no network. It builds llama.cpp with CUDA, runs `infopt hardware` against the real
# NVML, measures llama.cpp's decode on the GPU and compares it with `infopt plan`'s ceilings and
# attainable estimates, then runs a short `infopt optimize` with the time left. Its output is
# kept as a fixture (tests/fixtures/gpu_check/).
#
#   bench/gpu_check.sh prepare          here (network, `make engines` done): assemble .gpucheck/,
#                                       check that what travels fits 64 MiB, print the carry list
#   bench/gpu_check.sh run              there (the GPU machine), from the repository root, with
#                                       .gpucheck carried; results under $OUT (else
#                                       $GPU_CHECK_OUT, default /tmp/gpu-check-out)
#   bench/gpu_check.sh run --dry-run    here: the same steps without a GPU (the CPU llama-server
#                                       of `make engines`, `plan --gpu H200`), to rehearse them
#   bench/gpu_check.sh fixture DIR      here: copy a run's returned files into
#                                       tests/fixtures/gpu_check/<date>-<gpu>/
#
# The model. The bundled SmolLM2-135M-Instruct Q4_1 GGUF (93.8 MiB) cannot travel: the device
# machine takes at most 64 MiB (working tree and carried files together), reaches no network, and
# the file does not compress (zstd: 88 MiB). `prepare` carries its header instead (metadata,
# tokenizer and tensor table: 0.5 MiB gzipped) and `run` rebuilds from it there a stand-in GGUF of
# the identical layout and size with synthetic weights (bench/gpu_check.py standin): the same
# architecture, tensor shapes and quantization types (Q4_1 blocks, Q8_0 token embedding), so the
# same bytes per token, kernels and decode speed, and the same `infopt plan` (checked here: the
# plan JSON is identical). Its text is meaningless, so the optimize step's quality verdicts are
# too. A real model needs a machine that can fetch it.
#
# What travels (`prepare` prints the sizes): the working tree (~4 MiB) and .gpucheck/: the
# llama.cpp that `make engines` builds (vendored in the llama-cpp-python sdist, pruned of its
# models, docs, tests and other GPU backends, xz: ~4 MiB), the model recipe, and the wheels of
# the Python packages infopt imports that the GPU machine's image lacks (Prefect, pydantic, gguf,
# ...: ~38 MiB, CPython 3.12 x86-64).
#
# The run's time (GPU_CHECK_BUDGET_S, default 480 s; the device tool's call allows 600): the
# CUDA build starts at once in the background, time-boxed to the budget less 95 s (at most
# 450 s), with the Python steps beside it (wheels, NVML's inventory, the plan, the stand-in, the
# GPU's copy bandwidth); then the measured inventory, llama-bench and the served measurement;
# the optimize step gets what remains, or is skipped under 90 s. A build cut off by its time box
# resumes where it stopped when `run` is called again on the same machine while it is still
# warm (the device tool keeps one ~30 s after a call). The build, timed here on 2 shared cores
# without a GPU (152 of its 359 steps), needs an estimated 6,000-7,500 CPU-seconds (an upper
# bound: the compile times were taken under load), so 6-8 minutes on 16 cores of that speed:
# the first call's build may be cut off and a second call, at once, finish it
# (GPU_CHECK_BUDGET_S=240), or the first call may be given 540 s (the call allows 600).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
PACK="$REPO/.gpucheck"
LIMIT_MIB=64
DEVICE_PY_VERSION="${GPU_CHECK_DEVICE_PY:-3.12}"  # the GPU machine's python3 (KINDS.md)
CUDA_ARCH="${GPU_CHECK_CUDA_ARCH:-90-real}"       # H100/H200 (Hopper, sm_90) alone: a short build

# The distributions infopt imports on the steps `run` takes (hardware, plan, bench, and optimize
# on a temporary Prefect server) that the GPU machine's image lacks (its package list in the
# device tool's KINDS.md, read 2026-11-17), at the versions of this checkout's .venv. Found by
# tracing the imports of those commands here, then by rehearsing `run --dry-run` under a
# CPython 3.12 venv that holds only the image's packages (2026-12-05: openai needs httpx2, the
# contract probes need anthropic, Prefect's server burner-redis). Pure Python but for
# pydantic-core, rpds-py, orjson, sqlalchemy, greenlet, asyncpg, cryptography, cffi, jiter,
# pendulum, whenever and burner-redis.
WHEELS=(
    pydantic pydantic-core annotated-types typing-inspection gguf httpx-sse jsonschema
    jsonschema-specifications referencing rpds-py jsonpointer openai anthropic jiter sniffio
    httpx2 httpcore2 truststore prefect fastapi starlette uvicorn sqlalchemy greenlet alembic
    mako aiosqlite asyncpg asgi-lifespan pydantic-settings pydantic-extra-types python-dotenv
    orjson pendulum whenever tzdata tzlocal pytz python-slugify text-unidecode coolname cronsim
    cachetools jinja2-humanize-extension graphviz griffelib griffecli docstring-parser
    exceptiongroup opentelemetry-api websockets rfc3339-validator ruamel-yaml toml readchar
    pydocket burner-redis py-key-value-aio redis uncalled-for beartype python-json-logger
    cryptography cffi pycparser amplitude-analytics great-expectations altair marshmallow mistune
    # On the image, but carried at the versions rehearsed here: infopt's CLI and HTTP clients
    # and pydantic's typing floor (an older one there would fail an import, ~1 MiB in all).
    typing-extensions anyio h11 httpx httpcore click typer rich
)

die2() {  # a refusal the user can fix: one paragraph, exit status 2
    printf 'gpu_check: %s\n' "$*" >&2
    exit 2
}

say() { printf '[gpu_check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }

# ------------------------------------------------------------------------------------------------
# prepare (here)

venv_py() {
    local py="$REPO/.venv/bin/python"
    [[ -x "$py" ]] || die2 "this step needs the project's venv ($py): run \`make engines\`" \
        "first (it also puts the bundled model in the cache the recipe is read from)."
    printf '%s' "$py"
}

prune_llamacpp() {  # $1: the vendored llama.cpp tree; keeps what the CPU and CUDA build reads
    local t="$1" b
    rm -rf "${t:?}"/{models,docs,media,.github,.devops,tests,examples,pocs,benches,gguf-py} \
        "${t:?}"/{conversion,skills}
    for b in cann et hexagon hip metal musa opencl openvino sycl virtgpu vulkan webgpu zdnn \
        zendnn; do
        rm -rf "$t/ggml/src/ggml-$b"
    done
    # The web UI's sources: the build embeds no UI (LLAMA_BUILD_UI=OFF, no prebuilt download).
    rm -rf "$t"/tools/ui/{src,static,tests,scripts,node_modules,package-lock.json}
}

pack_sources() {
    local py="$1" version cache sdist work tree
    version="$("$py" -c 'from infopt.bootstrap import LLAMA_CPP_PYTHON_VERSION as v; print(v)')"
    cache="${INFOPT_CACHE_DIR:-$HOME/.cache/infopt}/gpucheck"
    sdist="$cache/llama_cpp_python-$version.tar.gz"
    if [[ ! -s "$sdist" ]]; then
        say "downloading the llama-cpp-python==$version sdist (73 MiB: the source of make engines)"
        mkdir -p "$cache"
        "$py" -m pip download -q --no-deps --no-binary=:all: -d "$cache" \
            "llama-cpp-python==$version" 2>&1 | { grep -v 'is neither a file nor a directory' || true; }
        [[ -s "$sdist" ]] || die2 "could not download llama-cpp-python==$version (pip, above)."
    fi
    work="$(mktemp -d)"
    tar -xzf "$sdist" -C "$work"
    tree="$work/llama_cpp_python-$version/vendor/llama.cpp"
    [[ -f "$tree/CMakeLists.txt" ]] || die2 "$sdist holds no vendor/llama.cpp."
    prune_llamacpp "$tree"
    printf 'llama-cpp-python==%s\nsdist sha256 %s\n' "$version" \
        "$(sha256sum "$sdist" | cut -d' ' -f1)" > "$tree/GPU_CHECK_SOURCE"
    tar -C "$tree/.." -cf - llama.cpp | xz -T0 -6 > "$PACK/llama.cpp.tar.xz"
    rm -rf "$work"
}

pack_wheels() {
    local py="$1" cache name version pattern file plats=() p
    cache="${INFOPT_CACHE_DIR:-$HOME/.cache/infopt}/gpucheck/wheels-cp${DEVICE_PY_VERSION/./}"
    mkdir -p "$cache" "$PACK/wheels"
    rm -f "$PACK/wheels"/*.whl
    for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 \
        manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 \
        manylinux_2_34_x86_64 manylinux_2_35_x86_64 manylinux1_x86_64; do
        plats+=(--platform "$p")
    done
    for name in "${WHEELS[@]}"; do
        version="$("$py" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' \
            "$name" 2> /dev/null)" || die2 "$name is not installed in .venv: run \`make venv\`."
        # A wheel's file name: the name with runs of -_. as _, any case; then -VERSION-.
        pattern="^${name//[-_.]/[-_.]}-${version//./\\.}-.*\.whl$"
        file="$(find "$cache" -maxdepth 1 -type f -printf '%f\n' | grep -iE "$pattern" | head -1 || true)"
        if [[ -z "$file" ]]; then
            "$py" -m pip download -q --no-deps --only-binary=:all: \
                --python-version "$DEVICE_PY_VERSION" --implementation cp "${plats[@]}" \
                -d "$cache" "$name==$version" 2>&1 \
                | { grep -v 'is neither a file nor a directory' || true; }
            file="$(find "$cache" -maxdepth 1 -type f -printf '%f\n' | grep -iE "$pattern" \
                | head -1 || true)"
        fi
        [[ -n "$file" ]] || die2 "no CPython $DEVICE_PY_VERSION x86-64 wheel of $name==$version" \
            "on the index (pip, above); the GPU machine cannot build one."
        cp "$cache/$file" "$PACK/wheels/"
    done
}

travel_bytes() {  # "FILES PACK SHARED": what the device tool sends, in bytes
    local files pack shared=0
    files="$(cd "$REPO" && git ls-files -z -co --exclude-standard \
        | xargs -0 -r stat -c %s 2> /dev/null | awk '{ s += $1 } END { print s + 0 }')"
    pack="$(du -sb "$PACK" | cut -f1)"
    [[ -d "$REPO/shared" ]] && shared="$(du -sb "$REPO/shared" | cut -f1)"
    echo "$files $pack $shared"
}

cmd_prepare() {
    local py exclude gguf files pack shared total
    py="$(venv_py)"
    cd "$REPO"
    exclude="$(git rev-parse --git-path info/exclude)"
    mkdir -p "$(dirname "$exclude")"
    grep -qxF '/.gpucheck/' "$exclude" 2> /dev/null || echo '/.gpucheck/' >> "$exclude"
    git check-ignore -q .gpucheck/x || die2 ".gpucheck/ is not ignored by git (see $exclude)."
    mkdir -p "$PACK"
    say "llama.cpp sources"
    pack_sources "$py"
    say "model recipe (the bundled GGUF's header; the stand-in is rebuilt from it there)"
    gguf="$("$py" -c 'from infopt.bootstrap import default_paths; print(default_paths().gguf)')"
    [[ -s "$gguf" ]] || die2 "the bundled model is not in the cache ($gguf): run \`make engines\`."
    rm -rf "$PACK/model"
    "$py" -m bench.gpu_check recipe --gguf "$gguf" --out "$PACK/model"
    say "wheels for CPython $DEVICE_PY_VERSION (what the GPU machine's image lacks)"
    pack_wheels "$py"
    read -r files pack shared < <(travel_bytes)
    total=$((files + pack + shared))
    {
        echo "# .gpucheck/, made by bench/gpu_check.sh prepare $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "# checkout $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + local changes')"
        printf 'llama.cpp.tar.xz %s MiB (%s)\n' \
            "$(mib "$(stat -c %s "$PACK/llama.cpp.tar.xz")")" \
            "$(tar -xJOf "$PACK/llama.cpp.tar.xz" llama.cpp/GPU_CHECK_SOURCE | head -1)"
        printf 'model/ %s MiB (recipe of %s)\n' "$(mib "$(du -sb "$PACK/model" | cut -f1)")" \
            "$(basename "$gguf")"
        printf 'wheels/ %s MiB (%s wheels)\n' "$(mib "$(du -sb "$PACK/wheels" | cut -f1)")" \
            "$(find "$PACK/wheels" -name '*.whl' | wc -l)"
        find "$PACK/wheels" -name '*.whl' -printf '%f\n' | sort
    } > "$PACK/MANIFEST.txt"
    echo
    sed -n '3,5p' "$PACK/MANIFEST.txt"
    printf 'working tree (tracked + untracked, not ignored) %s MiB; shared/ %s MiB; ' \
        "$(mib "$files")" "$(mib "$shared")"
    printf '.gpucheck/ %s MiB\n' "$(mib "$pack")"
    printf 'what travels: %s MiB of the %s MiB the device tool takes\n' "$(mib "$total")" \
        "$LIMIT_MIB"
    if ((total > LIMIT_MIB * 1048576)); then
        echo "gpu_check: over the device machine's $LIMIT_MIB MiB: not ready." >&2
        exit 1
    fi
    cat << EOF

Ready. On the GPU machine (the device tool's run), from the repository root:
  command:   bash bench/gpu_check.sh run
  carry:     [".gpucheck"]
  timeout_s: 600   (the script ends itself after GPU_CHECK_BUDGET_S, default 480 s)
If it says the build was cut off, at once (the machine stays warm ~30 s), the same carry and:
  command:   GPU_CHECK_BUDGET_S=240 bash bench/gpu_check.sh run     (the build resumes)
then here:   bash bench/gpu_check.sh fixture <the folder its files came back to>
EOF
}

# ------------------------------------------------------------------------------------------------
# run (there)

T0=$SECONDS
BUDGET_S="${GPU_CHECK_BUDGET_S:-480}"
left() { echo $((BUDGET_S - (SECONDS - T0))); }
within() {  # within WANT FLOOR: WANT seconds, or what is left of the budget, but at least FLOOR
    local l=$(($(left) - 5))
    if [[ -n "${DRY:-}" ]]; then  # a rehearsal on the CPU: its engine is ~50x slower
        set -- $(($1 * 5)) $(($2 * 5))
    fi
    ((l > $1)) && l=$1
    ((l < $2)) && l=$2
    echo "$l"
}

record() {  # record NAME STATUS SECONDS NOTE: one line of $WORK/stages.tsv (subshells too)
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$WORK/stages.tsv"
}

stage() {  # stage NAME LIMIT_S CMD...: time-boxed (its whole process group), logged, recorded
    local name="$1" limit="$2" t rc=0 note=""
    shift 2
    if ((limit <= 0)); then
        say "skip $name: too little of the ${BUDGET_S} s budget left"
        record "$name" skipped 0 "too little time left"
        return 1
    fi
    # A function of this script runs in a new bash: `timeout` runs programs, not functions.
    if declare -F "$1" > /dev/null; then
        set -- bash "$SELF" _do "$@"
    fi
    say "$name (at most ${limit} s)"
    t=$SECONDS
    timeout -k 10 "$limit" "$@" || rc=$?
    if ((rc == 124 || rc == 137)); then
        note="stopped at its ${limit} s limit"
    fi
    record "$name" "$rc" "$((SECONDS - t))" "$note"
    say "$name: exit $rc after $((SECONDS - t)) s${note:+ ($note)}"
    return "$rc"
}

cuda_root() {  # the toolkit nvcc belongs to (its TOP: nvcc on PATH may be a wrapper script)
    local top
    top="$(nvcc --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' \
        | head -1 || true)"
    [[ -n "$top" ]] || top="$(dirname "$(readlink -f "$(command -v nvcc)")")/.."
    readlink -f "$top"
}

find_cublas() {  # "LIBDIR INCDIR" of cuBLAS: the toolkit's, else PyTorch's wheels'; or nothing
    local root d inc
    root="$(cuda_root)"
    for d in "$root/lib64" "$root/lib" "$root/targets/x86_64-linux/lib" /usr/local/cuda/lib64 \
        /usr/lib/x86_64-linux-gnu; do
        for inc in "$root/include" /usr/local/cuda/include /usr/include; do
            if [[ -e "$d/libcublas.so" && -e "$inc/cublas_v2.h" ]]; then
                echo "$d $inc"
                return
            fi
        done
    done
    # The nvidia-cublas wheel: nvidia/cu13/{lib,include} (CUDA 13), nvidia/cublas/... (12).
    "$PY" - << 'PYEOF' 2> /dev/null || true
import glob, os, site, sys
roots = [p for p in sys.path if p.endswith("-packages")] + site.getsitepackages()
for r in roots:
    for lib in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib", "libcublas.so*"))):
        inc = os.path.join(os.path.dirname(os.path.dirname(lib)), "include")
        if os.path.exists(os.path.join(inc, "cublas_v2.h")):
            print(os.path.dirname(lib), inc)
            sys.exit(0)
PYEOF
}

build_llamacpp() {  # configure and build in $WORK/build; install bin/ at $LLAMA_DIR
    local cub libdir incdir flags=() extra=() inc="" i seen="" gen=() from
    # A build cut off by its time box resumes on the next run on the same (warm) machine: the
    # same sources stay unpacked, so ninja redoes nothing it finished.
    from="$(sha256sum "$PACK/llama.cpp.tar.xz" | cut -d' ' -f1) $CUDA_ARCH ${GPU_CHECK_CMAKE_EXTRA:-}"
    if [[ -d "$WORK/build" && "$(cat "$WORK/src/.from" 2> /dev/null)" == "$from" ]]; then
        say "resuming the build in $WORK/build (it had reached $(build_progress))"
    else
        rm -rf "$WORK/src" "$WORK/build" "$WORK/build.log"
        mkdir -p "$WORK/src"
        tar -xJf "$PACK/llama.cpp.tar.xz" -C "$WORK/src"
        echo "$from" > "$WORK/src/.from"
    fi
    cub="$(find_cublas)"
    if [[ -z "$cub" ]]; then
        say "no cuBLAS (libcublas.so and cublas_v2.h) beside nvcc, in /usr/local/cuda or in" \
            "python's nvidia packages: llama.cpp's CUDA backend links it"
        return 3
    fi
    read -r libdir incdir <<< "$cub"
    say "cuBLAS: $libdir (headers: $incdir)"
    echo "$libdir" > "$WORK/cublas-libdir"
    if [[ ! -e "$libdir/libcublas.so" ]]; then  # the wheel ships libcublas.so.N alone
        local blas=("$libdir"/libcublas.so.*) blaslt=("$libdir"/libcublasLt.so.*)
        extra+=("-DCUDA_cublas_LIBRARY=${blas[0]}" "-DCUDA_cublasLt_LIBRARY=${blaslt[0]}")
        inc="-I$incdir"
    fi
    # Likewise the CUDA runtime, where the toolkit has no libcudart.so (a pip-made toolkit).
    local root rt rt_extra=()
    root="$(cuda_root)"
    if ! compgen -G "$root/lib*/libcudart.so" > /dev/null \
        && ! [[ -e /usr/local/cuda/lib64/libcudart.so ]]; then
        for rt in "$libdir"/libcudart.so.* "$root"/lib*/libcudart.so.*; do
            if [[ -e "$rt" ]]; then
                extra+=("-DCUDA_CUDART=$rt" "-DCUDA_cudart_LIBRARY=$rt")
                break
            fi
        done
    fi
    # The driver library ggml-cuda links for its virtual-memory pool: the toolkit's stub, else
    # the driver's own libcuda.so.1; with neither (a machine with no driver: a compile test),
    # the pool without VMM.
    if ! compgen -G "$root/lib*/stubs/libcuda.so" > /dev/null \
        && ! [[ -e /usr/local/cuda/lib64/stubs/libcuda.so ]]; then
        rt="$( (ldconfig -p 2> /dev/null | awk '/libcuda\.so(\.1)? /{ print $NF }'
            ls /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* \
                2> /dev/null) | head -1 || true)"
        if [[ -n "$rt" ]]; then
            extra+=("-DCUDA_cuda_driver_LIBRARY=$rt")
        else
            say "no libcuda (driver or stub): building without ggml's VMM pool"
            extra+=(-DGGML_CUDA_NO_VMM=ON)
        fi
    fi
    # Anything else (GPU_CHECK_CMAKE_EXTRA, space-separated), e.g. -DGGML_CUDA_FA_ALL_QUANTS=ON.
    read -r -a rt_extra <<< "${GPU_CHECK_CMAKE_EXTRA:-}"
    extra+=("${rt_extra[@]}")
    # The project's recipe (infopt.bootstrap.ensure_llamacpp): Release, static, no curl, native
    # CPU (AMX off where the CPU reports it), CUDA where nvcc is; here also the GPU's arch alone.
    mapfile -t flags < <("$PY" -c '
import platform
from infopt.bootstrap import _cpu_flags, llamacpp_cmake_flags, llamacpp_device_flags
print("\n".join(llamacpp_cmake_flags(platform.machine(), _cpu_flags())
                + llamacpp_device_flags("cuda", "nvcc")))')
    if [[ -n "$inc" ]]; then  # headers outside the toolkit: every language's include path
        for i in "${!flags[@]}"; do
            case "${flags[$i]}" in
                -DCMAKE_CXX_FLAGS=* | -DCMAKE_C_FLAGS=*)
                    flags[i]="${flags[$i]} $inc"
                    seen=1
                    ;;
            esac
        done
        [[ -n "$seen" ]] || flags+=("-DCMAKE_CXX_FLAGS=$inc")
        extra+=("-DCMAKE_CUDA_FLAGS=$inc")
    fi
    command -v ninja > /dev/null && gen=(-G Ninja)
    say "configure: ${flags[*]} ${extra[*]} -DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH"
    cmake -S "$WORK/src/llama.cpp" -B "$WORK/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON "${flags[@]}" "${extra[@]}" \
        "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH" -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >> "$WORK/build.log" 2>&1 || {
        tail -25 "$WORK/build.log"
        return 4
    }
    say "compiling with $(nproc) jobs (build.log is in logs.tar.gz)"
    echo "=== gpu_check compile, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) jobs" >> "$WORK/build.log"
    cmake --build "$WORK/build" -j "$(nproc)" --target llama-server llama-quantize llama-bench \
        >> "$WORK/build.log" 2>&1 || {
        grep -m5 -A8 ' error\|error:' "$WORK/build.log" | head -40
        return 5
    }
    mkdir -p "$LLAMA_DIR/bin"
    cp "$WORK/build/bin/"llama-{server,quantize,bench} "$LLAMA_DIR/bin/"
    # The marker `make engines` writes: infopt reads the build's release from it.
    "$PY" -c '
from infopt.bootstrap import LLAMA_CPP_PYTHON_VERSION as v, cpu_flags_key
print(f"llama-cpp-python=={v} cpu={cpu_flags_key()}")' > "$LLAMA_DIR/.complete"
    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    "$LLAMA_DIR/bin/llama-server" --version 2>&1 | tail -2
    "$LLAMA_DIR/bin/llama-server" --list-devices 2>&1 | tail -3
}

build_progress() {  # ninja's last "[N/M]" in the build log
    grep -o '^\[[0-9]*/[0-9]*\]' "$WORK/build.log" 2> /dev/null | tail -1 || true
}

write_workload() {
    cat > "$WORK/workload.yaml" << EOF
# bench/gpu_check.sh: decode at 1 and $STREAMS closed-loop streams, fixed prompt, forced length.
name: gpu-check
description: issue 32's decode check
peak_active_generations: $STREAMS
arrival: {kind: sweep, over: concurrency, values: [1, $STREAMS]}
input_lengths: {kind: fixed, tokens: $IN_TOKENS}
output_lengths: {kind: fixed, tokens: $OUT_TOKENS}
routes: [{route: chat_completions, stream: true}]
measured_requests: $REQUESTS
cooldown_s: 1
seed: 0
EOF
}

measure_served() {  # llama-server at llama.cpp's defaults (its auto fit: every layer on the GPU)
    local port=18932 pid i rc=0 url
    url="http://127.0.0.1:$port"
    "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" --alias gpu-check --metrics \
        -c $((STREAMS * CTX_PER_SLOT)) --parallel "$STREAMS" > "$WORK/server.log" 2>&1 &
    pid=$!
    for i in $(seq 240); do
        curl -sf "$url/health" > /dev/null 2>&1 && break
        if ! kill -0 "$pid" 2> /dev/null; then
            tail -20 "$WORK/server.log"
            return 1
        fi
        sleep 0.25
    done
    say "llama-server up after ~$((i / 4)) s"
    grep -E "offloaded [0-9]+/[0-9]+ layers|model buffer size|CUDA0" "$WORK/server.log" || true
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$WORK/gpu-apps.csv" 2>&1 \
        || true
    "$PY" -m infopt.cli bench --endpoint "$url" --model gpu-check --engine llamacpp \
        --workload "$WORK/workload.yaml" --out "$WORK/bench" --json > "$OUTDIR/bench.json" \
        2> "$WORK/bench.err" || rc=$?
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    grep -E "eval time" "$WORK/server.log" | tail -2 || true
    ((rc == 0)) || tail -15 "$WORK/bench.err"
    return "$rc"
}

run_optimize() {  # its console to optimize.log (in logs.tar.gz); the run folder to runs/
    "$PY" -m infopt.cli optimize --model "$MODEL" --engine llamacpp --runs-dir "$WORK/runs" \
        --concurrency "$STREAMS" --input-tokens "$IN_TOKENS" --output-tokens "$OUT_TOKENS" \
        --requests "${GPU_CHECK_OPTIMIZE_REQUESTS:-8}" --repeats 1 --scenarios none \
        --dimensions scheduling > "$WORK/optimize.log" 2>&1
}

has_gpus() {
    "$PY" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("gpus") else 1)' \
        "$1" 2> /dev/null
}

finish() {  # always: the summary and the logs; what is under $OUTDIR comes back
    local rc=$?
    set +e
    "$PY" -m bench.gpu_check summary --work "$WORK" --out "$OUTDIR" --budget "$BUDGET_S" \
        --elapsed "$((SECONDS - T0))" ${DRY:+--dry-run}
    tar -C "$WORK" -czf "$OUTDIR/logs.tar.gz" --ignore-failed-read build.log server.log \
        bench.err bench llama-bench.json llama-bench.err copybw.json standin.json \
        comparison.json stages.tsv env.txt gpu-apps.csv optimize.log workload.yaml \
        hardware-nvml.json 2> /dev/null
    # The optimize run folder, without its per-request records (size).
    if [[ -d "$WORK/runs" ]]; then
        tar -C "$WORK" -czf "$OUTDIR/optimize.tar.gz" --exclude='*.parquet' runs 2> /dev/null
    fi
    say "results in $OUTDIR: $(find "$OUTDIR" -maxdepth 1 -type f -printf '%f ')"
    say "done in $((SECONDS - T0)) s (budget $BUDGET_S s), exit $rc"
}

check_prerequisites() {
    [[ -d "$PACK/model" && -f "$PACK/llama.cpp.tar.xz" ]] || die2 "no .gpucheck/ in $REPO:" \
        "run \`bash bench/gpu_check.sh prepare\` on a machine with network and \`make engines\`," \
        "then call the device tool with carry [\".gpucheck\"] (git ignores it, so it travels" \
        "only when carried)."
    command -v "$PY" > /dev/null || die2 "no $PY on PATH (set GPU_CHECK_PYTHON)."
    [[ -n "$DRY" ]] && return
    { command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU 0:'; } \
        || die2 "no NVIDIA GPU here (nvidia-smi lists none), so there is nothing to measure:" \
            "this check builds llama.cpp with CUDA and measures its decode on the GPU. Run it" \
            "on a machine with an NVIDIA GPU, its driver, CUDA's nvcc and cuBLAS, CMake and" \
            "PyTorch (the device tool), or rehearse the steps here with" \
            "\`bash bench/gpu_check.sh run --dry-run\`."
    { command -v nvcc > /dev/null && nvcc --version > /dev/null 2>&1; } \
        || die2 "no working nvcc on PATH, so llama.cpp's CUDA backend cannot be built: install" \
            "the CUDA toolkit (nvcc and cuBLAS) or put its bin/ on PATH, then run again."
    command -v cmake > /dev/null || die2 "no cmake on PATH: llama.cpp cannot be built."
}

write_env() {  # what the machine is; no line of it may stop the run
    set +e +o pipefail
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    uname -a
    echo "python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    nvidia-smi 2>&1 | head -20
    # Issue 46: the engines size against CUDA's total (cudaMemGetInfo), not NVML's; the two side
    # by side per device, to replace infopt.hardware.cuda_visible's observed or estimated figure.
    nvidia-smi --query-gpu=index,pci.bus_id,memory.total --format=csv,noheader,nounits 2>&1 \
        | sed 's/^/nvml_total_mib: /'
    "$PY" -c 'from infopt.hardware.cuda_visible import probe_cuda_totals
for bus, total in sorted(probe_cuda_totals().items()):
    print(f"cuda_total_bytes: {bus} {total} ({total / 2**30:.2f} GiB)")' 2>&1
    nvcc --version 2>&1 | tail -2
    cmake --version 2>&1 | head -1
    echo "cores: $(nproc)"
    free -g 2>&1 | head -2
    echo "checkout: $(git rev-parse HEAD 2>&1)"
    cat "$PACK/MANIFEST.txt" 2>&1
    return 0
}

cmd_run() {
    local home_cache cap t gpu_opt="" ngl="" build_pid=""
    export DRY=""
    [[ "${1:-}" == "--dry-run" ]] && DRY=1
    cd "$REPO"
    export SELF="$HERE/gpu_check.sh" PACK CUDA_ARCH
    export OUTDIR="${OUT:-${GPU_CHECK_OUT:-/tmp/gpu-check-out}}"
    export WORK="${GPU_CHECK_WORK:-/tmp/gpucheck}"
    export PY="${GPU_CHECK_PYTHON:-python3}"
    export STREAMS="${GPU_CHECK_STREAMS:-8}" IN_TOKENS="${GPU_CHECK_INPUT_TOKENS:-128}"
    export OUT_TOKENS="${GPU_CHECK_OUTPUT_TOKENS:-256}" REQUESTS="${GPU_CHECK_REQUESTS:-16}"
    export CTX_PER_SLOT=$(((IN_TOKENS + OUT_TOKENS + 64 + 255) / 256 * 256))
    check_prerequisites
    home_cache="${INFOPT_CACHE_DIR:-$HOME/.cache/infopt}"
    mkdir -p "$OUTDIR" "$WORK"
    # Everything of an earlier run but the unpacked sources and the build (it resumes).
    rm -rf "${WORK:?}"/{bench,runs,prefect,site,cache,standin.gguf,server.log,optimize.log} \
        "$WORK"/*.{json,err,tsv,csv,yaml} "$WORK"/cublas-libdir
    exec > >(tee -a "$OUTDIR/gpu_check.log") 2>&1
    trap finish EXIT
    export PYTHONUNBUFFERED=1 PYTHONPATH="$WORK/site:$REPO" INFOPT_CACHE_DIR="$WORK/cache" \
        INFOPT_RUNS_DIR="$WORK/runs" PREFECT_HOME="$WORK/prefect" HF_HUB_OFFLINE=1 \
        PREFECT_SERVER_ANALYTICS_ENABLED=false TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=1
    say "start: $(hostname), budget ${BUDGET_S} s${DRY:+, DRY RUN (no GPU: a CPU llama-server)}"
    (write_env > "$WORK/env.txt" 2>&1)
    # The build first, in the background: it takes every core for minutes, and needs nothing
    # but the sources and infopt.bootstrap (standard library). The Python steps run beside it.
    if [[ -n "$DRY" ]]; then
        LLAMA_DIR="$(dirname "$(dirname "${GPU_CHECK_LLAMA_SERVER:-$(INFOPT_CACHE_DIR="$home_cache" \
            INFOPT_ENGINE_DEVICE=cpu "$PY" -c 'from infopt.bootstrap import default_paths
print(default_paths().llama_server)')}")")"
        record build skipped 0 "dry run: the CPU build in $LLAMA_DIR"
    else
        export LLAMA_DIR
        LLAMA_DIR="$(INFOPT_ENGINE_DEVICE=cuda "$PY" -c 'from infopt.bootstrap import default_paths
print(default_paths().llamacpp_dir)')"
        cap=$(($(left) - 95))  # 95 s: the measured inventory, llama-bench, the served measurement
        ((cap > 450)) && cap=450
        (stage build "$cap" build_llamacpp || true) &
        build_pid=$!
    fi
    if "$PY" -c 'import prefect, pydantic, gguf, openai, httpx_sse' 2> /dev/null; then
        say "wheels: not needed ($PY imports infopt's dependencies already)"
    else
        stage wheels 120 "$PY" -m pip install -q --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target "$WORK/site" "$PACK"/wheels/*.whl || true
    fi
    stage import 90 "$PY" -c 'import infopt.cli, infopt.hardware.host, infopt.costmodel.plan
import infopt.loadgen.bench_command, flows.optimize' || true
    export MODEL="$WORK/standin.gguf"
    stage standin 60 bash -c "'$PY' -m bench.gpu_check standin --recipe '$PACK/model' \
        --out '$MODEL' > '$WORK/standin.json'" || true
    # NVML's inventory now (the host's bandwidth is measured after the build, on a quiet CPU).
    stage hardware-nvml 60 bash -c "'$PY' -m infopt.cli hardware --json --no-measure \
        > '$WORK/hardware-nvml.json'" || true
    if [[ -n "$DRY" ]] || ! has_gpus "$WORK/hardware-nvml.json"; then
        gpu_opt="--gpu '${GPU_CHECK_PLAN_GPU:-H200}'"  # the catalog's figures, for a rehearsal
    fi
    stage plan 90 bash -c "'$PY' -m infopt.cli plan --model '$MODEL' --engine llamacpp \
        --inventory '$WORK/hardware-nvml.json' $gpu_opt --input-tokens $IN_TOKENS \
        --output-tokens $OUT_TOKENS --context $((IN_TOKENS + OUT_TOKENS)) \
        --concurrency $STREAMS --json > '$OUTDIR/plan.json'" || true
    if [[ ! -s "$OUTDIR/plan.json" && -z "$gpu_opt" ]]; then  # NVML's GPU not in the catalog?
        stage plan-catalog 90 bash -c "'$PY' -m infopt.cli plan --model '$MODEL' \
            --engine llamacpp --inventory '$WORK/hardware-nvml.json' \
            --gpu '${GPU_CHECK_PLAN_GPU:-H200}' --input-tokens $IN_TOKENS \
            --output-tokens $OUT_TOKENS --context $((IN_TOKENS + OUT_TOKENS)) \
            --concurrency $STREAMS --json > '$OUTDIR/plan.json'" || true
    fi
    if [[ -z "$DRY" ]]; then  # the GPU is idle during the build
        stage copybw 90 "$PY" -m bench.gpu_check copybw --out "$WORK/copybw.json" || true
    fi
    if [[ -n "${build_pid:-}" ]]; then
        say "waiting for the build"
        wait "$build_pid" || true
        if [[ -s "$WORK/cublas-libdir" ]]; then
            LD_LIBRARY_PATH="$(cat "$WORK/cublas-libdir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            export LD_LIBRARY_PATH
        fi
    fi
    stage hardware 60 bash -c "'$PY' -m infopt.cli hardware --json > '$OUTDIR/hardware.json'" \
        || true
    export LLAMA_DIR LLAMA_SERVER="$LLAMA_DIR/bin/llama-server"
    export INFOPT_LLAMA_SERVER="$LLAMA_SERVER"
    if [[ ! -x "$LLAMA_SERVER" || ! -s "$MODEL" ]]; then
        say "no llama-server ($LLAMA_SERVER) or no model ($MODEL): nothing to measure"
        if [[ -s "$WORK/build.log" ]]; then
            say "the build had reached $(build_progress): run again at once (the machine stays" \
                "warm ~30 s after a call) and it resumes there"
        fi
        exit 1
    fi
    [[ -z "$DRY" ]] && ngl="-ngl 99"
    stage llama-bench "$(within 60 20)" bash -c "'$LLAMA_DIR/bin/llama-bench' -m '$MODEL' $ngl \
        -p $IN_TOKENS -n $OUT_TOKENS -r 3 -o json > '$WORK/llama-bench.json' \
        2> '$WORK/llama-bench.err'" || true
    write_workload
    stage served "$(within 180 60)" measure_served || true
    "$PY" -m bench.gpu_check compare --plan "$OUTDIR/plan.json" --bench "$OUTDIR/bench.json" \
        --copybw "$WORK/copybw.json" --llama-bench "$WORK/llama-bench.json" \
        --out "$WORK/comparison.json" > /dev/null || true
    # A short optimize with the time left: Prefect's temporary server, the tuning ladder's
    # scheduling dimension alone, one repeat: the flow on a GPU end to end, not a tuned result.
    if ((${GPU_CHECK_OPTIMIZE:-1})); then
        t=$(($(left) - 15))
        ((t >= ${GPU_CHECK_OPTIMIZE_MIN_S:-90})) || t=0
        stage optimize "$t" run_optimize || true
        tail -6 "$WORK/optimize.log" 2> /dev/null || true
    fi
    say "measured decode against the plan (summary.json holds everything):"
    "$PY" -m bench.gpu_check compare --plan "$OUTDIR/plan.json" --bench "$OUTDIR/bench.json" \
        --copybw "$WORK/copybw.json" --llama-bench "$WORK/llama-bench.json" \
        --out "$WORK/comparison.json" || true
}

# ------------------------------------------------------------------------------------------------
# fixture (here)

cmd_fixture() {
    local src="${1:-}" py name dest
    [[ -n "$src" && -f "$src/summary.json" ]] || die2 "fixture DIR: DIR must hold the files a" \
        "run returned (summary.json, hardware.json, ...), e.g. the device tool's files_at."
    py="$(venv_py)"
    name="$("$py" -c '
import json, re, sys
s = json.load(open(sys.argv[1]))
gpu = re.sub(r"[^A-Za-z0-9._-]+", "-", s.get("gpu") or "no-gpu")
print(s.get("date", "undated")[:10] + "-" + gpu + ("-dry-run" if s.get("dry_run") else ""))' \
        "$src/summary.json")"
    dest="$REPO/tests/fixtures/gpu_check/$name"
    mkdir -p "$dest"
    cp "$src"/* "$dest/"
    say "fixture: $dest ($(du -sh "$dest" | cut -f1)); note it in tests/fixtures/gpu_check/README.md"
}

case "${1:-}" in
    _do) # a stage's function, re-entered under `timeout` (see stage)
        shift
        "$@"
        ;;
    prepare) cmd_prepare ;;
    run)
        shift
        cmd_run "$@"
        ;;
    fixture)
        shift
        cmd_fixture "$@"
        ;;
    *)
        sed -n '2,16p' "$0"
        exit 2
        ;;
esac
