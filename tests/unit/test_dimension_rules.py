"""The tuning ladder without engines: the order of the dimensions, the values each adapter
derives (and why), the stop rules, and the Pareto set."""

from __future__ import annotations

import pytest

from infopt.engines import adapter_for
from infopt.engines.launch import ServingTarget
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.rules import Drafter, LadderFacts, WeightVariant
from infopt.engines.vllm import adapter as vllm
from infopt.specs.ladder import LADDER_ORDER, Dimension, ParetoPoint
from infopt.specs.request import OptimizeRequest, TuneOverride
from infopt.specs.serving import EngineName, LlamaCppConfig, VllmConfig, with_knob, with_knobs
from infopt.tuning import decide
from infopt.tuning import dimension_rules as dr
from infopt.tuning.decide import apply
from infopt.tuning.engine_choice import engine_choice
from infopt.tuning.pareto import front

T = ServingTarget(model_path="/m/q4_1.gguf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=2)
BASE = llamacpp.baseline_config(T)


def facts(**kw) -> LadderFacts:
    base = dict(target_concurrency=4, usable_cpus=2, physical_cores=None, gpu_count=0,
                mean_prompt_tokens=150, mean_output_tokens=64, prefix_reuse=False,
                kv_read_share=0.18)
    return LadderFacts(**{**base, **kw})


def labels(out) -> list[str]:
    assert not isinstance(out, str), out
    return [c.label for c in out]


def test_the_dimensions_come_in_the_specifications_order():
    assert [d.value for d in LADDER_ORDER] == [
        "weights", "kv_precision", "scheduling", "prefill", "compilation", "prefix_caching",
        "parallel_layout", "speculative", "kv_tier"]
    for engine in EngineName:
        assert list(dr.rules_for(adapter_for(engine))) == list(LADDER_ORDER)


def test_llamacpp_derives_each_dimension_from_the_incumbent_and_the_facts():
    rules = dr.rules_for(llamacpp.ADAPTER)
    f = facts(weight_variants=(WeightVariant("Q8_0", "/v/q8.gguf", 8.5),
                               WeightVariant("Q4_1", "/m/q4_1.gguf", 4.78)))
    got = {d: decide.derive(r, "llamacpp", BASE, f) for d, r in rules.items()}
    # The checkpoint itself is not a candidate of its own weights dimension.
    assert labels(got[Dimension.WEIGHTS]) == ["weights=Q8_0"]
    assert "8.5 bits per weight" in got[Dimension.WEIGHTS][0].why
    kv = got[Dimension.KV_PRECISION]
    assert labels(kv) == ["kv=q8_0"] and kv[0].changes["flash_attn"] == "on"
    assert "18.0% of the weight reads" in kv[0].why
    assert labels(got[Dimension.SCHEDULING]) == ["parallel_slots=2", "parallel_slots=4"]
    assert all(c.series == "parallel_slots" for c in got[Dimension.SCHEDULING])
    # -ub near the mean prompt (150 tokens -> 256) and below the default 512.
    assert labels(got[Dimension.PREFILL]) == ["ubatch_tokens=256", "flash_attn=off"]
    assert "no graph-capture" in got[Dimension.COMPILATION]
    assert "no shared prompt prefixes" in got[Dimension.PREFIX_CACHING]
    assert "one device" in got[Dimension.PARALLEL_LAYOUT]
    # N-gram drafting tuned by its draft length; no draft model: Q8_0 reads more bytes than
    # the Q4_1 incumbent, so the exact model cannot draft for itself.
    spec = got[Dimension.SPECULATIVE]
    assert labels(spec) == ["spec=ngram-2", "spec=ngram-4", "spec=ngram-8"]
    assert {c.series for c in spec} == {"ngram_draft_tokens"}
    assert spec[1].changes == {"spec_type": "ngram-simple", "spec_ngram_simple_size_m": 4}
    assert "no draft model here" in spec[0].why


def test_llamacpp_drafts_with_a_cheaper_checkpoint_of_the_exact_model_or_a_found_drafter():
    rule = dr.rules_for(llamacpp.ADAPTER)[Dimension.SPECULATIVE]
    q8 = with_knob(BASE, "model_path", "/v/q8.gguf")
    variants = (WeightVariant("Q8_0", "/v/q8.gguf", 8.5), WeightVariant("Q4_0", "/v/q4.gguf",
                                                                          4.34),
                WeightVariant("Q2_K", "/v/q2.gguf", 2.96))
    got = decide.derive(rule, "llamacpp", q8, facts(weight_variants=variants))
    drafts = [c for c in got if c.changes["spec_type"] == "draft-simple"]
    # The cheapest checkpoint drafts (2.96 of 8.5 bits), tuned over the draft length.
    assert [c.changes["spec_draft_n_max"] for c in drafts] == [2, 4, 8]
    assert {c.changes["spec_draft_model"] for c in drafts} == {"/v/q2.gguf"}
    assert len({c.series for c in drafts}) == 1 and "same tokenizer" in drafts[0].why
    argv = llamacpp.build_launch(apply(q8, drafts[1]), "llama-server", 8080).argv
    assert argv[argv.index("--spec-type") + 1] == "draft-simple"
    assert argv[argv.index("-md") + 1] == "/v/q2.gguf"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "4"
    # A drafter the search found wins over the self-draft; heads without a GGUF are named.
    found = Drafter("draft_model", "/d/small.gguf", source="org/small", why="same tokenizer")
    got = decide.derive(rule, "llamacpp", q8, facts(weight_variants=variants, drafters=(found,)))
    assert {c.changes.get("spec_draft_model") for c in got} == {None, "/d/small.gguf"}
    got = decide.derive(rule, "llamacpp", BASE, facts(drafters=(Drafter("eagle3", None, "o/e"),)))
    assert "eagle3 heads need a GGUF conversion" in got[0].why
    # Already drafting: nothing to add.
    assert "already drafts" in decide.derive(rule, "llamacpp", apply(q8, drafts[0]), facts())


def test_a_draft_model_setting_without_draft_simple_is_refused():
    for bad in ({"spec_draft_model": "/d.gguf"}, {"spec_type": "draft-simple"},
                {"spec_draft_n_max": 4}, {"spec_type": "ngram-simple", "spec_draft_n_max": 4},
                {"spec_ngram_simple_size_m": 4}):
        with pytest.raises(ValueError):
            LlamaCppConfig(**{**BASE.model_dump(), **bad})


def test_values_follow_the_incumbent_and_the_facts():
    rules = dr.rules_for(llamacpp.ADAPTER)
    four = with_knob(BASE, "parallel_slots", 4)
    assert "already has 4 slots" in decide.derive(rules[Dimension.SCHEDULING], "llamacpp", four,
                                              facts())
    assert labels(decide.derive(rules[Dimension.SCHEDULING], "llamacpp", BASE,
                             facts(target_concurrency=8))) == [
        "parallel_slots=2", "parallel_slots=4", "parallel_slots=8"]
    # Hyperthreads: one thread per physical core is worth a launch.
    ht = decide.derive(rules[Dimension.SCHEDULING], "llamacpp", four,
                    facts(usable_cpus=2, physical_cores=1))
    assert labels(ht) == ["threads=1"]
    # KV reads a large share of decode traffic: 4-bit KV is tried too.
    assert labels(decide.derive(rules[Dimension.KV_PRECISION], "llamacpp", BASE,
                             facts(kv_read_share=0.4))) == ["kv=q8_0", "kv=q4_0"]
    q8 = with_knob(with_knob(BASE, "cache_type_k", "q8_0"), "cache_type_v", "q8_0")
    assert "already runs a q8_0/q8_0" in decide.derive(rules[Dimension.KV_PRECISION], "llamacpp",
                                                    q8, facts())
    # Flash attention off is not tried once V is quantized (it needs flash attention).
    assert labels(decide.derive(rules[Dimension.PREFILL], "llamacpp",
                             with_knob(q8, "flash_attn", "on"), facts())) == [
        "ubatch_tokens=256"]
    no_w = decide.derive(rules[Dimension.WEIGHTS], "llamacpp", BASE,
                      facts(weights_note="local quantization was not authorized"))
    assert no_w == "local quantization was not authorized"


def test_vllm_tries_fp8_kv_the_target_cap_batched_tokens_and_eager():
    rules = dr.rules_for(vllm.ADAPTER)
    base = vllm.baseline_config(T)
    got = {d: decide.derive(r, "vllm", base, facts()) for d, r in rules.items()}
    assert labels(got[Dimension.KV_PRECISION]) == ["kv=fp8"]
    assert labels(got[Dimension.SCHEDULING]) == ["max_num_seqs=4"]
    assert labels(got[Dimension.PREFILL]) == ["max_num_batched_tokens=1024"]  # 4 x 150
    assert labels(got[Dimension.COMPILATION]) == ["eager"]
    assert "only this checkpoint" in got[Dimension.WEIGHTS]
    eager = with_knob(base, "enforce_eager", True)
    assert labels(decide.derive(rules[Dimension.COMPILATION], "vllm", eager, facts())) == [
        "compiled"]
    assert "one device" in decide.derive(rules[Dimension.PARALLEL_LAYOUT], "vllm", base, facts())
    assert labels(decide.derive(rules[Dimension.PREFIX_CACHING], "vllm", base,
                             facts(prefix_reuse=True))) == ["enable_prefix_caching=False"]


def test_an_engine_without_a_ladder_still_tunes_its_running_request_cap():
    rules = dr.rules_for(adapter_for(EngineName.MLX))
    assert [d for d, r in rules.items() if r is not None] == [Dimension.SCHEDULING]
    assert "no rule for this dimension" in decide.derive(rules[Dimension.WEIGHTS], "mlx",
                                                      None, facts())


def test_the_request_can_narrow_the_ladder_or_replace_it():
    rules = dr.rules_for(llamacpp.ADAPTER, [Dimension.SCHEDULING])
    assert "not asked for" in decide.derive(rules[Dimension.WEIGHTS], "llamacpp", BASE, facts())
    assert labels(decide.derive(rules[Dimension.SCHEDULING], "llamacpp", BASE, facts()))
    tune = TuneOverride(knob="parallel_slots", values=[1, 3])
    user = dr.rules_for(llamacpp.ADAPTER, tune=tune)
    assert list(user) == [Dimension.USER]
    # The incumbent's own value changes nothing: only 3 is a candidate.
    assert labels(decide.derive(user[Dimension.USER], "llamacpp", BASE, facts())) == [
        "parallel_slots=3"]
    req = OptimizeRequest(dimensions=["prefill", "weights"])
    assert req.dimensions == [Dimension.PREFILL, Dimension.WEIGHTS]


def test_an_ordered_series_stops_at_the_first_value_no_better_than_the_last():
    assert not decide.series_stops(None, 40, True)
    assert not decide.series_stops(40, 45, True)
    assert decide.series_stops(45, 44, True) and decide.series_stops(45, 45, True)
    assert decide.series_stops(0.02, 0.03, False)


def _p(label, tps, itl, mem, q):
    return ParetoPoint(label=label, trial_ids=[], output_tokens_per_s=tps, ttft_p50_s=0.1,
                       itl_p50_s=itl, memory_bytes=mem, top1_agreement=q, on_front=True)


def test_the_pareto_front_keeps_every_tradeoff_and_names_who_dominates():
    pts = front([_p("fast", 50, 0.08, 300, 0.97), _p("lean", 40, 0.07, 200, 0.99),
                 _p("worse", 39, 0.09, 310, 0.96), _p("unscored", 60, 0.05, 100, None)])
    on = {p.label: (p.on_front, p.dominated_by) for p in pts}
    assert on["fast"] == (True, None) and on["lean"] == (True, None)
    assert on["worse"] == (False, "fast")
    # Unknown quality cannot be shown at least as good: it dominates nothing, nor is it.
    assert on["unscored"] == (True, None)


def _result(engine, role, values, failed=None):
    from infopt.specs.ladder import EngineResult

    return EngineResult(engine=engine, role=role, reason="r", model_path="/m",
                        model_format="gguf", winner_label="baseline", winner_values=values,
                        winner_median=sorted(values)[len(values) // 2] if values else None,
                        failed=failed)


def test_the_comparator_wins_only_beyond_the_noise():
    routed = _result("llamacpp", "routed", [50.0, 51.0, 52.0])
    faster = _result("vllm", "comparator", [70.0, 71.0, 72.0])
    close = _result("vllm", "comparator", [51.0, 50.5, 52.5])
    got = engine_choice([routed, faster], True, 0, 0.0)
    assert got.chosen == "vllm" and got.comparison.verdict == "b_better"
    assert "llamacpp's (baseline)" in got.reason
    assert engine_choice([routed, close], True, 0, 0.0).chosen == "llamacpp"
    slower = engine_choice([routed, _result("vllm", "comparator", [10.0, 9.7, 9.9])], True,
                               0, 0.0)
    assert slower.chosen == "llamacpp" and "is worse than llamacpp's" in slower.reason
    # Latency objective: lower is better, so the same numbers favour the routed engine.
    assert engine_choice([routed, faster], False, 0, 0.0).chosen == "llamacpp"
    failed = _result("vllm", "comparator", [], failed="did not start")
    got = engine_choice([routed, failed], True, 0, 0.0)
    assert got.chosen == "llamacpp" and "vllm failed: did not start" in got.reason
    got = engine_choice([_result("llamacpp", "routed", [], "no start"), faster], True, 0,
                            0.0)
    assert got.chosen == "vllm" and "routed engine llamacpp failed" in got.reason


def test_a_decided_gain_under_the_switch_margin_keeps_the_routed_engine():
    # Tight repeats: +0.6% is beyond the noise, but the engines were measured in separate
    # windows, so a switch must also clear ENGINE_SWITCH_MARGIN (2%).
    routed = _result("vllm", "routed", [100.0, 100.1, 100.2])
    slightly = _result("sglang", "comparator", [100.6, 100.7, 100.8])
    got = engine_choice([routed, slightly], True, 0, 0.0)
    assert got.chosen == "vllm" and got.comparison.verdict == "no_difference"
    assert "by 0.6%" in got.reason and "under the 2% an engine switch must clear" in got.reason
    clear = _result("sglang", "comparator", [104.0, 104.1, 104.2])  # +4%: beyond both
    assert engine_choice([routed, clear], True, 0, 0.0).chosen == "sglang"
    # The request's own margin, when larger, is the one to clear.
    assert engine_choice([routed, clear], True, 0, 0.05).chosen == "vllm"


def test_the_comparator_is_an_other_engine_serving_a_local_format():
    from infopt.engines import serves
    from infopt.engines.routing import comparator_for, route_for
    from infopt.specs.model import ModelFormat

    gguf = route_for(gpu=False, apple=False, fmt=ModelFormat.GGUF, target_concurrency=4)
    hf = route_for(gpu=False, apple=False, fmt=ModelFormat.HF, target_concurrency=4)
    ok = lambda name: None  # noqa: E731
    got, why = comparator_for(EngineName.LLAMACPP, [(ModelFormat.GGUF, gguf),
                                                    (ModelFormat.HF, hf)], None, ok, serves)
    assert got == (EngineName.VLLM, ModelFormat.HF) and "comparator" in why
    got, why = comparator_for(EngineName.LLAMACPP, [(ModelFormat.GGUF, gguf)], None, ok, serves)
    assert got is None and "no other engine" in why
    got, why = comparator_for(EngineName.LLAMACPP, [(ModelFormat.GGUF, gguf),
                                                    (ModelFormat.HF, hf)],
                              [EngineName.LLAMACPP], ok, serves)
    assert got is None and "only llamacpp is allowed" in why
    # Allowed engines in the user's order; one serving none of the local formats is passed by.
    got, why = comparator_for(EngineName.LLAMACPP, [(ModelFormat.GGUF, gguf)],
                              [EngineName.LLAMACPP, EngineName.VLLM], ok, serves)
    assert got is None and "vllm: serves none of the local formats (gguf)" in why
    assert serves("llamacpp", ModelFormat.HF) == "serves GGUF checkpoints, not HF"


def test_base_overrides_must_name_a_knob_of_an_engine_the_run_tunes():
    from infopt.specs.base import InfoptError
    from infopt.tuning.plan_run import check_overrides

    req = OptimizeRequest(base_overrides={"enforce_eager": True})
    check_overrides(req, [EngineName.LLAMACPP, EngineName.VLLM])  # vLLM's knob: allowed
    with pytest.raises(InfoptError, match=r"\['enforce_eager'\]: not a knob of llamacpp"):
        check_overrides(req, [EngineName.LLAMACPP])


def test_sglang_derives_each_dimension_from_its_documented_server_arguments():
    from infopt.engines.sglang import adapter as sglang

    t = ServingTarget(model_path="/m/hf", served_model_name="m", native_context_tokens=8192,
                      usable_cpus=16)
    base = sglang.baseline_config(t)
    rules = dr.rules_for(sglang.ADAPTER)
    f = facts(gpu_count=1, target_concurrency=8, mean_prompt_tokens=300)
    got = {d: decide.derive(r, "sglang", base, f) for d, r in rules.items()}
    assert labels(got[Dimension.KV_PRECISION]) == ["kv=fp8_e4m3"]
    assert labels(got[Dimension.SCHEDULING]) == ["max_running_requests=8"]
    # Shared prefixes: longest-prefix-match ordering joins the cap (not with the radix off).
    shared_sched = decide.derive(rules[Dimension.SCHEDULING], "sglang", base,
                              facts(gpu_count=1, target_concurrency=8, prefix_reuse=True))
    assert labels(shared_sched) == ["max_running_requests=8", "schedule=lpm"]
    argv = sglang.build_launch(decide.apply(base, shared_sched[1]), "python", 30000).argv
    assert argv[argv.index("--schedule-policy") + 1] == "lpm"
    no_radix = with_knob(base, "disable_radix_cache", True)
    assert labels(decide.derive(rules[Dimension.SCHEDULING], "sglang", no_radix, facts(
        gpu_count=1, target_concurrency=8, prefix_reuse=True))) == ["max_running_requests=8"]
    # 8 x 300 = 2,400 prompt tokens at the target load: one 4,096-token chunk.
    assert labels(got[Dimension.PREFILL]) == ["chunked_prefill_size=4096"]
    assert labels(got[Dimension.COMPILATION]) == ["torch_compile"]
    # No shared prefixes: the radix cache is overhead; with them, it stays on.
    assert labels(got[Dimension.PREFIX_CACHING]) == ["radix_cache=off"]
    shared = decide.derive(rules[Dimension.PREFIX_CACHING], "sglang", base,
                        facts(prefix_reuse=True))
    assert "already serves the workload's shared prefixes" in shared
    assert "one device" in got[Dimension.PARALLEL_LAYOUT]
    # N-gram speculation tuned over its draft length, as a series (no drafter model needed).
    spec = got[Dimension.SPECULATIVE]
    assert labels(spec) == ["spec=ngram-2", "spec=ngram-4", "spec=ngram-8"]
    assert {c.series for c in spec} == {"ngram_draft_tokens"}
    argv = sglang.build_launch(decide.apply(base, spec[1]), "python", 30000).argv
    assert argv[argv.index("--speculative-algorithm") + 1] == "NGRAM"
    # 4 drafted tokens: SGLang's count includes the root (test_sglang_0523.py).
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "5"
    # Every candidate renders flags the SGLang CLI takes (its argv builder, not a guess).
    for cands in got.values():
        for c in [] if isinstance(cands, str) else cands:
            argv = sglang.build_launch(decide.apply(base, c), "python", 30000).argv
            assert any(a.startswith("--") for a in argv[5:])
    cpu = decide.derive(rules[Dimension.COMPILATION], "sglang", base, facts(gpu_count=0))
    assert "GPU paths" in cpu


def test_kv_tiers_are_tried_only_on_shared_prefixes_and_within_the_users_allowance():
    from infopt.engines.sglang import adapter as sglang

    rules = dr.rules_for(llamacpp.ADAPTER)[Dimension.KV_TIER]
    # No shared prefixes: nothing for a tier to restore.
    assert "shares no prompt prefixes" in decide.derive(rules, "llamacpp", BASE, facts())
    # Shared prefixes: without the build's default 8 GiB tier, and sized to the allowance.
    got = decide.derive(rules, "llamacpp", BASE, facts(prefix_reuse=True,
                                                     kv_prefix_ram_bytes=2 * 2**30))
    assert labels(got) == ["cache_ram=2048MiB", "cache_ram=off"]
    assert "--cache-ram" in " ".join(
        llamacpp.build_launch(decide.apply(BASE, got[0]), "llama-server", 8080).argv)
    assert labels(decide.derive(rules, "llamacpp", BASE, facts(prefix_reuse=True))) == [
        "cache_ram=off"]
    # GPU engines: only with a GPU, and only with RAM the user allowed.
    v = dr.rules_for(vllm.ADAPTER)[Dimension.KV_TIER]
    vbase = vllm.baseline_config(T)
    assert "already lives in host RAM" in decide.derive(v, "vllm", vbase, facts(prefix_reuse=True))
    assert "user's to allow" in decide.derive(v, "vllm", vbase, facts(prefix_reuse=True,
                                                                    gpu_count=1))
    got = decide.derive(v, "vllm", vbase, facts(prefix_reuse=True, gpu_count=1,
                                             kv_prefix_ram_bytes=64 * 2**30))
    assert labels(got) == ["kv_offload=64GiB"]
    argv = vllm.build_launch(decide.apply(vbase, got[0]), "python", 8000).argv
    assert argv[argv.index("--kv-offloading-size") + 1] == "64.0"
    s = dr.rules_for(sglang.ADAPTER)[Dimension.KV_TIER]
    sbase = sglang.baseline_config(T)
    got = decide.derive(s, "sglang", sbase, facts(prefix_reuse=True, gpu_count=1,
                                               kv_prefix_ram_bytes=64 * 10**9))
    assert labels(got) == ["hicache=64GB"]
    argv = sglang.build_launch(decide.apply(sbase, got[0]), "python", 30000).argv
    assert "--enable-hierarchical-cache" in argv and argv[argv.index("--hicache-size") + 1] == "64"


def test_trtllm_derives_flags_and_nested_llm_api_options():
    import yaml

    from infopt.engines.trtllm import adapter as trtllm

    t = ServingTarget(model_path="/m/Llama", served_model_name="Llama",
                      native_context_tokens=8192, usable_cpus=16)
    base = trtllm.baseline_config(t)
    rules = dr.rules_for(trtllm.ADAPTER)
    f = facts(gpu_count=1, target_concurrency=8, mean_prompt_tokens=300)
    got = {d: decide.derive(r, "trtllm", base, f) for d, r in rules.items()}
    assert labels(got[Dimension.KV_PRECISION]) == ["kv=fp8"]
    assert labels(got[Dimension.SCHEDULING]) == ["max_batch_size=8"]
    assert labels(got[Dimension.PREFILL]) == ["max_num_tokens=4096", "chunked_prefill=on"]
    assert labels(got[Dimension.COMPILATION]) == ["cuda_graph_padding"]
    assert labels(got[Dimension.PREFIX_CACHING]) == ["block_reuse=off"]
    assert labels(got[Dimension.SPECULATIVE]) == ["spec=ngram-2", "spec=ngram-4",
                                                  "spec=ngram-8"]
    # A nested option lands in the YAML trtllm-serve reads, with the free-memory fraction the
    # CLI set copied into its kv_cache_config block (else the block would reset it to 0.9).
    fp8 = decide.apply(with_knob(base, "kv_cache_free_gpu_memory_fraction", 0.85),
                    got[Dimension.KV_PRECISION][0])
    launch = trtllm.build_launch(fp8, "trtllm-serve", 8000)
    (doc,) = [yaml.safe_load(text) for text in launch.files.values()]
    assert doc["kv_cache_config"] == {"dtype": "fp8", "free_gpu_memory_fraction": 0.85}
    # Applied, the candidate is the incumbent's own value: derived again, nothing to try.
    assert "already runs an FP8 KV cache" in decide.derive(rules[Dimension.KV_PRECISION],
                                                        "trtllm", fp8, f)
    off = decide.apply(base, got[Dimension.PREFIX_CACHING][0])
    on = decide.derive(rules[Dimension.PREFIX_CACHING], "trtllm", off, facts(prefix_reuse=True))
    assert labels(on) == ["block_reuse=on"]
    with pytest.raises(ValueError, match="no knob 'extra_llm_api_opts'"):
        with_knob(base, "extra_llm_api_opts.kv_cache_config.dtype", "fp8")
    # The host-RAM tier: host_cache_size in bytes, the user's allowance, shared prefixes only.
    tier = rules[Dimension.KV_TIER]
    assert "shares no prompt prefixes" in decide.derive(tier, "trtllm", base, f)
    got = decide.derive(tier, "trtllm", base, facts(gpu_count=1, prefix_reuse=True,
                                                 kv_prefix_ram_bytes=16 * 2**30))
    assert labels(got) == ["host_cache=16GiB"]
    launch = trtllm.build_launch(decide.apply(base, got[0]), "trtllm-serve", 8000)
    (doc,) = [yaml.safe_load(text) for text in launch.files.values()]
    assert doc["kv_cache_config"]["host_cache_size"] == 16 * 2**30
    assert "block reuse is off" in decide.derive(tier, "trtllm", off, facts(
        gpu_count=1, prefix_reuse=True, kv_prefix_ram_bytes=2**30))
    # Speculation: speculative_config per drafter kind (EAGLE-3 yes, EAGLE-1 not on PyTorch).
    spec = rules[Dimension.SPECULATIVE]
    drafters = (Drafter("mtp", None, why="own layers"), Drafter("eagle", "/d/e1", "o/e1"),
                Drafter("eagle3", "/d/e3", "o/e3"))
    got = decide.derive(spec, "trtllm", base, facts(gpu_count=1, drafters=drafters))
    assert [c.label for c in got][:4] == ["spec=mtp-model-1", "spec=mtp-model-2",
                                          "spec=mtp-model-4", "spec=eagle3-e3-2"]
    assert "eagle-e1: TensorRT-LLM has no eagle drafting here" in got[-3].why
    launch = trtllm.build_launch(decide.apply(base, got[3]), "trtllm-serve", 8000)
    (doc,) = [yaml.safe_load(text) for text in launch.files.values()]
    # TensorRT-LLM 1.2's registry has no "Eagle3" tag: EAGLE-3 heads run under "Eagle".
    assert doc["speculative_config"] == {"decoding_type": "Eagle", "max_draft_len": 2,
                                         "speculative_model": "/d/e3"}
    assert "already speculates" in decide.derive(spec, "trtllm", decide.apply(base, got[0]),
                                              facts(gpu_count=1))
    with pytest.raises(ValueError, match="speculative_model is required"):
        with_knob(base, "extra_llm_api_options.speculative_config",
                  {"decoding_type": "DraftTarget", "max_draft_len": 2})


def test_the_llamacpp_baseline_keeps_its_prompt_cache_within_the_users_allowance():
    from dataclasses import replace

    assert BASE.cache_ram_mib is None  # no allowance given: the build's own 8 GiB
    small = llamacpp.baseline_config(replace(T, kv_prefix_ram_bytes=256 * 2**20))
    assert small.cache_ram_mib == 256
    assert "--cache-ram 256" in " ".join(llamacpp.build_launch(small, "llama-server", 1).argv)
    # An allowance above the default does not grow the baseline; the kv_tier step may.
    assert llamacpp.baseline_config(replace(T, kv_prefix_ram_bytes=16 * 2**30)).cache_ram_mib \
        is None
    rule = dr.rules_for(llamacpp.ADAPTER)[Dimension.KV_TIER]
    assert labels(decide.derive(rule, "llamacpp", small, facts(
        prefix_reuse=True, kv_prefix_ram_bytes=256 * 2**20))) == ["cache_ram=off"]


def test_a_nested_option_change_is_recorded_as_its_dotted_knob():
    from infopt.engines.trtllm import adapter as trtllm
    from infopt.specs.trial import changes_from

    t = ServingTarget(model_path="/m/Llama", served_model_name="Llama",
                      native_context_tokens=8192, usable_cpus=16)
    base = trtllm.baseline_config(t)
    fp8 = with_knob(base, "extra_llm_api_options.kv_cache_config.dtype", "fp8")
    got = [(c.knob, c.control, c.value) for c in changes_from(base, fp8)]
    assert got == [("extra_llm_api_options.kv_cache_config.dtype", None, "fp8")]


def test_vllm_tunes_ngram_speculation_by_draft_length_on_a_gpu_only():
    import json

    rules = dr.rules_for(vllm.ADAPTER)[Dimension.SPECULATIVE]
    vbase = vllm.baseline_config(T)
    assert "not verified on the CPU backend" in decide.derive(rules, "vllm", vbase, facts())
    got = decide.derive(rules, "vllm", vbase, facts(gpu_count=1))
    assert labels(got) == ["spec=ngram-2", "spec=ngram-4", "spec=ngram-8"]
    argv = vllm.build_launch(decide.apply(vbase, got[2]), "python", 8000).argv
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "ngram", "num_speculative_tokens": 8}
    drafting = decide.apply(vbase, got[0])
    assert "already drafts 2" in decide.derive(rules, "vllm", drafting, facts(gpu_count=1))


def test_verified_drafters_are_tuned_by_draft_length_on_vllm_and_sglang():
    import json

    mtp = Drafter("mtp", None, why="the model's own 1 MTP layer(s)")
    eagle = Drafter("eagle3", "/models/eagle3", source="AngelSlim/Qwen3-8B_eagle3", why="head")
    remote = Drafter("draft_model", None, source="Qwen/Qwen3-0.6B", why="same tokenizer")
    f = facts(gpu_count=1, drafters=(mtp, eagle, remote))
    vbase = vllm.baseline_config(T)
    got = decide.derive(dr.rules_for(vllm.ADAPTER)[Dimension.SPECULATIVE], "vllm", vbase, f)
    assert labels(got) == ["spec=mtp-model-1", "spec=mtp-model-2", "spec=mtp-model-4",
                           "spec=eagle3-Qwen3-8B_eagle3-2", "spec=eagle3-Qwen3-8B_eagle3-4",
                           "spec=eagle3-Qwen3-8B_eagle3-8",
                           "spec=ngram-2", "spec=ngram-4", "spec=ngram-8"]
    assert len({c.series for c in got}) == 3  # each drafter its own series
    # The hub drafter not yet downloaded is named, never handed to the engine to fetch.
    assert "Qwen/Qwen3-0.6B (draft_model) verified but not downloaded" in got[6].why

    def spec(cfg, c):
        argv = vllm.build_launch(decide.apply(cfg, c), "python", 8000).argv
        return json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec(vbase, got[0]) == {"method": "mtp", "num_speculative_tokens": 1}
    assert spec(vbase, got[4]) == {"method": "eagle3", "num_speculative_tokens": 4,
                                   "model": "/models/eagle3"}
    from infopt.engines.sglang import adapter as sglang

    sbase = sglang.baseline_config(ServingTarget(model_path="/m/hf", served_model_name="m",
                                                 native_context_tokens=8192, usable_cpus=16))
    got = decide.derive(dr.rules_for(sglang.ADAPTER)[Dimension.SPECULATIVE], "sglang", sbase, f)
    argv = sglang.build_launch(decide.apply(sbase, got[0]), "python", 30000).argv
    # MTP on SGLang: EAGLE from the model's own layers, no draft path; a chain of n steps.
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE"
    assert "--speculative-draft-model-path" not in argv
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "2"
    argv = sglang.build_launch(decide.apply(sbase, got[3]), "python", 30000).argv
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert argv[argv.index("--speculative-draft-model-path") + 1] == "/models/eagle3"


def test_a_vllm_speculative_config_needs_its_parts():
    vbase = vllm.baseline_config(T).model_dump()
    for bad in ({"speculative_method": "ngram"}, {"num_speculative_tokens": 2},
                {"speculative_method": "eagle3", "num_speculative_tokens": 2},
                {"speculative_method": "mtp", "num_speculative_tokens": 2,
                 "speculative_model": "/d"}):
        with pytest.raises(ValueError):
            VllmConfig(**{**vbase, **bad})


def test_tensorrt_llm_is_routed_last_on_an_nvidia_gpu():
    from infopt.engines.routing import route_for
    from infopt.specs.model import ModelFormat

    for users, first in ((8, "vllm"), (1, "sglang")):
        routes = route_for(gpu=True, apple=False, fmt=ModelFormat.HF, target_concurrency=users)
        assert [r.engine.value for r in routes][0] == first
        assert routes[-1].engine.value == "trtllm" and "no engine build" in routes[-1].reason
    # Not for GGUF or a CPU: TensorRT-LLM needs an HF checkpoint and a GPU.
    assert all(r.engine.value != "trtllm" for r in route_for(
        gpu=True, apple=False, fmt=ModelFormat.GGUF, target_concurrency=8))


def test_a_short_kv_pool_asks_for_more_memory_on_each_gpu_engine():
    """Only when the baseline's logged pool holds fewer tokens than the target load needs at
    the workload's lengths (8 x (150 + 64) = 1,712 tokens here)."""
    from infopt.engines.sglang import adapter as sglang
    from infopt.engines.trtllm import adapter as trtllm

    t = ServingTarget(model_path="/m/hf", served_model_name="m", native_context_tokens=8192,
                      usable_cpus=16)
    cases = ((vllm, "gpu_memory_utilization"), (sglang, "mem_fraction_static"),
             (trtllm, "kv_cache_free_gpu_memory_fraction"))
    for engine, knob in cases:
        rule = dr.rules_for(engine.ADAPTER)[Dimension.SCHEDULING]
        base = engine.baseline_config(t)
        short = decide.derive(rule, engine.ADAPTER.name.value, base,
                           facts(gpu_count=1, target_concurrency=8, kv_pool_tokens=1_000))
        room = [c for c in short if knob in c.changes]
        assert [c.changes[knob] for c in room] == [0.95], engine
        assert "holds 1,000 tokens" in room[0].why and "need 1,712" in room[0].why
        ample = decide.derive(rule, engine.ADAPTER.name.value, base,
                           facts(gpu_count=1, target_concurrency=8, kv_pool_tokens=500_000))
        assert not [c for c in ample if knob in c.changes], engine
        # Already at the cap: nothing more to hand over.
        capped = with_knob(base, knob, 0.95)
        got = decide.derive(rule, engine.ADAPTER.name.value, capped,
                         facts(gpu_count=1, target_concurrency=8, kv_pool_tokens=1_000))
        assert isinstance(got, str) or not [c for c in got if knob in c.changes]


def test_each_config_says_whether_it_speculates_from_its_own_knobs():
    """A generic list of knob names missed MLX's draft model: each config class answers."""
    from infopt.engines.mlx import adapter as mlx
    from infopt.engines.sglang import adapter as sglang
    from infopt.engines.trtllm import adapter as trtllm

    t = ServingTarget(model_path="/m/hf", served_model_name="m", native_context_tokens=8192,
                      usable_cpus=16)
    on = {llamacpp: {"spec_type": "ngram-simple"},
          vllm: {"speculative_method": "ngram", "num_speculative_tokens": 2},
          sglang: {"speculative_algorithm": "NGRAM"},
          trtllm: {"extra_llm_api_options.speculative_config.decoding_type": "NGram",
                   "extra_llm_api_options.speculative_config.max_draft_len": 2,
                   "extra_llm_api_options.speculative_config.max_matching_ngram_size": 3},
          mlx: {"draft_model_path": "/m/draft"}}
    for engine, changes in on.items():
        base = engine.baseline_config(t)
        assert not base.speculates, engine
        assert with_knobs(base, changes).speculates, engine


def test_sglang_captures_graphs_up_to_the_target_load_and_tries_the_other_attention_kernels():
    from infopt.engines.sglang import adapter as sglang
    from infopt.engines.sglang.rules import default_cuda_graph_max_bs

    t = ServingTarget(model_path="/m/hf", served_model_name="m", native_context_tokens=8192,
                      usable_cpus=16)
    base = sglang.baseline_config(t)
    rules = dr.rules_for(sglang.ADAPTER)
    h100 = dict(gpu_count=1, gpu_memory_bytes=80 * 2**30, gpu_compute_capability="9.0")
    # memory_hook.py's defaults: 256 on an 80 GB GPU at TP 1, 512 at TP 4, 48 on a 24 GB one.
    assert default_cuda_graph_max_bs(80 * 2**30, 1) == 256
    assert default_cuda_graph_max_bs(80 * 2**30, 4) == 512
    assert default_cuda_graph_max_bs(24 * 2**30, 1) == 48
    comp = rules[Dimension.COMPILATION]
    assert labels(decide.derive(comp, "sglang", base, facts(**h100, target_concurrency=64))) == [
        "torch_compile"]
    got = decide.derive(comp, "sglang", base, facts(**h100, target_concurrency=384))
    assert labels(got) == ["cuda_graph_max_bs_decode=384", "torch_compile"]
    assert "larger than the 256 captured" in got[0].why
    argv = sglang.build_launch(decide.apply(base, got[0]), "python", 30000).argv
    assert argv[argv.index("--cuda-graph-max-bs-decode") + 1] == "384"
    eager = with_knob(base, "disable_cuda_graph", True)
    assert labels(decide.derive(comp, "sglang", eager, facts(**h100))) == ["cuda_graphs=on"]
    # Attention: the non-default kernels of the GPU's architecture and the model's attention.
    pre = rules[Dimension.PREFILL]
    assert labels(decide.derive(pre, "sglang", base, facts(**h100, mean_prompt_tokens=300,
                                                        target_concurrency=8))) == [
        "chunked_prefill_size=4096", "attention=flashinfer"]
    mla = decide.derive(pre, "sglang", base, facts(**h100, mla=True))
    assert labels(mla)[-1] == "attention=flashmla" and "default there is fa3" in mla[-1].why
    b200 = decide.derive(pre, "sglang", base, facts(gpu_count=1, gpu_compute_capability="10.0"))
    assert labels(b200)[-1] == "attention=flashinfer" and "trtllm_mha" in b200[-1].why
    ampere = decide.derive(pre, "sglang", base, facts(gpu_count=1, gpu_compute_capability="8.0"))
    assert all(not c.label.startswith("attention=") for c in ampere)
    chosen = with_knob(base, "attention_backend", "triton")
    assert all(not c.label.startswith("attention=")
               for c in decide.derive(pre, "sglang", chosen, facts(**h100)))


def test_trtllm_tries_the_overlap_scheduler_on_short_outputs_and_graphs_up_to_the_load():
    import yaml

    from infopt.engines.trtllm import adapter as trtllm

    t = ServingTarget(model_path="/m/Llama", served_model_name="Llama",
                      native_context_tokens=8192, usable_cpus=16)
    base = trtllm.baseline_config(t)
    rules = dr.rules_for(trtllm.ADAPTER)
    sched = rules[Dimension.SCHEDULING]
    short = decide.derive(sched, "trtllm", base, facts(gpu_count=1, target_concurrency=8,
                                                    mean_output_tokens=8))
    assert labels(short) == ["max_batch_size=8", "overlap_scheduler=off"]
    assert "(1/9 of their steps)" in short[1].why
    launch = trtllm.build_launch(decide.apply(base, short[1]), "trtllm-serve", 8000)
    (doc,) = [yaml.safe_load(text) for text in launch.files.values()]
    assert doc["disable_overlap_scheduler"] is True
    off = decide.apply(base, short[1])
    assert labels(decide.derive(sched, "trtllm", off, facts(gpu_count=1, target_concurrency=8,
                                                         mean_output_tokens=200))) == [
        "max_batch_size=8", "overlap_scheduler=on"]
    comp = rules[Dimension.COMPILATION]
    got = decide.derive(comp, "trtllm", base, facts(gpu_count=1, target_concurrency=256))
    assert labels(got) == ["cuda_graph_max_batch=256", "cuda_graph_padding"]
    launch = trtllm.build_launch(decide.apply(base, got[0]), "trtllm-serve", 8000)
    (doc,) = [yaml.safe_load(text) for text in launch.files.values()]
    assert doc["cuda_graph_config"] == {"max_batch_size": 256}
