"""Target files: every bad input is one message naming the field, the value and what is
allowed (never a traceback); the examples in examples/targets/ load."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.specs.base import InputError
from infopt.specs.request import OptimizeRequest
from infopt.specs.request_file import load_request, parse_request

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "targets"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_load(path):
    assert isinstance(load_request(path), OptimizeRequest)


def test_demo_is_what_make_demo_runs():
    r = load_request(EXAMPLES / "demo.yaml")
    assert r.model.path is None and r.tuning_workload().target_concurrency == 4
    assert r.tuning_workload().target_scenario == "chat@c4"
    assert "full-context" not in r.scenarios and r.budgets.repeats == 3
    assert "examples/targets/demo.yaml" in (EXAMPLES.parents[1] / "Makefile").read_text()


def _load(tmp_path, text: str | bytes) -> OptimizeRequest:
    p = tmp_path / "t.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return load_request(p)


# A minimal inline workload; each case below changes one thing about it.
W = "name: w, input_lengths: {kind: fixed, tokens: 8}, output_lengths: {kind: fixed, tokens: 8}"


def _wl(extra: str, requests: str = "measured_requests: 4") -> str:
    return "workload: {" + ", ".join(x for x in (W, requests, extra) if x) + "}"


@pytest.mark.parametrize("text,message", [
    (_wl("input_tokns: 5"), r"workload.input_tokns: unknown field 'input_tokns'; allowed: name, "
                            r"description, arrival"),
    ("budgets: {repeats: 3}\nbudgets: {repeats: 4}",
     r"duplicate key .budgets. \(first at line 1\)"),
    (_wl("cooldown_s: .inf"), r"workload.cooldown_s: .inf and .nan"),
    ("workload: {name: w, input_lengths: {kind: fixed, tokens: 8}, output_lengths: {kind: "
     "fixed, tokens: .nan}, measured_requests: 4}", r"workload.output_lengths.tokens: .inf and .nan"),
    (_wl("", "measured_requests: -3"), r"workload.measured_requests: .*greater than or equal"),
    (_wl("", "measured_requests: 100000000"), r"workload.measured_requests: .*less than"),
    (_wl("warmup_requests: 10000000"), r"workload.warmup_requests: .*less than or equal"),
    (_wl("cooldown_s: 99999"), r"workload.cooldown_s: .*less than or equal to 3600"),
    (_wl("arrival: {kind: sweep, over: concurrency, values: [1, 100000]}"),
     r"values must each be at most 4096"),
    (_wl("arrival: {kind: closed_loop, concurrency: 5000}"),
     r"workload.arrival.concurrency: .*less than or equal to 4096"),
    (_wl("arrival: {kind: sweep, over: concurrency, values: [1, 4]}, "
         "peak_active_generations: 8"),
     r"peak_active_generations 8 is the target load, but the closed loop runs at \[1, 4\]"),
    (_wl("arrival: {kind: sweep, over: rate, values: [1, 2]}, duration_s: 5"),
     r"a rate sweep finds the highest sustainable rate"),
    (_wl("slos: [{metric: ttft, percentile: 95, max_s: 2}, {metric: e2e, percentile: 95, "
         "max_s: 1}]"), r"ttft p95 <= 2 s can never bind beside e2e p95 <= 1 s"),
    (_wl("slos: [{metric: itl, percentile: 95, max_s: 0.1}], routes: [{route: "
         "chat_completions, stream: false}]"), r"itl is only measured on streamed responses, but no route"),
    (_wl("slos: [{metric: ttft, percentile: 97, max_s: 2}]"),
     r"workload.slos\[0\].percentile: 97 is not allowed; allowed: 50, 90, 95, 99"),
    (_wl("") + "\nobjective: goodput", r"objective goodput counts requests that meet the SLOs"),
    (_wl("arrival: {kind: closed_loop, concurrency: 4}, peak_active_generations: 4")
     + "\nobjective: latency", r"objective latency is a single stream's time per token"),
    ("workload: missing.yaml", r"cannot read workload file .*missing.yaml"),
    (_wl("") + "\nobjective: speed", r"objective: 'speed' is not allowed; allowed: goodput"),
    ("engines: [vlm]", r"engines\[0\]: 'vlm' is not allowed; allowed: vllm, sglang"),
    ("authorize: [download, everything]", r"authorize\[1\]: 'everything' is not allowed"),
    (_wl("routes: [{route: completions}]"), r"workload.routes \['completions'\] are not among "
                                             r"the required api.routes"),
    ("model: {revision: main}", r"model.revision pins a hub revision: give model.hub_id"),
    ("- a\n- b", r"expected a mapping of request fields"),
    ("objective: [x", r"invalid YAML at line 1"),
    ("budgets: {max_trials: 0}", r"budgets.max_trials: .*greater than or equal to 1"),
    ("dimensions: [weights, kv]", r"dimensions\[1\]: 'kv' is not allowed; allowed: weights, "
                                  r"kv_precision, scheduling"),
    ("dimensions: []", r"dimensions: .*at least 1 item"),
    ("base_overrides: {host: 0.0.0.0}", r"base_overrides: `host` is not a tuning knob"),
    ("budgets: {min_gain: 2}", r"budgets.min_gain: .*less than or equal to 1"),
])
def test_bad_files_say_what_to_change(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        _load(tmp_path, text)


def test_non_utf8_file_is_named_with_the_byte(tmp_path):
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 7: 0xff\)"):
        _load(tmp_path, b"name: a\xff\n")


def test_huge_file_is_refused_before_parsing(tmp_path):
    with pytest.raises(InputError, match="is not a target file"):
        _load(tmp_path, "# " + "x" * (2 << 20))


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read target file"):
        load_request(tmp_path / "nope.yaml")


def test_empty_file_is_the_default_request(tmp_path):
    assert _load(tmp_path, "") == OptimizeRequest()


def test_overrides_go_through_the_same_validation():
    with pytest.raises(InputError, match=r"command line: invalid request:\n  objective"):
        parse_request({"objective": "speed"}, "command line")


def test_a_vague_request_is_one_user_and_interactive_latency():
    w = OptimizeRequest().tuning_workload()
    assert w.objective.value == "latency" and w.target_concurrency == 1
    assert w.target_scenario == "interactive"


def test_slos_make_goodput_the_default_objective(tmp_path):
    r = _load(tmp_path, _wl("slos: [{metric: ttft, percentile: 95, max_s: 2}]"))
    assert r.tuning_workload().objective.value == "goodput"


def test_workload_file_and_inline_traces_resolve_against_the_target_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "lengths.csv").write_text("input_tokens,output_tokens\n12,4\n")
    (tmp_path / "sub" / "w.yaml").write_text(
        "name: f\nlengths_trace: {path: lengths.csv}\nmeasured_requests: 3\n")
    r = load_request(_write(tmp_path / "t1.yaml", "workload: sub/w.yaml\n"))
    assert r.workload.lengths_trace.path == str(tmp_path / "sub" / "lengths.csv")
    r = load_request(_write(tmp_path / "t2.yaml", "workload: {name: i, lengths_trace: "
                            "{path: sub/lengths.csv}, measured_requests: 3}\n"))
    assert r.workload.lengths_trace.path == str(tmp_path / "sub" / "lengths.csv")
    with pytest.raises(InputError, match=r"workload.lengths_trace.path: .*not found"):
        load_request(_write(tmp_path / "t3.yaml", "workload: {name: i, lengths_trace: "
                            "{path: nope.csv}, measured_requests: 3}\n"))


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_the_gates_a_request_will_stop_at():
    from infopt.specs.request import OptimizeRequest

    r = OptimizeRequest(model={"hub_id": "o/m", "download": ["*.gguf"]}, requantize=["Q8_0"],
                        expose={"address": "0.0.0.0"}, authorize=["quantize"])
    assert r.unauthorized_gates() == ["download", "expose"]
    assert OptimizeRequest().unauthorized_gates() == []
    with pytest.raises(ValueError, match="give model.hub_id too"):
        OptimizeRequest(model={"download": ["*.gguf"]})
    with pytest.raises(ValueError, match="give one"):
        OptimizeRequest(model={"hub_id": "o/m", "path": "/x.gguf", "download": ["*.gguf"]})
