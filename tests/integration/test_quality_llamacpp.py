"""The quality gate against real llama-server: weight variants made with the real
`llama-quantize` from the shipped Q4_1 (F16 is the reference: the highest precision there is;
it holds the Q4_1 weights dequantized), judged by teacher forcing, sequentially. The verdicts
asserted are the ones no CPU can turn: the reference's own weights at another slot count pass,
Q2_K fails. The close variants (Q8_0 weights, q8_0 KV) sit a few points under the floor, where
each CPU's kernels flip other near-ties: they must not fail, and whether they pass or stay
undecided depends on the machine (recorded on llama.cpp 0.3.36: AVX2 EPYC, 232 tokens: floor
100%, Q8_0 98.3%, KV q8_0 98.3%, KV q4_0 90.1%, Q4_0 72.0%, Q2_K 62.9%; AVX-512 EPYC without
AMX, 2026-12-03: Q8_0 96.5% over 959 tokens, undecided at 0.05 after 32 prompts, KV q8_0 98.3%
over 232 tokens, passed at the first look)."""

from __future__ import annotations

import pytest

from infopt.engines import endpoint_for, process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.quantize import requantize
from infopt.quality.check import check_quality
from infopt.report.quality_text import render_verdict
from infopt.specs.serving import LlamaCppConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# Wider than the default 0.02 on purpose: another CPU's kernels (AVX-512 vs AVX2 dot products)
# round differently, and at 0.02 this 135M model's Q8_0 sits at the edge (98.3% vs 98.0% here).
# At 0.05 the close variants pass by ~3 points and Q2_K fails by ~30.
TOLERANCE = 0.05


@pytest.fixture(scope="module")
def variants(engine_paths, gguf_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("variants")
    return {t: requantize(engine_paths.llama_quantize, gguf_model, d / f"{t}.gguf", t)
            for t in ("F16", "Q8_0", "Q2_K")}


def _serve(binary, model, tmp_path, name, **knobs):
    cfg = LlamaCppConfig(model_path=str(model), served_model_name="smollm2", threads=2,
                         ctx_per_slot_tokens=2048, **knobs)
    return process.start(llamacpp.ADAPTER, cfg, str(binary), tmp_path / f"{name}.log",
                         weights_bytes=model.stat().st_size)


@pytest.fixture(scope="module")
def reference(llama_server, variants, tmp_path_factory):
    """The F16 reference, and a fresh F16 restart at another batch size for the floor."""
    d = tmp_path_factory.mktemp("ref")
    ref = _serve(llama_server, variants["F16"], d, "ref")
    floor = _serve(llama_server, variants["F16"], d, "floor", parallel_slots=2)
    yield (endpoint_for("llamacpp", ref.base_url, "smollm2"),
           endpoint_for("llamacpp", floor.base_url, "smollm2"), d / "reference.json")
    process.stop(ref.pid)
    process.stop(floor.pid)


# 16 prompts of the pool: enough for these verdicts, half the reference's cost.
PROMPTS = 16


@pytest.mark.parametrize("name, weights, knobs, decisions", [
    ("F16 at 4 slots", "F16", {"parallel_slots": 4}, {"pass"}),
    ("Q8_0 weights", "Q8_0", {}, {"pass", "undecided"}),
    ("KV q8_0", "F16", {"flash_attn": "on", "cache_type_k": "q8_0", "cache_type_v": "q8_0"},
     {"pass", "undecided"}),
    ("Q2_K weights", "Q2_K", {}, {"fail"}),
])
def test_the_gate_passes_the_same_weights_and_fails_a_degraded_one(
        reference, variants, llama_server, tmp_path, name, weights, knobs, decisions):
    ref, floor, cache = reference
    cand = _serve(llama_server, variants[weights], tmp_path, "cand", **knobs)
    try:
        saved, verdict = check_quality(ref, endpoint_for("llamacpp", cand.base_url, "smollm2"),
                                       floor=floor, tolerance=TOLERANCE, reference_file=cache,
                                       max_prompts=PROMPTS)
    finally:
        process.stop(cand.pid)
    print(f"\n{name}\n{render_verdict(verdict)}")
    assert saved.self_agreement >= 0.95 and cache.is_file()  # built once, then read back
    assert len(saved.sequences) == PROMPTS
    assert verdict.floor.top1_agreement >= 0.97  # a restart reproduces the reference
    assert verdict.candidate.positions >= 200
    assert verdict.decision in decisions, verdict.summary
    assert verdict.passed is (verdict.decision == "pass")
    if verdict.decision == "undecided":  # never waved through: it says so
        assert "undecided" in verdict.summary and verdict.looks == [8, 16]
    if decisions == {"fail"}:  # the verdict names what regressed
        assert "top-1 agreement" in verdict.summary and "perplexity ratio" in verdict.summary


def test_task_sets_run_on_both_and_join_the_verdict(reference, variants, llama_server,
                                                    tmp_path):
    """Two items per generative set on the real reference and its own weights at 2 slots: every
    set scored on both, paired, and a part of the verdict (on this 135M model the sets are
    noisy; the paired test keeps noise from failing the same weights)."""
    ref, floor, cache = reference
    cand = _serve(llama_server, variants["F16"], tmp_path, "cand", parallel_slots=2)
    try:
        _, verdict = check_quality(ref, endpoint_for("llamacpp", cand.base_url, "smollm2"),
                                   tolerance=TOLERANCE, reference_file=cache, task_items=2,
                                   max_prompts=PROMPTS)
    finally:
        process.stop(cand.pid)
    print(f"\n{render_verdict(verdict)}")
    names = {"arithmetic", "facts", "json_schema", "needle", "non_english", "code"}
    assert {t.set_name for t in verdict.candidate_tasks} == names
    assert all(t.total == 2 == len(t.outcomes) for t in verdict.reference_tasks)
    assert {m.measure for m in verdict.measures} >= {f"task:{n}" for n in names}
    assert verdict.passed, verdict.summary


def test_a_server_without_exact_scoring_is_judged_on_the_task_sets_alone(reference):
    """A server infopt cannot teacher-force (no known engine: bench/fast_server.py, which
    answers every prompt with the same filler) is compared on the task sets alone, and its
    answers' collapse is a regression; the verdict says fidelity was not measured."""
    from bench.fast_server import start_server
    from infopt.quality.check import quality_endpoint

    ref, _, _ = reference
    with start_server() as fast:
        cand = quality_endpoint(fast.base_url, None, None, tasks_only_ok=True)
        assert cand.scoring is None
        got_ref, verdict = check_quality(ref, cand, tolerance=TOLERANCE, task_items=6)
    print(f"\n{render_verdict(verdict)}")
    assert got_ref is None and verdict.candidate is None
    assert "token fidelity was not measured" in verdict.fidelity_note
    assert all(t.passed == 0 for t in verdict.candidate_tasks)
    assert not verdict.passed and "task sets only" in verdict.summary
    regressed = [m.measure for m in verdict.measures if not m.passed]
    assert regressed and all(m.startswith("task:") for m in regressed)
