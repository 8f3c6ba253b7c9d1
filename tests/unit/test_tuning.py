import pytest

from infopt.specs.results import Trial
from infopt.specs.serving import LlamaCppConfig
from infopt.specs.workload import Objective, fixed_levels
from infopt.tuning.decide import judge

CFG = LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=8192)


def _t(value, obj, i):
    return Trial(trial_id=f"t{i}", role="tuning", dimension="scheduling", value=value,
                 repeat=1, config=CFG, engine=None, benchmark=None, objective_value=obj)


def test_gain_beyond_noise_is_accepted():
    ok, cmp, why = judge([100, 104], [140, 150], higher=True, seed=0, min_gain=0.0)
    assert ok and cmp.verdict == "b_better" and "beats the incumbent" in why


def test_gain_inside_noise_keeps_the_incumbent():
    # The candidate's median is higher, but one of its repeats (101) loses to one of the
    # incumbent's (104).
    ok, cmp, why = judge([100, 104], [101, 150], higher=True, seed=0, min_gain=0.0)
    assert not ok and "does not clear the noise" in why


def test_latency_objective_prefers_lower():
    ok, _, _ = judge([0.030, 0.031], [0.020, 0.021], higher=False, seed=0, min_gain=0.0)
    assert ok


def test_one_measurement_a_side_is_no_evidence():
    ok, cmp, why = judge([100], [130], higher=True, seed=0, min_gain=0.0)
    assert not ok and cmp is None and "at least 2" in why


def test_decision_is_the_bootstrap_interval_of_the_difference():
    ok, c, _ = judge([100, 103, 101], [120, 118, 123], higher=True, seed=7, min_gain=0.0)
    assert ok and c.verdict == "b_better" and c.ci_low > 0
    assert (c.a_value, c.b_value, c.n_a, c.n_b) == (101, 120, 3, 3) and c.low_sample
    # A 25 % practical margin is not cleared by a ~19 % gain: the incumbent stays.
    ok, _, why = judge([100, 103, 101], [120, 118, 123], higher=True, seed=7, min_gain=0.25)
    assert not ok and "interval" in why


def test_scheduling_values_reach_the_target_concurrency():
    from infopt.engines.llamacpp import adapter as llamacpp
    dim = llamacpp.ADAPTER.scheduling_dimension(4)
    assert dim.knob == "parallel_slots" and dim.values == [1, 2, 4]
    assert llamacpp.ADAPTER.scheduling_dimension(6).values == [1, 2, 4, 6]


def test_baseline_and_dimension_for_every_engine():
    import json

    from infopt.engines import adapter_for
    from infopt.model.classify import classify_config
    from infopt.specs.hardware import HardwareInventory, HostInfo
    from infopt.specs.model import ModelFormat, ModelProfile
    from infopt.specs.serving import EngineName
    from infopt.tuning.control import baseline_config, control_config, serving_target
    from tests.fixture_data import MODEL_CONFIGS

    cfg = json.loads((MODEL_CONFIGS / "Qwen__Qwen3-8B.json").read_text())
    prof = ModelProfile(path="/models/qwen3-8b", format=ModelFormat.HF, file_bytes=1,
                        inspection=classify_config(cfg, model="q"), source="t")
    hw = HardwareInventory(host=HostInfo(
        cpu_model="c", architecture="x86_64", logical_cpus=8, physical_cores=8, usable_cpus=8,
        cgroup_cpu_limit=None, isa_features=[], ram_total_bytes=1, ram_available_bytes=1,
        os="Linux", kernel="6"), gpus=[], gpu_probe="t")
    wl = fixed_levels(input_tokens=128, output_tokens=64, levels=[1, 8], target=8, requests=4)
    knobs = {}
    for engine in EngineName:
        target = serving_target(prof, hw, served_name="q", port=None)
        base, control = baseline_config(engine, target), control_config(engine, target)
        assert base.engine is engine and base.host == "127.0.0.1"
        assert control.engine is engine and control.host == "127.0.0.1"
        dim = adapter_for(engine).scheduling_dimension(wl.target_concurrency)
        assert dim.values == [1, 2, 4, 8] and dim.knob in type(base).model_fields
        knobs[engine.value] = dim.knob
    assert knobs == {"vllm": "max_num_seqs", "sglang": "max_running_requests",
                     "trtllm": "max_batch_size", "llamacpp": "parallel_slots",
                     "mlx": "decode_concurrency"}


def test_llamacpp_control_is_the_bare_command_and_differs_from_the_baseline():
    from infopt.engines.launch import ServingTarget
    from infopt.engines.llamacpp import adapter as llamacpp

    t = ServingTarget(model_path="/m.gguf", served_model_name="m", native_context_tokens=8192,
                      usable_cpus=2)
    control = llamacpp.build_launch(llamacpp.control_config(t), "llama-server", 8080)
    assert control.argv == ["llama-server", "-m", "/m.gguf", "--host", "127.0.0.1", "--port",
                            "8080", "--alias", "m", "--metrics"]
    base = llamacpp.build_launch(llamacpp.baseline_config(t), "llama-server", 8080)
    assert base.argv[10:] == ["-c", "8192", "--parallel", "1", "-t", "2"]
    # The control's unified pool: 8192 cells shared by llama.cpp's auto 4 slots.
    shape = llamacpp.memory_shape(llamacpp.control_config(t), 4, True, 8192)
    assert (shape.max_sequences, shape.context_tokens) == (4, 2048)


