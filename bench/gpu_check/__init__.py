"""Issue 32's one-shot check on a machine with an NVIDIA GPU, CUDA (nvcc, cuBLAS), CMake and
PyTorch but no network. It builds llama.cpp with CUDA, runs `infopt hardware` against the real
NVML, measures llama.cpp's decode on the GPU and compares it with `infopt plan`'s ceilings and
attainable estimates, then runs a short `infopt optimize` with the time left. Its output is
kept as a fixture (tests/fixtures/gpu_check/).

  bash bench/gpu_check.sh prepare        here (network, `make engines` done): assemble
                                         .gpucheck/, check that what travels fits 64 MiB,
                                         print the carry list
  bash bench/gpu_check.sh run            there (the GPU machine), from the repository root,
                                         with .gpucheck carried; results under $OUT (else
                                         $GPU_CHECK_OUT, default /tmp/gpu-check-out)
  bash bench/gpu_check.sh run --dry-run  here: the same steps without a GPU (the CPU
                                         llama-server of `make engines`, `plan --gpu H200`),
                                         to rehearse them
  bash bench/gpu_check.sh fixture DIR    here: copy a run's returned files into
                                         tests/fixtures/gpu_check/<date>-<gpu>/

bench/gpu_check.sh only finds a python (GPU_CHECK_PYTHON, else python3) and runs this package
(`python -m bench.gpu_check`): the GPU machine has a python3 without the project's venv, so
everything here is standard library until `run` has installed the carried wheels into
$WORK/site; infopt and its dependencies are only ever run as commands.

  common.py    settings (the GPU_CHECK_* knobs), console lines, refusals
  commands.py  every command line, built by pure functions
  stages.py    the time budget and the time-boxed, recorded steps
  prepare.py   `prepare` (.gpucheck/ and its 64 MiB check) and `fixture`
  run.py       `run`: the steps in order, the served measurement, the summary
  build.py     the CUDA build of llama.cpp (run's background step)
  model.py     the model's recipe (here) and stand-in (there)
  results.py   copy bandwidth, the comparison with the plan, summary.json

The model. The bundled SmolLM2-135M-Instruct Q4_1 GGUF (93.8 MiB) cannot travel: the device
machine takes at most 64 MiB (working tree and carried files together), reaches no network, and
the file does not compress (zstd: 88 MiB). `prepare` carries its header instead (metadata,
tokenizer and tensor table: 0.5 MiB gzipped) and `run` rebuilds from it there a stand-in GGUF of
the identical layout and size with synthetic weights (model.py): the same architecture, tensor
shapes and quantization types (Q4_1 blocks, Q8_0 token embedding), so the same bytes per token,
kernels and decode speed, and the same `infopt plan` (checked here: the plan JSON is identical).
Its text is meaningless, so the optimize step's quality verdicts are too. A real model needs a
machine that can fetch it.

What travels (`prepare` prints the sizes): the working tree (~4 MiB) and .gpucheck/: the
llama.cpp that `make engines` builds (vendored in the llama-cpp-python sdist, pruned of its
models, docs, tests and other GPU backends, xz: ~4 MiB), the model recipe, and the wheels of
the Python packages infopt imports that the GPU machine's image lacks (Prefect, pydantic, gguf,
...: ~44 MiB, CPython 3.12 x86-64).

The run's time (GPU_CHECK_BUDGET_S, default 480 s; the device tool's call allows 600): the
CUDA build starts at once in the background, time-boxed to the budget less 95 s (at most
450 s), with the Python steps beside it (wheels, NVML's inventory, the plan, the stand-in, the
GPU's copy bandwidth); then the measured inventory, llama-bench and the served measurement;
the optimize step gets what remains, or is skipped under 90 s. A build cut off by its time box
resumes where it stopped when `run` is called again on the same machine while it is still
warm (the device tool keeps one ~30 s after a call). The build, timed here on 2 shared cores
without a GPU (152 of its 359 steps), needs an estimated 6,000-7,500 CPU-seconds (an upper
bound: the compile times were taken under load), so 6-8 minutes on 16 cores of that speed:
the first call's build may be cut off and a second call, at once, finish it
(GPU_CHECK_BUDGET_S=240), or the first call may be given 540 s (the call allows 600).

Other knobs: GPU_CHECK_PYTHON (run's python, default python3), GPU_CHECK_WORK (default
/tmp/gpucheck), GPU_CHECK_CUDA_ARCH (default 90-real: H100/H200), GPU_CHECK_CMAKE_EXTRA,
GPU_CHECK_DEVICE_PY (the wheels' CPython, default 3.12), GPU_CHECK_STREAMS (8),
GPU_CHECK_INPUT_TOKENS (128), GPU_CHECK_OUTPUT_TOKENS (256), GPU_CHECK_REQUESTS (16),
GPU_CHECK_PLAN_GPU (H200), GPU_CHECK_OPTIMIZE (0 skips it), GPU_CHECK_OPTIMIZE_MIN_S (90),
GPU_CHECK_OPTIMIZE_REQUESTS (8), GPU_CHECK_LLAMA_SERVER (the dry run's CPU llama-server).
"""
