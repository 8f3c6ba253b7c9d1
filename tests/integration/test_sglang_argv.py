"""Every SGLang command infopt builds, parsed and resolved by SGLang 0.5.23's own code (issue
46): the wheel's argument parser (server_args.py prepare_server_args, as `python -m
sglang.launch_server` calls it) and its resolution hooks (ServerArgs.resolve_once, as
launch_server.run_server calls it: memory defaults, CUDA graphs, the hierarchical cache,
speculative decoding), in the CPU environment `make sglang-args` builds, on the recorded
1- and 8-GPU H100 host (tests/fixtures/nvml/h100_sxm_8x.json). No GPU is needed to learn that a
flag is misspelt or gone, or that SGLang reads a value other than infopt meant; that is what
would fail first on a user's node.

The commands: the control and the baseline, every candidate of every ladder rule
(infopt.engines.sglang.rules RULES: checkpoints, FP8 KV, scheduling, prefill and attention,
CUDA graphs and torch.compile, the radix cache, the layouts of the 8-GPU host (candidate_layouts
through LAYOUT), speculative decoding with each drafter kind and n-grams, the hierarchical
cache) derived on the control and on each layout, for a dense model (Llama-3.1-8B), a MoE
model (Qwen3-30B-A3B) and an MLA MoE model with its own MTP layer (DeepSeek-V3). A misspelt flag
planted among them must be refused, so the check can fail; so must the spelling SGLang 0.5.23
no longer has (--cuda-graph-max-bs). The simulated SGLang (tests/sim/sglang_gpu.py) may know
only flags, and choices, that the real parser knows."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from infopt.costmodel.layouts import candidate_layouts
from infopt.engines.launch import ServingTarget
from infopt.engines.rules import Drafter, LadderFacts, WeightVariant
from infopt.engines.sglang import adapter as sglang
from infopt.engines.sglang.rules import (
    _BACKENDS,
    LAYOUT,
    default_cuda_graph_max_bs,
    default_mem_fraction_static,
)
from infopt.specs.inspection import AttentionKind
from infopt.specs.ladder import Dimension
from infopt.specs.serving import SglangConfig, with_knobs
from infopt.tuning.decide import apply, derive
from infopt.tuning.dimension_rules import rules_for
from tests.fake_nvml import load as load_nvml
from tests.fixture_data import MODEL_CONFIGS
from tests.sim import sglang_gpu as sim
from tests.sim.gpu_host import Gpu
from tests.unit.test_layouts import model

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CHECK = Path(__file__).with_name("sglang_argv_check.py")
DENSE, MOE, MLA_MTP = ("meta-llama__Llama-3.1-8B-Instruct", "Qwen__Qwen3-30B-A3B",
                       "deepseek-ai__DeepSeek-V3")
KV_PREFIX_RAM = 100 * 10**9  # the user's allowance for the hierarchical cache, bytes


def _hosts() -> dict[str, dict]:
    """The recorded 8x H100 SXM host, whole and as its first GPU alone."""
    rec = load_nvml("h100_sxm_8x")
    d = rec["devices"][0]
    gpu = {"memory_mib": d["memory_total_mib"], "name": d["name"],
           "capability": d["cuda_compute_capability"], "cuda": rec["cuda_driver_version"]}
    return {"1": {**gpu, "count": 1}, str(len(rec["devices"])): {**gpu, "count": 8}}


def _folder(root: Path, name: str, config: str) -> str:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(MODEL_CONFIGS / f"{config}.json", folder / "config.json")
    return str(folder)


def _facts(name: str, gpus: int, host: dict, root: Path, shared: bool) -> LadderFacts:
    m = model(name)
    drafters: tuple[Drafter, ...] = ()
    if m.mtp_layers:
        drafters = (Drafter("mtp", None, why="the model's own MTP layer"),)
    elif name == DENSE:  # an EAGLE-3 head and a small draft model, both local
        drafters = (Drafter("eagle3", _folder(root, "eagle3-head", DENSE), source="o/eagle3"),
                    Drafter("draft_model", _folder(root, "draft", DENSE), source="o/draft"))
    return LadderFacts(
        # 600 users: beyond the decode graphs SGLang captures by default (256, 512 at TP >= 4),
        # and a 100k-token pool short of their 600 x 500 tokens (a larger memory fraction).
        target_concurrency=600, usable_cpus=32, physical_cores=16, gpu_count=gpus,
        mean_prompt_tokens=300, mean_output_tokens=200, prefix_reuse=shared,
        kv_read_share=0.2, kv_pool_tokens=100_000, kv_prefix_ram_bytes=KV_PREFIX_RAM,
        weight_variants=(WeightVariant("FP8", _folder(root, f"{name}-fp8", name), 8.0),),
        drafters=drafters, layouts=tuple(candidate_layouts(m, gpus)) if gpus > 1 else (),
        gpu_memory_bytes=host["memory_mib"] * 2**20,
        gpu_compute_capability=".".join(map(str, host["capability"])),
        mla=m.attention.kind is AttentionKind.MLA)


# On a layout's incumbent, the rules whose commands depend on the layout: the decode graphs'
# default (by TP), the hierarchical cache (per rank), speculation (MTP and EP, drafters and PP).
PER_LAYOUT = (Dimension.COMPILATION, Dimension.SPECULATIVE, Dimension.KV_TIER)


def _candidates(cfg: SglangConfig, facts: list[LadderFacts],
                only: tuple[Dimension, ...] | None = None) -> list[tuple[str, SglangConfig]]:
    out = []
    for f in facts:
        for dimension, rule in rules_for(sglang.ADAPTER).items():
            got = [] if only and dimension not in only else derive(rule, "sglang", cfg, f)
            if only and not isinstance(got, str):  # one draft length of each series
                got = [c for i, c in enumerate(got) if c.series is None
                       or c.series not in {x.series for x in got[:i]}]
            out += [] if isinstance(got, str) else [(c.label, apply(cfg, c)) for c in got]
    return out


def _configs(root: Path) -> list[tuple[str, str, SglangConfig]]:
    """(label, host, config) for every distinct command infopt builds here: the one-GPU
    host's, then the layouts of the 8-GPU host's (each also an incumbent of the rules whose
    commands depend on it)."""
    out, seen = [], set()
    hosts = _hosts()

    def add(label: str, host: str, cfg: SglangConfig) -> None:
        key = tuple(_argv(cfg))
        if key not in seen:
            seen.add(key)
            out.append((label, host, cfg))

    for name in (DENSE, MOE, MLA_MTP):
        m = model(name)
        t = ServingTarget(model_path=_folder(root, name, name), served_model_name="m",
                          native_context_tokens=m.native_context_tokens, usable_cpus=32)
        control = sglang.control_config(t)
        add(f"{name} control", "1", control)
        add(f"{name} baseline", "1", sglang.baseline_config(t))
        for gpus, host in ((1, "1"), (8, "8")):
            facts = [_facts(name, gpus, hosts[host], root, shared) for shared in (True, False)]
            for label, cfg in _candidates(control, facts):
                add(f"{name} {gpus} GPU control + {label}", host, cfg)
        for layout, _ in candidate_layouts(m, 8):  # LAYOUT's spelling, as the rule's
            changes = LAYOUT.changes_from(control, layout)
            assert not isinstance(changes, str), changes
            if changes:
                on = with_knobs(control, changes)
                for label, cfg in _candidates(on, facts[:1], PER_LAYOUT):
                    add(f"{name} {layout.label} + {label}", "8", cfg)
    return out


def _argv(cfg: SglangConfig) -> list[str]:
    launch = sglang.build_launch(cfg, "python", 30000)
    assert launch.argv[1:3] == ["-m", "sglang.launch_server"]
    return launch.argv[3:]


def _judge(python: Path, hosts: dict, cases: list[tuple[str, list[str]]]) -> dict:
    job = {"hosts": hosts, "cases": [{"host": h, "argv": a} for h, a in cases]}
    out = subprocess.run([str(python), str(CHECK)], input=json.dumps(job), capture_output=True,
                         text=True, timeout=280,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                              "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, out.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def _check_resolved(label: str, cfg: SglangConfig, v: dict, host: dict) -> None:
    """What SGLang resolved is what infopt meant."""
    assert (v["tp_size"], v["pp_size"], v["dp_size"], v["ep_size"]) == (
        cfg.tp_size or 1, cfg.pp_size or 1, cfg.dp_size or 1, cfg.ep_size or 1), label
    assert v["context_length"] == cfg.context_length, label
    for knob in ("mem_fraction_static", "chunked_prefill_size", "schedule_policy",
                 "attention_backend"):
        if getattr(cfg, knob) is not None:
            assert v[knob] == getattr(cfg, knob), (label, knob)
    # SGLang's own attention default on this GPU is the one infopt's attention rule assumes.
    if cfg.attention_backend is None:
        assert v["attention_backend"] == _BACKENDS[9][1 if "DeepSeek" in label else 0][0], label
    assert v["kv_cache_dtype"] == cfg.kv_cache_dtype, label
    assert (v["disable_radix_cache"], v["enable_torch_compile"]) == (
        cfg.disable_radix_cache, cfg.enable_torch_compile), label
    if cfg.disable_cuda_graph:
        assert v["cuda_graph_backend_decode"] == v["cuda_graph_backend_prefill"] == "disabled"
    # The decode graphs: the size asked for, else SGLang's default as infopt predicts it.
    assert v["cuda_graph_max_bs_decode"] == (cfg.cuda_graph_max_bs_decode or
                                             default_cuda_graph_max_bs(
        host["memory_mib"] * 2**20, cfg.tp_size or 1, cfg.max_running_requests)), label
    # The static share SGLang resolves when none is given is the one infopt's fit assumes
    # (memory_hook.py's rule, infopt.engines.sglang.rules.default_mem_fraction_static).
    if cfg.mem_fraction_static is None:
        assumed = default_mem_fraction_static(
            host["memory_mib"] * 2**20, cfg.tp_size or 1, cfg.pp_size or 1,
            cfg.chunked_prefill_size, v["cuda_graph_max_bs_decode"], mla="DeepSeek" in label,
            graphs=not cfg.disable_cuda_graph)
        # Never optimistic (the fit would promise KV SGLang does not allocate), and close:
        # within the 8 MB x ~50 prefill graphs SGLang sometimes turns off by itself.
        assert assumed - 0.0015 <= v["mem_fraction_static"] <= assumed + 0.006, (
            label, assumed, v["mem_fraction_static"])
        # The stand-in's own reading of memory_hook.py (tests/sim/sglang_gpu.py), held to
        # SGLang's resolution of the same command as well, not to infopt's rule.
        a = sim.parser().parse_args(_argv(cfg))
        sim.resolve_memory_defaults(a, Gpu(name=host["name"],
                                           memory_bytes=host["memory_mib"] * 2**20,
                                           hbm_bytes_per_s=3.35e12, bf16_flops_per_s=9.9e14,
                                           count=host["count"], link_bytes_per_s=4.5e11),
                                    sim.read_model(cfg.model_path).mla)
        assert a.mem_fraction_static - 0.0015 <= v["mem_fraction_static"] <= \
            a.mem_fraction_static + 0.006, (label, "stand-in", a.mem_fraction_static)
    # The hierarchical cache: the size per rank, within the user's allowance over all ranks.
    assert v["enable_hierarchical_cache"] == (cfg.hicache_size_gb is not None), label
    assert v["hicache_size"] == (cfg.hicache_size_gb or 0), label
    ranks = (cfg.tp_size or 1) * (cfg.pp_size or 1) * (cfg.dp_size or 1)
    assert v["hicache_size"] * 10**9 * ranks <= KV_PREFIX_RAM, label
    # Running requests: what infopt set, never SGLang's speculative reset to 48.
    assert v["max_running_requests"] == cfg.max_running_requests, label
    if not cfg.speculates:
        assert v["speculative_algorithm"] is None, label
        return
    assert v["speculative_algorithm"] == cfg.speculative_algorithm, label
    # "spec=<drafter>-n": n drafted tokens, as on vLLM; SGLang's count adds the root.
    drafted = int(label.rsplit("-", 1)[1])
    assert v["speculative_num_draft_tokens"] == drafted + 1, label
    if cfg.speculative_algorithm != "NGRAM":  # a chain: n steps of top-1
        assert (v["speculative_num_steps"], v["speculative_eagle_topk"]) == (drafted, 1), label


def test_every_sglang_command_parses_and_resolves_as_infopt_means(sglang_args_python,
                                                                    tmp_path):
    hosts = _hosts()
    configs = _configs(tmp_path / "models")
    labels = [label for label, _, _ in configs]
    # Every rule had something to say here, so no dimension went unjudged.
    for part in ("weights=FP8", "kv=fp8_e4m3", "max_running_requests=600", "schedule=lpm",
                 "mem_fraction_static=0.95", "chunked_prefill_size=", "attention=flashinfer",
                 "attention=flashmla", "cuda_graph_max_bs_decode=600", "torch_compile",
                 "radix_cache=off", "TP8", "spec=ngram-2", "spec=mtp-", "spec=eagle3-",
                 "spec=draft_model-", "hicache="):
        assert any(part in label for label in labels), part
    cases = [(host, _argv(cfg)) for _, host, cfg in configs]
    planted = cases[0][1] + ["--tensor-paralel-size", "2"]  # misspelt: must be refused
    old = cases[0][1] + ["--cuda-graph-max-bs", "64"]  # gone in 0.5.23: must be refused
    result = _judge(sglang_args_python, hosts, [*cases, ("1", planted), ("1", old)])
    *verdicts, refused, ambiguous = result["verdicts"]
    assert refused["ok"] is False and "unrecognized arguments" in refused["why"]
    assert ambiguous["ok"] is False and "ambiguous option: --cuda-graph-max-bs" in ambiguous["why"]
    bad = [(label, v["why"]) for (label, _, _), v in zip(configs, verdicts, strict=True)
           if not v["ok"]]
    assert bad == [], bad
    for (label, host, cfg), v in zip(configs, verdicts, strict=True):
        _check_resolved(label, cfg, v, hosts[host])
    assert any(v["dp_size"] > 1 for v in verdicts) and any(v["pp_size"] > 1 for v in verdicts)
    assert any(v["ep_size"] > 1 for v in verdicts)
    # The simulated SGLang knows no flag, and no choice, that SGLang 0.5.23 does not.
    real = result["options"]
    for action in sim.parser()._actions:
        for option in action.option_strings:
            if option in ("-h", "--help"):
                continue
            assert option in real, option
            if action.choices is not None:
                assert set(action.choices) <= set(real[option] or ()), option