def test_each_workload_level_is_a_closed_loop_traffic_spec_on_the_workload_route():
    from infopt.specs.traffic import RouteName

    wl = fixed_levels(input_tokens=128, output_tokens=64, levels=[1, 4], target=4, requests=6,
                      route=RouteName.COMPLETIONS, cooldown_s=0.5)
    spec = wl.scenarios()[1]
    assert spec.arrival.concurrency == 4 and spec.measured_requests == 6
    assert spec.warmup_count() == 4  # at least the level's concurrency
    assert [r.route for r in spec.routes] == [RouteName.COMPLETIONS] and spec.routes[0].stream
    assert (spec.input_lengths.tokens, spec.output_lengths.tokens) == (128, 64)
    assert spec.cooldown_s == 0.5 and spec.name == "chat@c4" == wl.target_scenario


def _scenario(name: str, conc: int, gap_s: float, wall_s: float, slos=()):
    from infopt.analysis.slo import evaluate_slos
    from infopt.loadgen.summary import summarize_level
    from infopt.specs.results import RequestRecord, ScenarioResult

    recs = [RequestRecord(request_id=f"{name}-{i}", concurrency=conc, ok=True, prompt_tokens=8,
                          output_tokens=5, output_tokens_requested=5, ttft_s=0.1,
                          e2e_s=0.1 + 4 * gap_s, itl_s=[gap_s] * 4, content_chunks=5)
            for i in range(4)]
    judged, good = evaluate_slos(recs, list(slos), wall_s)
    return ScenarioResult(name=name, arrival="closed_loop",
                          level=summarize_level(recs, conc, wall_s), slos=judged,
                          goodput_requests_per_s=good, slo_violated=None, validation_passed=True,
                          validation_failures=[], errors_by_kind={}, records_path=None)


@pytest.mark.parametrize("objective,expected", [
    (Objective.THROUGHPUT, 20 / 2.0),  # c4 scenario: 4 requests x 5 tokens in 2 s
    (Objective.LATENCY, 0.03),  # the single stream's time per token (TPOT)
    (Objective.GOODPUT, 4 / 2.0),  # at c4 all 4 requests' gaps (0.08 s) are within 0.1 s
])
def test_the_objective_is_read_from_its_target_scenario(objective, expected):
    from infopt.specs.results import BenchmarkResult
    from infopt.specs.traffic import Slo
    from infopt.specs.workload import Workload
    from infopt.tuning.control import objective_value

    slo = Slo(metric="itl", percentile=50, max_s=0.1)
    plain = fixed_levels(input_tokens=8, output_tokens=5, levels=[1, 4], target=4, requests=4)
    wl = Workload(traffic=plain.traffic.model_copy(update={"slos": [slo]}), objective=objective)
    bench = BenchmarkResult(workload=wl, scenarios=[
        _scenario("chat@c1", 1, 0.03, 1.0, [slo]), _scenario("chat@c4", 4, 0.08, 2.0, [slo])])
    assert objective_value(bench) == pytest.approx(expected)


def test_when_the_defaults_win_the_recommendation_names_what_they_trade():
    from infopt.specs.comparison import Comparison
    from infopt.specs.results import ControlGain
    from infopt.tuning.control import control_recommendation

    def gain(verdict):
        c = Comparison(stat="median", a_value=50.0, b_value=43.0, diff=-7.0, rel_diff=-0.14,
                       ci=0.95, ci_low=-9.0, ci_high=-5.0, min_rel_diff=0.0,
                       higher_is_better=True, verdict=verdict, n_a=3, n_b=3, n_resamples=2000,
                       seed=0, low_sample=True)
        return ControlGain(objective="throughput", higher_is_better=True, control_median=50.0,
                           winner_median=43.0, ratio=0.86, comparison=c,
                           control_is_baseline=False, note="")
    shared = control_recommendation(gain("a_better"), 2048, 8192)
    assert "only 2048 of the model's 8192" in shared and "keep the winner" in shared
    assert "run the engine's defaults" in control_recommendation(gain("a_better"), 8192, 8192)
    assert control_recommendation(gain("no_difference"), 2048, 8192) is None


def test_the_latency_objective_is_the_time_per_token_not_the_median_gap():
    """Speculative decoding streams a verified draft's tokens together: gaps of 90 ms then
    two of ~0 have a median near 0, while the stream makes a token every 30 ms. The latency
    objective reads TPOT, so a burstier but slower stream cannot look faster."""
    from infopt.loadgen.summary import summarize_level
    from infopt.specs.results import BenchmarkResult, RequestRecord, ScenarioResult
    from infopt.specs.workload import Workload
    from infopt.tuning.control import objective_value

    def scenario(gaps: list[float]) -> ScenarioResult:
        recs = [RequestRecord(request_id=f"r{i}", concurrency=1, ok=True, prompt_tokens=8,
                              output_tokens=7, output_tokens_requested=7, ttft_s=0.1,
                              e2e_s=0.1 + sum(gaps), itl_s=gaps, content_chunks=7)
                for i in range(3)]
        return ScenarioResult(name="chat", arrival="closed_loop",
                              level=summarize_level(recs, 1, 1.0), slos=[],
                              goodput_requests_per_s=None, slo_violated=None,
                              validation_passed=True, validation_failures=[],
                              errors_by_kind={}, records_path=None)

    plain = fixed_levels(input_tokens=8, output_tokens=7, levels=[1], target=1, requests=3)
    wl = Workload(traffic=plain.traffic, objective=Objective.LATENCY)
    bursty = BenchmarkResult(workload=wl, scenarios=[scenario([0.09, 0.0005, 0.0005] * 2)])
    steady = BenchmarkResult(workload=wl, scenarios=[scenario([0.025] * 6)])
    assert bursty.scenarios[0].level.itl_s.p50 < steady.scenarios[0].level.itl_s.p50
    assert objective_value(bursty) == pytest.approx(0.0303, abs=1e-4)
    assert objective_value(steady) == pytest.approx(0.025)
    assert objective_value(steady) < objective_value(bursty)  # steady is faster per token
