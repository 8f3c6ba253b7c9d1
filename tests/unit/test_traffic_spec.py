"""The workload file: models, validation messages, sweeps, standard scenarios, examples."""

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from infopt.specs.base import InputError
from infopt.specs.scenarios import (
    CHAT_INPUT,
    CHAT_OUTPUT,
    ScenarioName,
    ScenarioSet,
    standard_scenarios,
)
from infopt.specs.traffic import (
    Z_P95,
    ClosedLoop,
    ConstantArrival,
    FixedLengths,
    LognormalLengths,
    PoissonArrival,
    TraceLengths,
    TrafficSpec,
    expand_sweep,
    read_length_trace,
)
from infopt.specs.traffic_file import load_traffic

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "workloads").glob("*.yaml"))

MINIMAL = """\
name: t
input_lengths: {kind: fixed, tokens: 100}
output_lengths: {kind: fixed, tokens: 50}
measured_requests: 10
"""


def _load(tmp_path: Path, text: str) -> TrafficSpec:
    f = tmp_path / "w.yaml"
    f.write_text(text)
    return load_traffic(f)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    return str(info.value)


def test_lognormal_parameters_from_p50_and_p95_by_hand():
    # z95 = Phi^-1(0.95) = 1.64485...; mu = ln 1000 = 6.9078; sigma = ln(4000/1000)/1.6449
    assert Z_P95 == pytest.approx(1.6449, abs=1e-4)
    d = LognormalLengths(p50_tokens=1000, p95_tokens=4000)
    assert d.mu == pytest.approx(6.907755, abs=1e-6)
    assert d.sigma == pytest.approx(1.386294 / 1.644854, abs=1e-6)  # 0.842808
    # Round trip: exp(mu + z95 * sigma) is p95 again.
    assert math.exp(d.mu + Z_P95 * d.sigma) == pytest.approx(4000)


def test_minimal_file_defaults(tmp_path):
    spec = _load(tmp_path, MINIMAL + "peak_active_generations: 6\n")
    # No arrival: a closed loop at the peak; warm-up defaults to one request per slot.
    assert spec.arrival == ClosedLoop(concurrency=6)
    assert spec.warmup_count() == 6
    assert spec.prefix.reuse_ratio == 0 and spec.routes[0].route == "chat_completions"
    assert spec.routes[0].stream and spec.slos == [] and spec.seed == 0
    open_loop = spec.model_copy(update={"arrival": PoissonArrival(rate_per_s=1)})
    assert open_loop.warmup_count() == 6  # open loop: peak_active_generations
    assert spec.model_copy(update={"warmup_requests": 0}).warmup_count() == 0


def test_bad_arrival_kind_names_field_and_allowed_values(tmp_path):
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: poison, rate_per_s: 2}\n")
    assert "arrival.kind: 'poison' is not allowed" in msg
    assert "allowed: closed_loop, poisson, constant, bursts, sweep" in msg
    assert "w.yaml" in msg


def test_missing_arrival_kind(tmp_path):
    msg = _error(tmp_path, MINIMAL + "arrival: {rate_per_s: 2}\n")
    assert "arrival.kind: missing; allowed: closed_loop, poisson" in msg


def test_lognormal_p95_must_exceed_p50(tmp_path):
    text = MINIMAL.replace("input_lengths: {kind: fixed, tokens: 100}",
                           "input_lengths: {kind: lognormal, p50_tokens: 500, p95_tokens: 400}")
    msg = _error(tmp_path, text)
    assert "input_lengths.p95_tokens: p95_tokens (400) must exceed p50_tokens (500)" in msg


def test_unknown_fields_list_the_allowed_ones(tmp_path):
    msg = _error(tmp_path, MINIMAL + "concurency: 4\n")
    assert "concurency: unknown field 'concurency'; allowed: name, description, arrival" in msg
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: poisson, rate: 2}\n")
    assert "arrival.rate: unknown field 'rate'; allowed: kind, rate_per_s" in msg
    assert "arrival.rate_per_s: required" in msg
    msg = _error(tmp_path, MINIMAL + "routes: [{route: responses, wieght: 2}]\n")
    assert "routes[0].wieght: unknown field 'wieght'; allowed: route, weight, stream" in msg


def test_closed_choices_list_allowed_values(tmp_path):
    msg = _error(tmp_path, MINIMAL + "routes: [{route: chat}]\n"
                 "slos: [{metric: ttft, percentile: 97, max_s: 1}]\n")
    assert ("routes[0].route: 'chat' is not allowed; allowed: chat_completions, completions, "
            "responses, anthropic_messages") in msg
    assert "slos[0].percentile: 97 is not allowed; allowed: 50, 90, 95, 99" in msg
    msg = _error(tmp_path, MINIMAL + "slos: [{metric: tbt, percentile: 95, max_s: 1}]\n")
    assert "slos[0].metric: 'tbt' is not allowed; allowed: ttft, itl, tpot, e2e" in msg


