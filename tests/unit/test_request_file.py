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
    assert r.model.path is None and r.workload.target_concurrency == 4
    assert "full-context" not in r.scenarios and r.budgets.repeats == 3
    assert "examples/targets/demo.yaml" in (EXAMPLES.parents[1] / "Makefile").read_text()


def _load(tmp_path, text: str | bytes) -> OptimizeRequest:
    p = tmp_path / "t.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return load_request(p)


@pytest.mark.parametrize("text,message", [
    ("workload: {input_tokns: 5}", r"workload.input_tokns: unknown field 'input_tokns'; allowed: name, "
                                   r"input_tokens"),
    ("budgets: {repeats: 3}\nbudgets: {repeats: 4}",
     r"duplicate key .budgets. \(first at line 1\)"),
    ("workload: {cooldown_s: .inf}", r"workload.cooldown_s: .inf and .nan"),
    ("workload: {output_tokens: .nan}", r"workload.output_tokens: .inf and .nan"),
    ("workload: {requests_per_level: -3}", r"workload.requests_per_level: .*greater than or equal"),
    ("workload: {requests_per_level: 100000000}", r"workload.requests_per_level: .*less than"),
    ("workload: {cooldown_s: 99999}", r"workload.cooldown_s: .*less than or equal to 3600"),
    ("workload: {concurrency_levels: [1, 100000], target_concurrency: 1}",
     r"concurrency_levels must each be between 1 and 4096"),
    ("engines: [vlm]", r"engines\[0\]: 'vlm' is not allowed; allowed: vllm, sglang"),
    ("authorize: [download, everything]", r"authorize\[1\]: 'everything' is not allowed"),
    ("workload: {route: completions}", r"workload.route 'completions' is not among the "
                                       r"required api.routes"),
    ("model: {revision: main}", r"model.revision pins a hub revision: give model.hub_id"),
    ("- a\n- b", r"expected a mapping of request fields"),
    ("workload: {objective: [x", r"invalid YAML at line 1"),
    ("budgets: {max_trials: 0}", r"budgets.max_trials: .*greater than or equal to 1"),
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
    with pytest.raises(InputError, match=r"command line: invalid request:\n  workload.objective"):
        parse_request({"workload": {"objective": "speed"}}, "command line")
