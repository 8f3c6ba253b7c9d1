"""SGLang 0.5.23 as its wheel reads infopt's commands (issue 46, items 1, 4, 5), without the
wheel: the decode graphs' knob and its defaults (arg_groups/fields/exec_.py, memory_hook.py),
--hicache-size per rank (mem_cache/pool_host/base.py, data_parallel_controller.py), and
speculation (speculative_hook.py: the reset to 48 running requests; draft counts that include
the root). tests/integration/test_sglang_argv.py puts the same commands through the wheel."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infopt.engines.launch import ServingTarget
from infopt.engines.rules import Drafter, LadderFacts
from infopt.engines.sglang import adapter as sglang
from infopt.engines.sglang.rules import (
    SPECULATIVE_RUNNING_CAP,
    default_cuda_graph_max_bs,
    default_running_cap,
)
from infopt.engines.vllm import adapter as vllm
from infopt.specs.ladder import Dimension
from infopt.specs.serving import SglangConfig, with_knobs
from infopt.tuning.decide import apply, derive
from infopt.tuning.dimension_rules import rules_for

T = ServingTarget(model_path="/m/hf", served_model_name="m", native_context_tokens=8192,
                  usable_cpus=16)
H100 = 81559 * 2**20  # NVML's memory.total of an H100 80GB HBM3 (tests/fixtures/nvml)


def facts(**kw) -> LadderFacts:
    base = dict(target_concurrency=600, usable_cpus=16, physical_cores=8, gpu_count=1,
                mean_prompt_tokens=300, mean_output_tokens=200, prefix_reuse=True,
                kv_read_share=0.2, gpu_memory_bytes=H100, gpu_compute_capability="9.0")
    return LadderFacts(**{**base, **kw})


def rule(dimension: Dimension, cfg: SglangConfig, f: LadderFacts):
    return derive(rules_for(sglang.ADAPTER)[dimension], "sglang", cfg, f)


def argv(cfg: SglangConfig) -> list[str]:
    return sglang.build_launch(cfg, "python", 30000).argv


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_decode_graphs_are_sized_with_the_flag_sglang_0523_has():
    """fields/exec_.py: --cuda-graph-max-bs-decode (and -prefill); --cuda-graph-max-bs is
    gone, and argparse refuses it as an ambiguous abbreviation of the two."""
    base = sglang.baseline_config(T)
    got = rule(Dimension.COMPILATION, base, facts())
    graphs = next(c for c in got if "cuda_graph_max_bs_decode" in c.changes)
    assert graphs.changes == {"cuda_graph_max_bs_decode": 600}
    args = argv(apply(base, graphs))
    assert flag(args, "--cuda-graph-max-bs-decode") == "600"
    assert "--cuda-graph-max-bs" not in args
    assert "larger than the 256 captured" in graphs.why
    with pytest.raises(ValidationError):
        SglangConfig(model_path="/m", context_length=4096, cuda_graph_max_bs=64)


def test_the_default_decode_graphs_follow_sglangs_memory_hook():
    """memory_hook.py handle_gpu_memory_settings (0.5.23): 48 / 160 under 35 GB (a 24 GB
    card), 256 / 512 on an 80 GB one, by TP < 4 / >= 4; an explicit running cap below lowers
    it; 160 when the memory is not known."""
    assert default_cuda_graph_max_bs(24 * 2**30, 1) == 48
    assert default_cuda_graph_max_bs(24 * 2**30, 4) == 160
    assert default_cuda_graph_max_bs(H100, 1) == 256
    assert default_cuda_graph_max_bs(H100, 8) == 512
    assert default_cuda_graph_max_bs(141 * 2**30, 1) == 256
    assert default_cuda_graph_max_bs(180 * 2**30, 1) == 512
    assert default_cuda_graph_max_bs(None, 1) == 160
    assert default_cuda_graph_max_bs(H100, 1, 64) == 64
    # A capped incumbent captures its own cap: 600 users over a 64 cap need no larger graphs.
    capped = with_knobs(sglang.baseline_config(T), {"max_running_requests": 64})
    assert all("cuda_graph_max_bs_decode" not in c.changes
               for c in rule(Dimension.COMPILATION, capped, facts()))


@pytest.mark.parametrize("layout,per_rank", [
    ({}, 100), ({"tp_size": 8}, 12), ({"tp_size": 4, "dp_size": 2}, 12),
    ({"tp_size": 2, "pp_size": 2}, 25), ({"tp_size": 2, "pp_size": 2, "dp_size": 2}, 12)])
def test_the_hierarchical_cache_splits_the_allowance_over_every_rank(layout, per_rank):
    """--hicache-size is GB for each TP x PP rank of each DP replica: the user's 100 GB over
    them, never 100 GB on each."""
    cfg = with_knobs(sglang.baseline_config(T), layout)
    got = rule(Dimension.KV_TIER, cfg, facts(gpu_count=8, kv_prefix_ram_bytes=100 * 10**9))
    assert [c.changes for c in got] == [{"hicache_size_gb": per_rank}]
    assert got[0].label == f"hicache={per_rank}GB"
    ranks = layout.get("tp_size", 1) * layout.get("pp_size", 1) * layout.get("dp_size", 1)
    assert f"{per_rank} GB for each of the {ranks} ranks" in got[0].why
    args = argv(apply(cfg, got[0]))
    assert "--enable-hierarchical-cache" in args
    assert int(flag(args, "--hicache-size")) * 10**9 * ranks <= 100 * 10**9


def test_an_allowance_under_a_gb_per_rank_gets_no_tier():
    cfg = with_knobs(sglang.baseline_config(T), {"tp_size": 8})
    got = rule(Dimension.KV_TIER, cfg, facts(gpu_count=8, kv_prefix_ram_bytes=5 * 10**9))
    assert isinstance(got, str) and "each of the 8 ranks" in got


def test_a_speculative_candidate_carries_the_incumbents_running_cap():
    """speculative_hook.py resets an unset --max-running-requests to 48: each candidate of an
    uncapped incumbent names the incumbent's own cap, SGLang's pool-derived default
    (kv_cache_configurator.py: pool / context x 512 within [2048, 4096], at most half the
    pool); a capped incumbent's cap is kept as it is."""
    base = sglang.baseline_config(T)
    eagle = Drafter("eagle3", "/models/eagle3", source="o/eagle3")
    got = rule(Dimension.SPECULATIVE, base, facts(kv_pool_tokens=100_000, drafters=(eagle,)))
    assert {c.changes["max_running_requests"] for c in got} == {4096}  # 6,250 -> 4,096
    assert all(f"caps an unset one at {SPECULATIVE_RUNNING_CAP}" in c.why for c in got)
    assert flag(argv(apply(base, got[0])), "--max-running-requests") == "4096"
    assert default_running_cap(30_000, 8192)[0] == 2048  # 1,875 -> the floor
    assert default_running_cap(3_000, 8192)[0] == 1500  # at most half the pool
    unlogged = rule(Dimension.SPECULATIVE, base, facts())
    assert {c.changes["max_running_requests"] for c in unlogged} == {2048}
    capped = with_knobs(base, {"max_running_requests": 600})
    assert all("max_running_requests" not in c.changes
               for c in rule(Dimension.SPECULATIVE, capped, facts()))