def test_range_errors_name_the_field_and_value(tmp_path):
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: constant, rate_per_s: -1}\n"
                 "prefix: {reuse_ratio: 1.5}\n")
    assert "arrival.rate_per_s: Input should be greater than 0, got -1" in msg
    assert "prefix.reuse_ratio: Input should be less than or equal to 1, got 1.5" in msg


def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    msg = _error(tmp_path, "name: t\narrival: {kind: poisson\nseed: 1\n")
    assert "invalid YAML at line 3, column" in msg


def test_not_a_mapping_and_missing_file(tmp_path):
    assert "expected a mapping" in _error(tmp_path, "- a\n- b\n")
    assert "expected a mapping" in _error(tmp_path, "")
    with pytest.raises(InputError, match="cannot read workload file"):
        load_traffic(tmp_path / "nope.yaml")


def test_cross_field_rules():
    base = dict(name="t", input_lengths=FixedLengths(tokens=8),
                output_lengths=FixedLengths(tokens=8))
    with pytest.raises(ValidationError, match="give measured_requests or duration_s"):
        TrafficSpec(**base)
    with pytest.raises(ValidationError, match="closed loop needs measured_requests"):
        TrafficSpec(**base, duration_s=60)
    TrafficSpec(**base, arrival=PoissonArrival(rate_per_s=1), duration_s=60)  # open loop: fine
    with pytest.raises(ValidationError, match="required unless lengths_trace"):
        TrafficSpec(name="t", input_lengths=FixedLengths(tokens=8), measured_requests=1)
    with pytest.raises(ValidationError, match="not both"):
        TrafficSpec(**base, lengths_trace={"path": "x.csv"}, measured_requests=1)
    with pytest.raises(ValidationError, match="each \\(route, stream\\) pair may appear once"):
        TrafficSpec(**base, measured_requests=1,
                    routes=[{"route": "responses"}, {"route": "responses", "weight": 2}])
    with pytest.raises(ValidationError, match="each \\(metric, percentile\\)"):
        TrafficSpec(**base, measured_requests=1,
                    slos=[{"metric": "ttft", "percentile": 95, "max_s": 1}] * 2)
    with pytest.raises(ValidationError, match="shared_prefix_tokens must be >= 1"):
        TrafficSpec(**base, measured_requests=1, prefix={"reuse_ratio": 0.5})
    with pytest.raises(ValidationError, match="max_tokens \\(5\\) must be >= min_tokens"):
        TrafficSpec(**{**base, "input_lengths": {"kind": "uniform", "min_tokens": 9,
                                                 "max_tokens": 5}}, measured_requests=1)


def test_burst_must_fit_its_interval(tmp_path):
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: bursts, burst_size: 10, "
                 "burst_interval_s: 1, within_burst_rate_per_s: 5}\n")
    assert "arrival: a burst of 10 at 5.0/s lasts 1.8 s" in msg


def test_sweep_validation(tmp_path):
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: sweep, over: concurrency, values: [1, 4, 2]}\n")
    assert "arrival.values: values must be strictly increasing" in msg
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: sweep, over: concurrency, values: [1, 2.5]}\n")
    assert "concurrency values must be whole numbers" in msg
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: sweep, over: qps, values: [1]}\n")
    assert "arrival.over: 'qps' is not allowed; allowed: concurrency, rate" in msg
    msg = _error(tmp_path, MINIMAL + "arrival: {kind: sweep, over: rate, values: [1, 2], "
                 "stop_at_first_slo_violation: true}\n")
    assert "stop_at_first_slo_violation needs at least one entry in slos" in msg


def test_expand_sweep_concurrency_and_rate():
    base = dict(input_lengths=FixedLengths(tokens=8), output_lengths=FixedLengths(tokens=8),
                measured_requests=10)
    spec = TrafficSpec(name="s", arrival={"kind": "sweep", "over": "concurrency",
                                          "values": [1, 2, 8]}, **base)
    out = expand_sweep(spec)
    assert [s.name for s in out] == ["s@c1", "s@c2", "s@c8"]
    assert [s.arrival for s in out] == [ClosedLoop(concurrency=c) for c in (1, 2, 8)]
    assert [s.warmup_count() for s in out] == [1, 2, 8]
    rate = TrafficSpec(name="r", arrival={"kind": "sweep", "over": "rate", "values": [0.5, 2],
                                          "rate_arrival": "constant"}, **base)
    out = expand_sweep(rate)
    assert [s.name for s in out] == ["r@0.5rps", "r@2rps"]
    assert out[1].arrival == ConstantArrival(rate_per_s=2)
    poisson = rate.model_copy(update={"arrival": rate.arrival.model_copy(
        update={"rate_arrival": "poisson"})})
    assert expand_sweep(poisson)[0].arrival == PoissonArrival(rate_per_s=0.5)
    plain = TrafficSpec(name="p", **base)
    assert expand_sweep(plain) == [plain]


