"""The layering the design promises, checked on the import graph: the load generator, the
contract probes and the cost model work from data (an Endpoint, FitRequest.kv) and import no
engine adapter, so they work against any server and any engine added later."""

from __future__ import annotations

import json
import subprocess
import sys

MODULES = ("infopt.loadgen.runner", "infopt.loadgen.summary", "infopt.loadgen.bench_command",
           "infopt.loadgen.measure", "infopt.analysis.slo", "infopt.costmodel.allocation",
           "infopt.loadgen.tokens", "infopt.contract.openai_chat", "infopt.contract.keys",
           "infopt.costmodel.fit",
           "infopt.costmodel.plan", "infopt.costmodel.roofline", "infopt.costmodel.attainable",
           "infopt.costmodel.attainable_fit")


def test_no_engine_is_imported_by_loadgen_contract_or_costmodel():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES)
            + "bad = sorted(m for m in sys.modules if m.startswith('infopt.engines'))\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_engine_brings_its_kv_allocation_rule_as_data():
    from infopt.engines import adapter_for
    from infopt.specs.serving import EngineName

    for engine in EngineName:
        a = adapter_for(engine)
        assert callable(a.kv_allocator), engine
    # Only vLLM has a CPU backend with its own rule (a fixed VLLM_CPU_KVCACHE_SPACE).
    assert [e.value for e in EngineName if adapter_for(e).kv_allocator_cpu] == ["vllm"]


def test_a_fit_without_the_engines_rule_says_where_to_get_it():
    import pytest

    from infopt.costmodel.fit import FitRequest, KvOptions, plan_fit
    from infopt.costmodel.weights import BF16
    from infopt.model.classify import classify_config
    from infopt.specs.base import InputError
    from infopt.specs.fit import DeviceBudget
    from tests.fixture_data import MODEL_CONFIGS

    m = classify_config(json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text()),
                        model="q")
    dev = DeviceBudget(name="d", memory_bytes=2**36, bandwidth_bytes_per_s=1e12,
                       dense_flops_per_s={}, source="t")
    with pytest.raises(InputError, match="pass FitRequest.kv from infopt.engines.support"):
        plan_fit(FitRequest(model=m, device=dev, gpu_count=1, engine="x", context_tokens=128,
                            concurrency=1, kv_dtype="auto", weight_path=BF16, kv=KvOptions()))


def _imported_by(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_specs_import_nothing_above_them():
    """specs/ is the floor: data models and their keys (specs/keys.py), no run folder, engine,
    tuning or cost model (the content keys used to live in runs/ and pulled it in)."""
    import pkgutil

    import infopt.specs

    specs = [f"infopt.specs.{m.name}" for m in pkgutil.iter_modules(infopt.specs.__path__)]
    assert _imported_by(specs, ("infopt.runs", "infopt.engines", "infopt.tuning",
                                "infopt.costmodel", "infopt.model", "infopt.loadgen")) == []


def test_the_drafter_search_imports_no_engine():
    """A drafter is data (specs/drafters.py); the search that finds them knows no engine."""
    assert _imported_by(["infopt.model.drafters"], ("infopt.engines",)) == []
