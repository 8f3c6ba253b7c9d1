"""The long-context check against real llama-server (issue 50), on the path a run takes: the
run's reference builds the short pool only (gate_run.quality_reference); the first trial that
passes the short gate and changes weights or KV precision finds no long windows, stops its
engine, has the reference build them (gate_run.build_long_windows) and runs again, judged on
them. That trial here serves the same GGUF under another path: a weight change by the rule
(quality.long_context.long_check_reason) with the reference's own numerics, so its short gate
passes on any CPU. Then the planted case: the same weights behind a stand-in that degrades
the scores past 400 prompt tokens (tests/sim/degrading_scorer.py, SIMULATED); the short
pool's prompts are far shorter, so the short gate passes it and only the long-context check
refuses it. A real change beside it, q8_0 KV, is judged on the same windows.

The served context here is 1,024 tokens (windows of ~520-950 tokens), not the bundled model's
8,192: the same code at a fraction of the prefill, which a 2-core CPU pays per window."""

from __future__ import annotations

import os

import pytest

from infopt.engines import endpoint_for, process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.hardware.host import inventory
from infopt.model.profile import profile_model
from infopt.quality.gate_run import judge_quality, quality_reference, with_long_note
from infopt.quality.long_context import WINDOW_TOKENS
from infopt.quality.long_run import judge_long_context, long_reference_path
from infopt.runs.engine_run import EngineRun, LongWindowsSource
from infopt.runs.trial_run import run_trial
from infopt.specs.quality import LongContextReference
from infopt.specs.serving import LlamaCppConfig
from infopt.specs.trial import TrialRole, TrialSpec
from infopt.specs.workload import fixed_levels
from tests.sim.degrading_scorer import DegradingScorer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CONTEXT = 1024
TOLERANCE = 0.05  # as test_quality_llamacpp.py: another CPU's kernels flip near-ties
DEGRADES_AFTER = 400  # past every prompt of the short pool (under 100 tokens)


def _config(model, **knobs) -> LlamaCppConfig:
    return LlamaCppConfig(model_path=str(model), served_model_name="smollm2", threads=2,
                          parallel_slots=1, ctx_per_slot_tokens=CONTEXT, **knobs)


@pytest.fixture(scope="module")
def reference(gguf_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("quality")
    path, note = quality_reference(_config(gguf_model), str(d), gguf_model.stat().st_size,
                                   "ref", prompts=8)
    assert path is not None, note
    assert not long_reference_path(path, CONTEXT).exists()  # built by the first trial needing it
    return path, note


@pytest.fixture(scope="module")
def weights_trial(reference, gguf_model, tmp_path_factory):
    """The first trial that changes weights: it builds the windows, then is judged on them."""
    path, _ = reference
    run = tmp_path_factory.mktemp("run")
    renamed = run / "renamed.gguf"
    os.link(gguf_model, renamed)  # the same bytes under another path
    size = gguf_model.stat().st_size
    ctx = EngineRun(run_dir=str(run), model=profile_model(str(gguf_model)),
                    hw=inventory(measure_bandwidth=False),
                    workload=fixed_levels(input_tokens=16, output_tokens=4, levels=[1],
                                          target=1, requests=2),
                    tokenizer_path=None, quality_reference=path, quality_tolerance=TOLERANCE,
                    quality_max_prompts=8, context_tokens=CONTEXT,
                    long_windows_from=LongWindowsSource(_config(gguf_model), size))
    spec = TrialSpec(trial_id="t1-renamed", role=TrialRole.TUNING, config=_config(renamed),
                     incumbent=_config(gguf_model), changes=[])
    before = set(process.live_pids())  # engines other tests of the session keep up
    trial = run_trial(spec, "t1-renamed", None, ctx)
    # The reference's sessions and the trial's (both of its starts) are stopped.
    assert set(process.live_pids()) <= before
    return trial


def _serve(binary, model, tmp_path, name, **knobs):
    return process.start(llamacpp.ADAPTER, _config(model, **knobs), str(binary),
                         tmp_path / f"{name}.log", weights_bytes=model.stat().st_size)


def test_the_first_trial_needing_them_builds_the_windows_and_is_judged_on_them(
        reference, weights_trial):
    path, note = reference
    note = with_long_note(note, path, CONTEXT)
    long_check = weights_trial.long_context
    assert weights_trial.failed is None and weights_trial.benchmark is not None
    assert long_check is not None and long_check.reason.startswith("weights (")
    assert long_check.verdict.decision == "pass"  # the reference's own numerics
    long = LongContextReference.model_validate_json(
        long_reference_path(path, CONTEXT).read_text())
    assert long.reference is not None and long.shortened is None
    assert CONTEXT // 2 <= min(long.prompt_tokens) and max(long.prompt_tokens) < CONTEXT - 64
    assert long.reference.self_agreement >= 0.95
    # Each window's continuation runs its full length (a record goes on; an answer would end).
    assert all(len(s.continuation) == WINDOW_TOKENS for s in long.reference.sequences)
    assert "Long-context check" in note and f"{CONTEXT:,}-token served context" in note
    # Their own floor: the reference's restart scored the same windows, two at once.
    assert long.floor is not None and long.floor.positions > 0.9 * len(long.prompt_tokens) * \
        WINDOW_TOKENS
    assert "their floor" in note


def test_a_kv_that_degrades_only_past_a_length_passes_the_short_pool_and_is_refused_long(
        reference, weights_trial, llama_server, gguf_model, tmp_path):
    path, _ = reference
    real = _serve(llama_server, gguf_model, tmp_path, "cand")
    try:
        with DegradingScorer(real.base_url, DEGRADES_AFTER) as planted:
            running = real.model_copy(update={"base_url": planted.base_url,
                                              "port": planted.port})
            short = judge_quality(running, _config(gguf_model), path, "planted", TOLERANCE,
                                  max_prompts=8)
            long = judge_long_context(endpoint_for("llamacpp", planted.base_url, "smollm2"),
                                      path, CONTEXT, "planted", TOLERANCE,
                                      "KV precision (SIMULATED: degrades past 400 tokens)")
            degraded = planted.degraded
    finally:
        process.stop(real.pid)
    print(f"\nshort: {short.summary}\nlong: {long.verdict.summary if long else None}")
    assert short.decision == "pass"  # the pool never reaches the planted length
    assert degraded > 0 and long is not None
    assert long.verdict.decision == "fail"
    assert long.verdict.candidate is not None and long.verdict.candidate.top1_agreement < 0.8
    assert long.verdict.looks == [4]  # decided at the first look


# e2e: a real change's verdict, informative beside the planted one (19 s on 2 cores).
@pytest.mark.e2e
def test_a_real_q8_0_kv_is_judged_on_the_same_windows(reference, weights_trial, llama_server,
                                                       gguf_model, tmp_path):
    path, _ = reference
    cand = _serve(llama_server, gguf_model, tmp_path, "q8", flash_attn="on",
                  cache_type_k="q8_0", cache_type_v="q8_0")
    try:
        long = judge_long_context(endpoint_for("llamacpp", cand.base_url, "smollm2"), path,
                                  CONTEXT, "kv-q8_0", TOLERANCE,
                                  "KV precision (cache_type_k f16 -> q8_0)")
    finally:
        process.stop(cand.pid)
    assert long is not None and long.verdict.candidate is not None
    print(f"\nq8_0 KV at {long.prompt_tokens} tokens: {long.verdict.summary}")
    assert long.verdict.decision in ("pass", "undecided")  # never refused as degraded