@pytest.mark.parametrize("native,peak", [(8192, 4), (131072, 64)])
def test_standard_scenarios(native, peak):
    specs = standard_scenarios(native, peak)
    by = {s.name: s for s in specs}
    assert list(by) == [n.value for n in ScenarioName]
    short, medium, full = by["short"], by["medium"], by["full-context"]
    assert (short.input_lengths, short.output_lengths) == (FixedLengths(tokens=128),
                                                           FixedLengths(tokens=128))
    assert (medium.input_lengths, medium.output_lengths) == (FixedLengths(tokens=1024),
                                                             FixedLengths(tokens=256))
    # Full native context: the prompt fills it except the output headroom.
    assert full.input_lengths == FixedLengths(tokens=native - 256)
    assert full.output_lengths == FixedLengths(tokens=256)
    assert full.input_lengths.tokens + full.output_lengths.tokens == native
    assert by["single-stream"].arrival == ClosedLoop(concurrency=1)
    for name in ("short", "medium", "full-context", "target-concurrency"):
        assert by[name].arrival == ClosedLoop(concurrency=peak)
    for name in ("single-stream", "target-concurrency"):
        assert (by[name].input_lengths, by[name].output_lengths) == (CHAT_INPUT, CHAT_OUTPUT)
    assert all(s.peak_active_generations == peak for s in specs)
    assert all(s.measured_requests >= 20 for s in specs if s.name != "full-context")
    assert full.measured_requests == max(4, 2 * peak)
    assert by["target-concurrency"].measured_requests == max(20, 4 * peak)


def test_standard_scenarios_small_context_and_set():
    # 1024 native: medium (1024 + 256) does not fit and is left out; full-context stays.
    names = [s.name for s in standard_scenarios(1024, 2)]
    assert names == ["short", "full-context", "single-stream", "target-concurrency"]
    with pytest.raises(InputError, match="leaves no room"):
        standard_scenarios(256, 1)
    sset = ScenarioSet.standard(8192, 4)
    assert sset.get("full-context").input_lengths == FixedLengths(tokens=7936)
    with pytest.raises(KeyError, match="no scenario 'long'"):
        sset.get("long")
    with pytest.raises(ValidationError, match="unique"):
        ScenarioSet(native_context_tokens=8192, peak_active_generations=1,
                    scenarios=[sset.scenarios[0]] * 2)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads(path):
    spec = load_traffic(path)
    assert spec.name == path.stem
    assert expand_sweep(spec)


def test_examples_present_and_chat_matches_defaults():
    assert {p.name for p in EXAMPLES} >= {"chat.yaml", "rag-long-context.yaml",
                                          "bursty-agents.yaml", "sweep.yaml"}
    chat = load_traffic(next(p for p in EXAMPLES if p.name == "chat.yaml"))
    assert (chat.input_lengths, chat.output_lengths) == (CHAT_INPUT, CHAT_OUTPUT)


def test_trace_paths_resolve_against_the_workload_file(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.csv").write_text("input_tokens,output_tokens,note\n10,5,a\n20,7,b\n")
    spec = _load(tmp_path, "name: t\nlengths_trace: {path: traces/t.csv}\nmeasured_requests: 4\n")
    assert spec.lengths_trace.path == str(tmp_path / "traces" / "t.csv")
    assert spec.trace_paths() == {"lengths_trace.path": str(tmp_path / "traces" / "t.csv")}
    assert read_length_trace(spec.lengths_trace.path) == [(10, 5), (20, 7)]


def test_trace_errors_name_the_field_and_line(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"input_tokens": 10}\n\n{"input_tokens": 0}\n')
    text = MINIMAL.replace("input_lengths: {kind: fixed, tokens: 100}",
                           "input_lengths: {kind: trace, path: t.jsonl}")
    msg = _error(tmp_path, text)
    assert "input_lengths.path:" in msg and "line 3: input_tokens must be a whole number" in msg
    (tmp_path / "t.jsonl").write_text('{"input_tokens": 10}\n')
    spec = _load(tmp_path, text)
    assert isinstance(spec.input_lengths, TraceLengths)
    # Output column absent: fine for input_lengths, an error for a paired trace.
    msg = _error(tmp_path, "name: t\nlengths_trace: {path: t.jsonl}\nmeasured_requests: 4\n")
    assert "lengths_trace.path:" in msg and "output_tokens must be a whole number" in msg
    msg = _error(tmp_path, MINIMAL.replace("input_lengths: {kind: fixed, tokens: 100}",
                                           "input_lengths: {kind: trace, path: none.csv}"))
    assert "input_lengths.path:" in msg and "not found" in msg
    (tmp_path / "bad.csv").write_text("in,out\n1,2\n")
    with pytest.raises(InputError, match="header has no column input_tokens"):
        read_length_trace(tmp_path / "bad.csv")
    (tmp_path / "t.txt").write_text("1,2\n")
    with pytest.raises(InputError, match="unknown trace format .txt"):
        read_length_trace(tmp_path / "t.txt")


def test_specs_round_trip_through_json():
    # Tasks hand these models between stages as JSON.
    for path in EXAMPLES:
        spec = load_traffic(path)
        assert TrafficSpec.model_validate_json(spec.model_dump_json()) == spec
    sset = ScenarioSet.standard(8192, 4)
    assert ScenarioSet.model_validate_json(sset.model_dump_json()) == sset
