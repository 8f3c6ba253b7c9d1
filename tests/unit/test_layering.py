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


def test_the_cost_model_and_the_model_room_import_no_engine_search_or_run():
    """costmodel/ and model/ sit below the engines: routing and KV options come in as data
    (engines/plan_request.py, build_shortlist's engine_order), a run's cases as a list
    (runs/attainable_trials.py), so neither room imports an engine, the search or a run."""
    import pkgutil

    import infopt.costmodel
    import infopt.model

    mods = [f"{pkg.__name__}.{m.name}" for pkg in (infopt.costmodel, infopt.model)
            for m in pkgutil.iter_modules(pkg.__path__)]
    assert _imported_by(mods, ("infopt.engines", "infopt.tuning", "infopt.runs")) == []


def _import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports, at the top or inside a function (a lazy
    import is still a dependency), read from the source."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = {}
    for pkg in ("infopt", "flows", "tasks", "blocks"):
        for f in (root / pkg).rglob("*.py"):
            parts = list(f.relative_to(root).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        pkg = mod.split(".") if f.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(pkg[:len(pkg) - node.level + 1] + [node.module or ""]).strip(".")
                        if node.level else node.module or "")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else known(base)
                           for a in node.names]
            else:
                continue
            graph[mod] |= {t for t in targets if t and t != mod}
    return graph


def test_no_import_circle_anywhere():
    """No two project modules import each other, directly or round a longer circle (issue 48:
    the base <-> helm <-> layout circle went with engines/launch.py, session <-> diagnose with
    apply_remedy moving to troubleshoot/)."""
    graph = _import_graph()
    assert len(graph) > 200 and "infopt.engines.launch" in graph["infopt.engines.base"]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan: strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = [stack.pop()]
            while comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []
