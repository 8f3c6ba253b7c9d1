"""Draft-model speculation on the real llama-server: the shipped Q4_1 drafts for a Q8_0 made
from it with the real `llama-quantize` (the same tokenizer by construction), started through
the adapter from the ladder's own candidate. Asserted: the flags reach the engine (its log
loads the draft model), the per-request drafted/accepted counts reach the records and the
level, and greedy output is the same with and without drafting (lossless under verification).
Speeds are not asserted. Recorded here (AVX2 EPYC, 2 cores, 2026-12-05): a 64-token greedy
answer, 4-token drafts: 49 of 53 drafted tokens accepted (92%)."""

from __future__ import annotations

import httpx
import pytest

from infopt.engines import endpoint_for, process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.llamacpp.rules import speculative
from infopt.engines.quantize import requantize
from infopt.engines.rules import LadderFacts, WeightVariant
from infopt.loadgen.measure import measure_workload
from infopt.loadgen.tokens import engine_counter
from infopt.specs.serving import LlamaCppConfig
from infopt.specs.workload import fixed_levels
from infopt.tuning.decide import apply

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PROMPT = "List the numbers from 1 to 40, separated by commas."


@pytest.fixture(scope="module")
def q8(engine_paths, gguf_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("spec")
    return requantize(engine_paths.llama_quantize, gguf_model, d / "Q8_0.gguf", "Q8_0")


def _greedy(base_url: str) -> str:
    r = httpx.post(f"{base_url}/v1/chat/completions", timeout=120, json={
        "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 48,
        "temperature": 0, "seed": 1})
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


def test_a_cheaper_checkpoint_drafts_for_the_exact_model(llama_server, gguf_model, q8,
                                                         tmp_path):
    target = LlamaCppConfig(model_path=str(q8), served_model_name="smollm2", threads=2,
                            ctx_per_slot_tokens=2048)
    facts = LadderFacts(target_concurrency=1, usable_cpus=2, physical_cores=None, gpu_count=0,
                        mean_prompt_tokens=64, mean_output_tokens=32, prefix_reuse=False,
                        kv_read_share=None, weight_variants=(
                            WeightVariant("Q8_0", str(q8), 8.5),
                            WeightVariant("Q4_1", str(gguf_model), 4.78)))
    # The rule's own candidate: Q4_1 reads 56% of Q8_0's bytes, under the 2/3 bound.
    cands = [c for c in speculative(target, facts) if c.changes["spec_type"] == "draft-simple"]
    assert [c.changes["spec_draft_n_max"] for c in cands] == [2, 4, 8]
    drafting = apply(target, cands[1])

    plain = process.start(llamacpp.ADAPTER, target, str(llama_server), tmp_path / "plain.log",
                          weights_bytes=q8.stat().st_size)
    try:
        reference = _greedy(plain.base_url)
    finally:
        process.stop(plain.pid)
    spec = process.start(llamacpp.ADAPTER, drafting, str(llama_server), tmp_path / "spec.log",
                         weights_bytes=q8.stat().st_size)
    try:
        assert "loading draft model" in (tmp_path / "spec.log").read_text()
        assert _greedy(spec.base_url) == reference  # lossless: verification keeps the target's
        wl = fixed_levels(input_tokens=48, output_tokens=24, levels=[1], target=1, requests=3,
                          cooldown_s=0.2, seed=3)
        ep = endpoint_for("llamacpp", spec.base_url, "smollm2", spec.pid)
        with httpx.Client(timeout=30) as client:
            result, records = measure_workload(ep, wl, out_dir=None, max_input_tokens=8192,
                                               counter=engine_counter(client, ep))
    finally:
        process.stop(spec.pid)
    assert all(r.ok and r.output_tokens == 24 for r in records)
    assert all(r.draft_tokens and r.draft_tokens_accepted is not None for r in records)
    level = result.levels[0]
    assert level.draft_tokens_total == sum(r.draft_tokens or 0 for r in records)
    assert level.draft_acceptance is not None and 0 < level.draft_acceptance <= 1
