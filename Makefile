# infopt: `make demo` and `make test` bootstrap everything on a fresh machine, then run.
# Engines and the model are cached per machine in $(INFOPT_CACHE_DIR) (default ~/.cache/infopt),
# keyed by version, so a fresh clone reuses them and a fresh machine builds them once.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP_ENV := PIP_NO_INPUT=1
# This kind of machine's pip config lists local index folders that do not exist: drop the
# hundreds of warnings that causes, keep every other line (and pip's exit status: pipefail).
QUIET_PIP := grep -v 'is neither a file nor a directory' || true
STAMP := $(VENV)/.installed
# Prefect's temporary servers (benches, demo) send no telemetry: the network is closed here.
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false

.PHONY: demo test engines venv clean-venv

venv: $(STAMP)

# pip compiles every dependency's bytecode at install (~2 of its ~3.5 min here). Keep it: this
# kind of machine sets PYTHONDONTWRITEBYTECODE=1, so with --no-compile every Python process
# would compile what it imports again (tried 2026-12-04: the install took 101 s instead of 215,
# and the suite's CLI-heavy tests lost more than that).
$(STAMP): pyproject.toml
	@echo "[make] creating $(VENV) and installing infopt with its dependencies (~2 min the first time)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PIP_ENV) $(PY) -m pip install -q -e '.[test]' 2>&1 | { $(QUIET_PIP); }
	@touch $(STAMP)

engines: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap

# The demo is examples/targets/demo.yaml: the bundled model, a chat workload, every standard
# scenario but full-context (12 min alone on 2 cores); `infopt optimize` with no options runs it.
demo: engines
	@$(VENV)/bin/infopt optimize --target examples/targets/demo.yaml

# lm-evaluation-harness (the optional extra of `infopt quality --lm-eval`), in its own venv;
# headless Chromium + chromedriver from Debian for the Prefect UI approval test.
.PHONY: lm-eval browser
lm-eval: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap lm-eval

browser: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap browser

# llama.cpp's Vulkan build, the route for AMD and older GPUs: Debian's Vulkan toolchain and
# Mesa's lavapipe (a Vulkan device on the CPU) installed with apt when missing, then llama-server
# with -DGGML_VULKAN=ON (~6 min once on 2 cores); tests/integration/test_llamacpp_vulkan.py
# offloads layers to lavapipe and reads the offload from the engine's own log.
.PHONY: engines-vulkan
engines-vulkan: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap llamacpp-vulkan

# The engines' own argument parsers, the judges of every command infopt builds for a GPU:
# SGLang 0.5.23's parser and resolution hooks without GPU kernels (~10 s and ~300 MB on top of
# the vLLM environment, whose torch it borrows; tests/integration/test_sglang_argv.py) and
# vLLM 0.33's Python sources beside the CPU build's 0.32 (~30 s, ~180 MB;
# tests/integration/test_vllm_gpu_argv.py).
.PHONY: engine-args
engine-args: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap sglang-args vllm-args

# The calibrated quantizers: llm-compressor for HF checkpoints (W8A8, W4A16, FP8-dynamic), in a
# venv that borrows the vLLM environment's CPU torch (~50 s, ~400 MB), and llama.cpp's
# llama-imatrix for GGUF variants with an importance matrix (built alone from the same sdist,
# ~4 min on 2 cores); the e2e quantize flows need them.
.PHONY: engines-quantize
engines-quantize: $(STAMP)
	@$(PIP_ENV) $(PY) -m infopt.bootstrap llm-compressor llamacpp-imatrix

# Lint first (under a minute): ruff (imports, pyflakes, pycodestyle, bugbear, complexity) and
# mypy over every shipped package (infopt, flows, tasks, blocks); the core (specs, tuning,
# engines, cluster) also refuses unannotated functions (pyproject.toml). bench/ is not typed.
.PHONY: lint
lint: $(STAMP)
	@$(PY) -m ruff check infopt flows tasks blocks bench tests
	@$(PY) -m mypy -p infopt -p flows -p tasks -p blocks

# One process by default: two pytest-xdist workers on 2 cores put two engines' spinning
# thread pools on the same cores (tried 2026-12-04: one llama-server of the comparator test
# was still busy after 688 s, and 2 tests had finished in 12 minutes). TEST_WORKERS=N splits the suite over N workers on a machine with the cores for
# it; tests that share a costly session fixture stay on one worker (tests/conftest.py).
TEST_WORKERS ?= 0
PYTEST := $(PY) -m pytest -q -ra --durations=25 -n $(TEST_WORKERS) --dist loadgroup
test: lint engines lm-eval browser engine-args engines-vulkan
	@$(PYTEST) -m "not e2e"

