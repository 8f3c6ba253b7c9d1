"""Every trtllm-serve command and --extra_llm_api_options document infopt builds, checked against
TensorRT-LLM 1.2's own argument models and click options (issue 46). TensorRT-LLM cannot be
imported here (no wheel on PyPI; llm_args.py imports the CUDA bindings), so its models are
recorded as data with their sources (infopt/engines/data/trtllm-1.2-llm-args.json) and rebuilt
as pydantic models with extra="forbid" (infopt.engines.trtllm.args): an unknown field, a wrong
type, an unknown decoding type, a failed speculative assert or an option serve.py lacks is
refused as 1.2 would refuse it. The configurations: the control and the baseline, every
candidate each rule of infopt.engines.trtllm.rules derives (with drafters of every kind, short
and long outputs, shared prefixes and a host-RAM allowance), and the layout candidates of
infopt.costmodel.layouts on 1- and 8-GPU hosts for a dense 70B, two MoE models and DeepSeek-V3
(MTP). Planted mistakes must be refused, so the check can fail."""

from __future__ import annotations

import pytest
import yaml

from infopt.costmodel.layouts import candidate_layouts
from infopt.engines.launch import ServingTarget
from infopt.engines.rules import Drafter, LadderFacts
from infopt.engines.trtllm import adapter as trtllm
from infopt.engines.trtllm import args as args
from infopt.engines.trtllm.rules import LAYOUT
from infopt.specs.ladder import Dimension
from infopt.specs.serving import with_knobs
from infopt.tuning import decide
from infopt.tuning import dimension_rules as dr
from tests.unit.test_layouts import model

MODELS = ("meta-llama__Meta-Llama-3.1-70B", "mistralai__Mixtral-8x7B-v0.1",
          "Qwen__Qwen3-30B-A3B", "deepseek-ai__DeepSeek-V3")
DRAFTERS = (Drafter("mtp", None, why="own layers"), Drafter("eagle", "/d/e1", "o/e1"),
            Drafter("eagle3", "/d/e3", "o/e3"), Drafter("draft_model", "/d/small", "o/s"))


def facts(gpus: int, m, **kw) -> LadderFacts:
    base = dict(target_concurrency=8, usable_cpus=32, physical_cores=None, gpu_count=gpus,
                mean_prompt_tokens=300, mean_output_tokens=64, prefix_reuse=False,
                kv_read_share=0.18, drafters=DRAFTERS, kv_prefix_ram_bytes=16 * 2**30,
                layouts=tuple(candidate_layouts(m, gpus)), gpu_memory_bytes=80 * 2**30,
                gpu_compute_capability="9.0")
    return LadderFacts(**{**base, **kw})


def _configs() -> list[tuple[str, object]]:
    out = []
    rules = dr.rules_for(trtllm.ADAPTER)
    for name in MODELS:
        m = model(name)
        t = ServingTarget(model_path=f"/models/{name}", served_model_name=name,
                          native_context_tokens=m.native_context_tokens, usable_cpus=32)
        control, base = trtllm.control_config(t), trtllm.baseline_config(t)
        out += [(f"{name} control", control), (f"{name} baseline", base)]
        for gpus in (1, 8):
            for layout, _ in candidate_layouts(m, gpus):
                changes = LAYOUT.changes_from(base, layout)
                if isinstance(changes, str):  # DP: separate servers, not one argv
                    assert "no DP in one server" in changes, changes
                    continue
                out.append((f"{name} {gpus} GPUs {layout.label}", with_knobs(base, changes)))
            variants = [facts(gpus, m), facts(gpus, m, mean_output_tokens=8,
                                              target_concurrency=256),
                        facts(gpus, m, prefix_reuse=True, target_concurrency=2)]
            for incumbent in (control, base):
                for f in variants:
                    for dim, rule in rules.items():
                        got = decide.derive(rule, "trtllm", incumbent, f) if rule else "none"
                        if isinstance(got, str):
                            continue
                        for c in got:
                            out.append((f"{name} {gpus} GPUs {dim.value} {c.label}",
                                        decide.apply(incumbent, c)))
    return out


def _rendered(cfg) -> tuple[list[str], dict]:
    launch = trtllm.build_launch(cfg, "trtllm-serve", 8000)
    assert launch.argv[0] == "trtllm-serve"
    docs = [yaml.safe_load(text) for text in launch.files.values()]  # as serve.py reads it
    return launch.argv[1:], (docs[0] if docs else {})


def _distinct(configs):
    """One of each rendered command and options file (many candidates render alike)."""
    seen, out = set(), []
    for label, cfg in configs:
        argv, doc = _rendered(cfg)
        key = (tuple(argv), yaml.safe_dump(doc, sort_keys=True))
        if key not in seen:
            seen.add(key)
            out.append((label, cfg))
    return out


CONFIGS = _distinct(_configs())


