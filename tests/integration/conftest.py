"""Fixtures that need the real engines and model from `make engines` (per-machine cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.bootstrap import default_paths


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        pytest.fail(f"{what} missing at {path}: run `make engines` first (make test does)")
    return path


@pytest.fixture(scope="session")
def engine_paths():
    return default_paths()


@pytest.fixture(scope="session")
def gguf_model(engine_paths) -> Path:
    return _need(engine_paths.gguf, "SmolLM2 GGUF")


@pytest.fixture(scope="session")
def llama_server(engine_paths) -> Path:
    return _need(engine_paths.llama_server, "llama-server")


@pytest.fixture(scope="session")
def hf_model(engine_paths) -> Path:
    return _need(engine_paths.hf_model, "converted SmolLM2 (HF safetensors)")


@pytest.fixture(scope="session")
def vllm_python(engine_paths) -> Path:
    return _need(engine_paths.vllm_python, "vLLM CPU environment")


@pytest.fixture(scope="session")
def vllm_server(vllm_python, hf_model, tmp_path_factory):
    """One real vLLM CPU server shared by every test that can use it (~40 s start-up)."""
    from infopt.engines import process
    from infopt.engines.vllm import adapter as vllm
    from infopt.specs.serving import VllmConfig

    # --enforce-eager: ~37 s start on 2 cores instead of ~140 s compiled (notes/engines.md);
    # one process (uni executor, engine core in the API server): 34 s instead of 49 s.
    cfg = VllmConfig(model_path=str(hf_model), served_model_name="smollm2", max_model_len=4096,
                     enforce_eager=True, cpu_kvcache_space_gib=1,
                     distributed_executor_backend="uni", engine_core_multiprocessing=False)
    log = tmp_path_factory.mktemp("vllm") / "engine.log"
    running = process.start(vllm.ADAPTER, cfg, str(vllm_python), log, weights_bytes=270_000_000)
    yield running
    process.stop(running.pid)


@pytest.fixture(scope="session")
def vllm_failed_starts(vllm_python, hf_model, tmp_path_factory) -> dict[str, str]:
    """The real vLLM starts that must fail (tests/integration/test_engine_failures.py,
    test_kv_validation.py), launched together: each spends ~45 s in single-threaded imports
    and model set-up before vLLM refuses, so on 2 cores three at once cost little more than
    one. Returns {case: the failed start's engine log}; a case that started is an error."""
    from concurrent.futures import ThreadPoolExecutor

    from infopt.engines import process
    from infopt.engines.support import unsupported_config
    from infopt.engines.vllm import adapter as vllm
    from infopt.hardware.host import probe_host
    from infopt.specs.base import EngineStartError
    from infopt.specs.serving import VllmConfig

    base = VllmConfig(model_path=str(hf_model), served_model_name="smollm2", max_model_len=2048,
                      enforce_eager=True, cpu_kvcache_space_gib=1)
    cases = {  # name: the config (its env: what the engine gets on top of infopt's)
        # 100,000 tokens of KV need 2.15 GiB at 23,040 B/token; 1 GiB is given.
        "context_beyond_kv": base.model_copy(update={
            "max_model_len": 100_000, "env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}}),
        "above_native": base.model_copy(update={"max_model_len": 100_000}),
    }
    fp8 = base.model_copy(update={"kv_cache_dtype": "fp8", "cpu_kvcache_space_gib": 2})
    if unsupported_config(fp8, probe_host().isa_features):  # else it starts: tested there
        cases["fp8_kv"] = fp8
    root = tmp_path_factory.mktemp("vllm-failures")

    def attempt(name: str) -> Path:
        cfg = cases[name]
        try:
            running = process.start(vllm.ADAPTER, cfg, str(vllm_python), root / f"{name}.log",
                                    3 * 10**8)
        except EngineStartError as e:
            return e.log_path
        process.stop(running.pid)
        raise AssertionError(f"vLLM started with {name}: {cfg}")

    with ThreadPoolExecutor(len(cases)) as pool:
        logs = dict(zip(cases, pool.map(attempt, cases), strict=False))
    return logs


@pytest.fixture(scope="session")
def sglang_args_python(engine_paths) -> Path:
    """SGLang 0.5.23's argument code without GPU kernels (infopt.bootstrap ensure_sglang_args)."""
    path = engine_paths.sglang_args_python
    if not path.exists():
        pytest.fail(f"the SGLang argument environment is missing at {path}: run "
                    "`make engine-args` first (make test does)")
    return path


@pytest.fixture(scope="session")
def vllm_args_033(engine_paths) -> Path:
    """vLLM 0.33's Python sources, a PYTHONPATH entry (infopt.bootstrap ensure_vllm_args)."""
    path = engine_paths.vllm_args_dir
    if not (path / "vllm" / "__init__.py").exists():
        pytest.fail(f"vLLM 0.33's sources are missing at {path}: run `make engine-args` "
                    "first (make test does)")
    return path