# The long end-to-end runs (marked e2e, a minute or more each): the routed engine and its
# vLLM comparator climbing their ladders, the reoptimize verdicts on paced builds, durability
# (SIGKILL, engine kills, a full disk, the Prefect API restarting, a hung engine), vLLM's failed
# starts, flows run by real process workers, lm-evaluation-harness joining the verdict, the
# contract-remedy flow, llama.cpp's KV-tier flow, the speculative-decoding flows, TensorRT-LLM's
# simulated climb and the simulated 8-GPU layout climb (replayed from its record in `make test`,
# whose verdicts then read no clock), the weights-gate flow and the planted-SLO run; here to keep `make test` within 30 minutes on the slower
# CPU. CI (.ci/run) runs them after `make test`.
.PHONY: test-e2e
test-e2e: engines lm-eval engines-quantize
	@$(PYTEST) -m e2e

# Benchmarks of infopt itself (speed goals are checked here, not by timed unit tests).
# Results go to $INFOPT_BENCH_OUT (default /tmp/infopt-bench), never into the checkout.
.PHONY: bench
bench: $(STAMP)
	@$(PY) -m bench.analysis_bench
	@$(PY) -m bench.loadgen_bench
	@$(PY) -m bench.load_bench

# 1,000 concurrent streams against a local fast server: streams held, records lost, the
# client's peak RSS, the client-bound flag, throughput (~1 min).
.PHONY: bench-load
bench-load: $(STAMP)
	@$(PY) -m bench.load_bench

# infopt vs `vllm bench serve` on the same real vLLM CPU server (~7 min; needs `make engines`).
.PHONY: bench-vllm
bench-vllm: engines
	@$(PY) -m bench.compare_vllm_bench

# The throughput verdicts and speed checks on the real llama-server that `make test` leaves out
# (they depend on the CPU): the by-hand reproduction band, the engine CPU floor, reoptimize's
# same-build and 1-thread verdicts (~15 min; needs `make engines`; exit 1 if one does not hold).
# ARGS="--power [--trials N] [--record FILE]": the regression rule's power and false alarms on
# paced builds planted 0/10/25/50% slower (~25 min with 3 trials on 2 cores).
.PHONY: bench-verdicts
bench-verdicts: engines
	@$(PY) -m bench.verdicts_bench $(ARGS)

# The cluster flow at full scale (bench/cluster_bench.py): 1, 2 and 3 replicas of an accepted
# run's winner behind vllm-router and sglang-router, every policy, the SLO boundary per count
# and the capacity plan's validation error (~30-40 min; needs `make engines`); ARGS="--record
# NAME --calibrate-from FIXTURE [--threads-per-replica N]" for the out-of-sample runs.
.PHONY: bench-cluster
bench-cluster: engines
	@$(PY) -m bench.cluster_bench $(ARGS)

# The tuning ladder against Optuna TPE, random search and the exhaustive grid over a small real
# llama.cpp space, 3 seeds, then the finalists (the grid's top five and each method's pick)
# re-measured in fresh rotating rounds: ratios with intervals (~75-80 min); SMOKE=1: a
# 4-configuration space, one seed (a few minutes); ARGS="--rounds 5 --record FILE" passes on.
.PHONY: bench-tuner
bench-tuner: engines
	@$(PIP_ENV) $(PY) -m pip install -q -e '.[test,bench]' 2>&1 | { $(QUIET_PIP); }
	@$(PY) -m bench.tuner_bench $(if $(SMOKE),--smoke) $(ARGS)

# Issue 32's one-shot check on an NVIDIA GPU (bench/gpu_check.sh; not run on a real GPU yet):
# assembles .gpucheck/ (llama.cpp sources, the model's recipe, wheels for a machine without
# network; must fit the device tool's 64 MiB) and, where nvidia-smi lists a GPU, runs it: CUDA
# build, `infopt hardware`, decode against `infopt plan`, a short optimize (~8 min). Without a
# GPU it prints the device tool's call (command, carry) instead.
.PHONY: bench-gpu
bench-gpu: engines
	@bash bench/gpu_check.sh prepare
	@if nvidia-smi -L 2>/dev/null | grep -q '^GPU 0:'; then \
	  GPU_CHECK_PYTHON=$${GPU_CHECK_PYTHON:-$(PY)} bash bench/gpu_check.sh run; \
	else echo "[make] no NVIDIA GPU here: .gpucheck/ is ready for a GPU machine"; fi

# Refit the attainable estimate on infopt/costmodel/data/published_results.csv (~10 s) and
# print its held-out errors; writes infopt/costmodel/data/attainable_fit.json. RUNS="runs/<id>
# ..." adds the measured levels of those GPU runs (a CPU run is left out, with its reason).
.PHONY: fit-attainable
fit-attainable: $(STAMP)
	@$(PY) -m infopt.runs.attainable_trials $(if $(RUNS),--runs $(RUNS))

# Refit the single-stream TTFT estimate on the same published results (the rows that state a
# single-stream TTFT) and print its held-out errors; writes infopt/costmodel/data/ttft_fit.json.
.PHONY: fit-ttft
fit-ttft: $(STAMP)
	@$(PY) -m infopt.costmodel.ttft_fit tests/fixtures/model_configs

clean-venv:
	rm -rf $(VENV)