def test_the_set_covers_every_rule_and_layout():
    # (control + chunked_prefill=on renders as the baseline: one of them is kept)
    labels = " ".join(label for label, _ in CONFIGS)
    for dim in (Dimension.KV_PRECISION, Dimension.SCHEDULING, Dimension.PREFILL,
                Dimension.COMPILATION, Dimension.PREFIX_CACHING, Dimension.PARALLEL_LAYOUT,
                Dimension.SPECULATIVE, Dimension.KV_TIER):
        assert f" {dim.value} " in labels, dim
    for label in ("spec=mtp-model-4", "spec=eagle3-e3-8", "spec=draft_model-s-2",
                  "spec=ngram-8", "TP8", "TP1_PP8", "kv=fp8", "max_num_tokens=",
                  "overlap_scheduler=off", "cuda_graph_max_batch=256", "host_cache=16GiB"):
        assert label in labels, label


@pytest.mark.parametrize("label, cfg", CONFIGS, ids=[label for label, _ in CONFIGS])
def test_trtllm_1_2_takes_every_command_and_options_file_infopt_builds(label, cfg):
    argv, doc = _rendered(cfg)
    assert args.serve_argv_refusals(argv) == [], label
    assert args.llm_args_refusals(doc) == [], (label, doc)


def test_mtp_drafts_the_length_the_candidate_names():
    for label, cfg in CONFIGS:
        if "spec=mtp-model-" in label:
            _, doc = _rendered(cfg)
            assert args.mtp_draft_tokens(doc["speculative_config"]) == int(label[-1]), label


@pytest.mark.parametrize("doc, why", [
    ({"enable_chunked_prefil": True}, "TorchLlmArgs.enable_chunked_prefil: Extra inputs are "
                                      "not permitted"),
    ({"kv_cache_config": {"dtpye": "fp8"}}, "kv_cache_config.dtpye: Extra inputs"),
    ({"cuda_graph_config": {"padding": True}}, "cuda_graph_config.padding: Extra inputs"),
    ({"print_iter_log": "sometimes"}, "print_iter_log: Input should be a valid boolean"),
    ({"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, "less than or equal to 1"),
    ({"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 2,
                             "speculative_model": "/d"}}, "Invalid decoding type: Eagle3"),
    ({"speculative_config": {"decoding_type": "Draft_Target", "max_draft_len": 2,
                             "speculative_model": "/d"}}, "Invalid decoding type: Draft_Target"),
    ({"speculative_config": {"decoding_type": "NGram", "max_draft_len": 2}},
     "max_matching_ngram_size > 0"),
    ({"speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layer": 2}},
     "(MTPDecodingConfig).num_nextn_predict_layer: Extra inputs"),
    ({"speculative_config": {"decoding_type": "DraftTarget", "max_draft_len": 2}},
     "DraftTarget needs speculative_model"),
])
def test_a_planted_mistake_in_the_options_file_is_refused(doc, why):
    got = args.llm_args_refusals(doc)
    assert any(why in g for g in got), got


def test_a_misspelt_field_in_a_rendered_document_is_refused():
    label, cfg = next((lb, c) for lb, c in CONFIGS if "kv=fp8" in lb)
    _, doc = _rendered(cfg)
    doc["kv_cache_config"]["dtype_"] = doc["kv_cache_config"].pop("dtype")
    assert args.llm_args_refusals(doc) == [
        "TorchLlmArgs.kv_cache_config.dtype_: Extra inputs are not permitted "
        "[type=extra_forbidden]"], label


@pytest.mark.parametrize("extra, why", [
    (["--tensor_paralel_size", "2"], "No such option: --tensor_paralel_size"),
    (["--max_num_tokens", "lots"], "'lots' is not a valid integer"),
    (["--backend", "onnx"], "'onnx' is not one of 'pytorch', 'tensorrt', '_autodeploy'"),
    (["--kv_cache_free_gpu_memory_fraction"], "requires an argument"),
    (["/models/other"], "Got unexpected extra argument (/models/other)"),
])
def test_a_planted_mistake_on_the_command_line_is_refused(extra, why):
    argv, _ = _rendered(CONFIGS[0][1])
    got = args.serve_argv_refusals(argv + extra)
    assert any(why in g for g in got), got


def test_the_record_names_its_sources_and_why_it_is_data():
    rec = args.record()
    assert rec["tensorrt_llm"]["tag"] == "v1.2.1" and "C++ bindings" in rec["why_recorded"]
    models = rec["llm_api"]["models"]
    assert all(models[m]["extra"] == "forbid" for m in models)
    assert "Eagle3" not in rec["llm_api"]["decoding_types"]["registry"]
    assert rec["llm_api"]["speculative_checks"]["MTP"]["draft_len_from"] == \
        "num_nextn_predict_layers"
    assert models["TorchLlmArgs"]["fields"]["max_num_tokens"]["default"] == 8192
    assert models["TorchLlmArgs"]["fields"]["enable_chunked_prefill"]["default"] is False