def test_draft_lengths_mean_drafted_tokens_as_on_vllm():
    """A label's n is n drafted tokens on both engines: vLLM's num_speculative_tokens, and
    SGLang's --speculative-num-draft-tokens n + 1 (the root included: NGRAM's param.h
    draft_token_num - 1; an EAGLE chain's num_steps + 1)."""
    eagle = Drafter("eagle3", "/models/eagle3", source="o/eagle3")
    mtp = Drafter("mtp", None)
    f = facts(drafters=(mtp, eagle))
    sgot = rule(Dimension.SPECULATIVE, sglang.baseline_config(T), f)
    vbase = vllm.baseline_config(T)
    vgot = {c.label: c for c in derive(rules_for(vllm.ADAPTER)[Dimension.SPECULATIVE], "vllm",
                                       vbase, f)}
    assert {c.label for c in sgot} == set(vgot)
    for c in sgot:
        n = int(c.label.rsplit("-", 1)[1])
        assert vgot[c.label].changes["num_speculative_tokens"] == n
        assert c.changes["speculative_num_draft_tokens"] == n + 1, c.label
        if c.changes["speculative_algorithm"] == "NGRAM":
            # NGRAM's top-k and steps are its own (speculative_hook.py _handle_ngram).
            assert "speculative_eagle_topk" not in c.changes
        else:
            assert (c.changes["speculative_num_steps"], c.changes["speculative_eagle_topk"]) \
                == (n, 1)
    ngram2 = next(c for c in sgot if c.label == "spec=ngram-2")
    assert flag(argv(apply(sglang.baseline_config(T), ngram2)),
                "--speculative-num-draft-tokens") == "3"


def test_ngram_needs_one_drafted_token_past_the_root():
    with pytest.raises(ValidationError, match="counts the root"):
        SglangConfig(model_path="/m", context_length=4096, speculative_algorithm="NGRAM",
                     speculative_num_draft_tokens=1)
