"""A catalog of bad input files, each run through the real CLI in-process (issue 17).

Every case writes one broken file (a target, a workload, a length trace or a model directory)
and runs the command that reads it: `optimize --target`, `bench --workload` (against a closed
port: the file is refused before any request) or `inspect`. Each must end the same way: exit 2,
one paragraph starting "infopt:" that names the file or field and what to change, no traceback,
nothing written into the runs or output folder. Files are small and written per test; read
from the repository are only the SmolLM2 config.json under tests/fixtures/hub and
examples/workloads/chat.yaml.

Below the catalog: prompts longer than the model's context are refused with their lengths, and
an HF directory on a CPU-only host is not routed to llama.cpp.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infopt.cli import app
from tests.fixture_data import FIXTURES, require

SMOL = FIXTURES / "hub" / "HuggingFaceTB__SmolLM2-135M-Instruct"

# A valid workload; each case below breaks one thing about it.
W = ("name: w\ninput_lengths: {kind: fixed, tokens: 8}\n"
     "output_lengths: {kind: fixed, tokens: 8}\nmeasured_requests: 4\n")
TRACE_W = "name: w\nlengths_trace: {path: t.jsonl}\nmeasured_requests: 4\n"
OPEN_W = ("name: w\narrival: {kind: poisson, rate_per_s: 2}\n"
          "input_lengths: {kind: fixed, tokens: 8}\noutput_lengths: {kind: fixed, tokens: 8}\n"
          "duration_s: 10\n")


def _bomb(levels: int = 9) -> str:
    """'Billion laughs': each level names the previous one ten times (10^levels leaves)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def _config(**changes) -> str:
    cfg = json.loads(require(SMOL / "config.json").read_text())
    cfg.update(changes)
    return json.dumps(cfg)


def _model(config: str | bytes | None = None, **extra: str | bytes) -> dict[str, str | bytes]:
    """An HF model directory m/ (config.json plus the named side files)."""
    files = {f"m/{k.replace('__', '.')}": v for k, v in extra.items()}
    if config is not None:
        files["m/config.json"] = config
    return files


TARGET = ["optimize", "--target", "{d}/t.yaml"]
BENCH = ["bench", "--workload", "{d}/w.yaml", "--endpoint", "http://127.0.0.1:9", "--model", "m"]
INSPECT = ["inspect", "{d}/m"]


def _trace(text: str | bytes, expect: str):
    return ({"w.yaml": TRACE_W, "t.jsonl": text}, BENCH,
            [r"w\.yaml: lengths_trace\.path: \S*t\.jsonl", expect])


# id -> (files, argv, patterns the message must match). {d} is the case's folder.
CASES = {
    # --- encodings ---------------------------------------------------------------------------
    "target-latin1": ({"t.yaml": "name: caf\xe9\n".encode("latin-1")}, TARGET,
                      [r"t\.yaml: not UTF-8", "save the file as UTF-8"]),
    "workload-latin1": ({"w.yaml": (W + "description: caf\xe9\n").encode("latin-1")}, BENCH,
                        [r"w\.yaml: not UTF-8", "save the file as UTF-8"]),
    "target-utf16-bom": ({"t.yaml": "name: demo\n".encode("utf-16")}, TARGET,
                         [r"t\.yaml: .*UTF-16", "save the file as UTF-8"]),
    "workload-utf16-bom": ({"w.yaml": W.encode("utf-16")}, BENCH,
                           [r"w\.yaml: .*UTF-16", "save the file as UTF-8"]),
    "target-binary": ({"t.yaml": bytes(range(256)) * 4}, TARGET, [r"t\.yaml: not UTF-8"]),
    "workload-binary": ({"w.yaml": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00"}, BENCH,
                        [r"w\.yaml: not UTF-8"]),
    "target-nul-bytes": ({"t.yaml": b"name: demo\x00\x00\n"}, TARGET,
                         [r"t\.yaml: invalid YAML at line 1", "special characters"]),
    # --- .inf / .nan in workload fields ---------------------------------------------------------
    "workload-duration-inf": ({"w.yaml": OPEN_W.replace("duration_s: 10", "duration_s: .inf")},
                              BENCH, [r"w\.yaml: duration_s: \.inf and \.nan", "finite"]),
    "workload-rate-nan": ({"w.yaml": OPEN_W.replace("rate_per_s: 2", "rate_per_s: .nan")},
                          BENCH, [r"arrival\.rate_per_s: \.inf and \.nan"]),
    "workload-route-weight-inf": (
        {"w.yaml": W + "routes: [{route: chat_completions, weight: .inf}]\n"}, BENCH,
        [r"routes\[0\]\.weight: \.inf and \.nan"]),
    "workload-lognormal-p50-nan": (
        {"w.yaml": W.replace("{kind: fixed, tokens: 8}\nout",
                             "{kind: lognormal, p50_tokens: .nan, p95_tokens: 90}\nout")},
        BENCH, [r"input_lengths\.p50_tokens: \.inf and \.nan"]),
    "workload-lognormal-p95-inf": (
        {"w.yaml": W.replace("output_lengths: {kind: fixed, tokens: 8}",
                             "output_lengths: {kind: lognormal, p50_tokens: 9, "
                             "p95_tokens: .inf}")},
        BENCH, [r"output_lengths\.p95_tokens: \.inf and \.nan"]),
    "target-workload-file-inf": (
        {"t.yaml": "workload: w.yaml\n", "w.yaml": W + "cooldown_s: -.inf\n"}, TARGET,
        [r"w\.yaml: cooldown_s: \.inf and \.nan"]),
    # --- YAML structure ------------------------------------------------------------------------
    "target-alias-bomb": ({"t.yaml": _bomb()}, TARGET,
                          [r"t\.yaml: .*aliases", "write the values out"]),
    "workload-alias-bomb": ({"w.yaml": W + _bomb()}, BENCH, [r"w\.yaml: .*aliases"]),
    "workload-recursive-alias": ({"w.yaml": W + "routes: &r [*r]\n"}, BENCH,
                                 [r"w\.yaml: .*refers to itself"]),
    "target-deep-nesting": ({"t.yaml": "[" * 5000 + "]" * 5000}, TARGET,
                            [r"t\.yaml: .*nested.*deep"]),
    "target-github-url-not-http": ({"t.yaml": "github_url: ftp://x\n"}, TARGET,
                                   [r"github_url: 'ftp://x' is not an http\(s\) URL"]),
    "target-hub-endpoint-no-scheme": ({"t.yaml": "model: {hub_endpoint: 'localhost:80'}\n"},
                                      TARGET, [r"model\.hub_endpoint: 'localhost:80' is not an "
                                               r"http\(s\) URL"]),
    "target-duplicate-top": ({"t.yaml": "name: a\nseed: 1\nname: b\n"}, TARGET,
                             [r"t\.yaml: invalid YAML at line 3", r"duplicate key 'name' "
                              r"\(first at line 1\)"]),
    "target-duplicate-nested": ({"t.yaml": "budgets:\n  repeats: 2\n  repeats: 3\n"}, TARGET,
                                [r"line 3", r"duplicate key 'repeats'"]),
    "workload-duplicate-top": ({"w.yaml": W + "measured_requests: 9\n"}, BENCH,
                               [r"w\.yaml: invalid YAML at line 5",
                                r"duplicate key 'measured_requests' \(first at line 4\)"]),
    "workload-duplicate-nested": ({"w.yaml": W + "arrival: {kind: closed_loop, kind: sweep}\n"},
                                  BENCH, [r"w\.yaml: invalid YAML at line 5",
                                          r"duplicate key 'kind'"]),
    "target-list-as-key": ({"t.yaml": "budgets: {[repeats]: 3}\n"}, TARGET,
                           [r"t\.yaml: invalid YAML at line 1", r"a key must be a name, got a list"]),
    "workload-empty": ({"w.yaml": "# nothing yet\n"}, BENCH, [r"w\.yaml: the file is empty"]),
    "workload-not-a-mapping": ({"w.yaml": "- name: w\n"}, BENCH,
                               [r"w\.yaml: expected a mapping", "got list"]),
    # --- unbounded sizes ----------------------------------------------------------------------
    "workload-fixed-tokens-huge": ({"w.yaml": W.replace("tokens: 8}\nout",
                                                        "tokens: 1000000000000}\nout")},
                                   BENCH, [r"input_lengths\.tokens: .*less than or equal to "
                                           r"10000000"]),
    "workload-lognormal-p95-huge": (
        {"w.yaml": W.replace("{kind: fixed, tokens: 8}\nout",
                             "{kind: lognormal, p50_tokens: 10, p95_tokens: 1e300}\nout")},
        BENCH, [r"input_lengths\.p95_tokens: .*less than or equal to 10000000"]),
    "workload-uniform-huge": (
        {"w.yaml": W.replace("{kind: fixed, tokens: 8}\nout",
                             "{kind: uniform, min_tokens: 1, max_tokens: 99999999999}\nout")},
        BENCH, [r"input_lengths\.max_tokens: .*less than or equal to 10000000"]),
    "workload-prefix-huge": ({"w.yaml": W + "prefix: {reuse_ratio: 0.5, "
                                            "shared_prefix_tokens: 100000000000}\n"}, BENCH,
                             [r"prefix\.shared_prefix_tokens: .*less than or equal"]),
    "workload-prefix-groups-huge": ({"w.yaml": W + "prefix: {prefix_groups: 10000000000}\n"},
                                    BENCH, [r"prefix\.prefix_groups: .*less than or equal"]),
    "workload-route-weight-huge": (
        {"w.yaml": W + "routes: [{route: completions, weight: 1e308}, "
                       "{route: chat_completions, weight: 1e308}]\n"}, BENCH,
        [r"routes\[0\]\.weight: .*less than or equal to 1000000"]),
    "workload-warmup-huge": ({"w.yaml": W + "warmup_requests: 1000000000\n"}, BENCH,
                             [r"warmup_requests: .*less than or equal to 100000"]),
    "workload-measured-huge": ({"w.yaml": W.replace("measured_requests: 4",
                                                    "measured_requests: 1000000000")}, BENCH,
                               [r"measured_requests: .*less than or equal to 1000000"]),
    "workload-concurrency-huge": ({"w.yaml": W + "arrival: {kind: closed_loop, "
                                                 "concurrency: 100000}\n"}, BENCH,
                                  [r"arrival\.concurrency: .*less than or equal to 4096"]),
    "workload-duration-huge": ({"w.yaml": OPEN_W.replace("duration_s: 10", "duration_s: 1e12")},
                               BENCH, [r"duration_s: .*less than or equal to 604800"]),
    # --- JSONL length traces -------------------------------------------------------------------
    "trace-boolean": _trace('{"input_tokens": true, "output_tokens": 8}\n',
                            r"line 1: input_tokens must be a whole number >= 1, got True"),
    "trace-string": _trace('{"input_tokens": "12", "output_tokens": 8}\n',
                           r"line 1: input_tokens must be a whole number >= 1, got '12'"),
    "trace-negative": _trace('{"input_tokens": 4, "output_tokens": 8}\n'
                             '{"input_tokens": -4, "output_tokens": 8}\n',
                             r"line 2: input_tokens .* got -4"),
    "trace-zero": _trace('{"input_tokens": 4, "output_tokens": 0}\n',
                         r"line 1: output_tokens .* got 0"),
    "trace-fraction": _trace('{"input_tokens": 12.5, "output_tokens": 8}\n',
                             r"line 1: input_tokens .* got 12\.5"),
    "trace-nan": _trace('{"input_tokens": NaN, "output_tokens": 8}\n',
                        r"line 1: input_tokens .* got nan"),
    "trace-infinity": _trace('{"input_tokens": Infinity, "output_tokens": 8}\n',
                             r"line 1: input_tokens .* got inf"),
    "trace-huge": _trace('{"input_tokens": 1e30, "output_tokens": 8}\n',
                         r"line 1: input_tokens .*at most 10000000"),
    "trace-missing-field": _trace('{"input_tokens": 4}\n',
                                  r"line 1: output_tokens must be .* the row has no output_tokens"),
    "trace-empty": _trace("", r"the trace has no rows"),
    "trace-garbage-after-blank": _trace('{"input_tokens": 4, "output_tokens": 8}\n\nhello\n',
                                        r"line 3: not JSON"),
    "trace-array-line": _trace("[4, 8]\n", r"line 1: expected a JSON object"),
    "trace-latin1": _trace('{"input_tokens": 4, "output_tokens": 8, "n": "caf\xe9"}\n'
                           .encode("latin-1"), r"not UTF-8"),
    # --- HF model directories and GGUF files -----------------------------------------------------
    "model-heads-string": (_model(_config(num_attention_heads="9")), INSPECT,
                           [r"config\.json: num_attention_heads must be a whole number >= 1, "
                            r"got '9'"]),
    "model-heads-zero": (_model(_config(num_attention_heads=0)), INSPECT,
                         [r"config\.json: num_attention_heads .* got 0"]),
    "model-kv-heads-string-plan": (_model(_config(num_key_value_heads="3")),
                                   ["plan", "--model", "{d}/m", "--gpu", "H100 SXM"],
                                   [r"config\.json: num_key_value_heads .* got '3' \(a JSON "
                                    r"string\); write the number without quotes"]),
    "model-layers-negative": (_model(_config(num_hidden_layers=-2)), INSPECT,
                              [r"config\.json: num_hidden_layers .* got -2"]),
    "model-layers-boolean": (_model(_config(num_hidden_layers=True)), INSPECT,
                             [r"config\.json: num_hidden_layers .* got True"]),
    "model-hidden-not-divisible": (_model(_config(hidden_size=577, head_dim=None)), INSPECT,
                                   [r"config\.json: hidden_size 577 is not divisible by "
                                    r"num_attention_heads 9"]),
    "model-config-not-json": (_model("{ not json"), INSPECT,
                              [r"config\.json: not JSON \(line 1"]),
    "model-config-list": (_model("[1, 2]"), INSPECT,
                          [r"config\.json: expected a JSON object, got a list"]),
    "model-config-latin1": (_model('{"model_type": "caf\xe9"}'.encode("latin-1")), INSPECT,
                            [r"config\.json: not UTF-8"]),
    "model-tokenizer-config-not-json": (_model(_config(), tokenizer_config__json="{,}"), INSPECT,
                                        [r"tokenizer_config\.json: not JSON"]),
    "model-chat-template-number": (_model(_config(), tokenizer_config__json='{"chat_template": '
                                                                           '5}'),
                                   INSPECT, [r"tokenizer_config\.json: chat_template must be"]),
    "model-quant-config-list": (_model(_config(), hf_quant_config__json="[]"), INSPECT,
                                [r"hf_quant_config\.json: expected a JSON object"]),
    "model-empty-dir": ({"m/.keep": ""}, INSPECT, [r"has no config\.json"]),
    "model-empty-path-inspect": ({}, ["inspect", ""], [r"empty model path"]),
    "model-empty-path-optimize": ({}, ["optimize", "--model", ""],
                                  [r"model\.path: empty", "leave it out"]),
    "model-gguf-truncated": ({"m.gguf": b"GGUF\x03\x00\x00\x00\x05"},
                             ["inspect", "{d}/m.gguf"],
                             [r"m\.gguf is not a readable GGUF file"]),
    "model-gguf-text": ({"m.gguf": "hello, not a model\n"}, ["optimize", "--model", "{d}/m.gguf"],
                        [r"m\.gguf is not a readable GGUF file"]),
}


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Prefect and infopt write only under tmp_path."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    monkeypatch.setenv("INFOPT_RUNS_DIR", str(tmp_path / "runs-env"))
    monkeypatch.setenv("INFOPT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # a relative path in a file resolves here, not in the repo
    return tmp_path


def _run(tmp_path: Path, files: dict[str, str | bytes], argv: list[str]):
    d = tmp_path / "in"
    for name, content in files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    args = [a.replace("{d}", str(d)) for a in argv]
    if args[0] == "optimize":
        args += ["--runs-dir", str(tmp_path / "runs")]
    if args[0] == "bench":
        args += ["--out", str(tmp_path / "out")]
    return CliRunner().invoke(app, args)


def _assert_refused(result, tmp_path: Path, patterns: list[str]) -> None:
    err = result.stderr.strip()
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert err.startswith("infopt: ") and "\n\n" not in err, err  # one paragraph
    assert result.stdout.strip() == "", result.stdout  # the message is the only output
    for pattern in patterns:
        assert re.search(pattern, err, re.S), f"{pattern!r} not in:\n{err}"
    for folder in ("runs", "out", "runs-env"):  # nothing written for a refused input
        assert not (tmp_path / folder).exists() or not any((tmp_path / folder).iterdir())


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_bad_input_file_is_one_paragraph_and_exit_2(case, env):
    files, argv, patterns = CASES[case]
    _assert_refused(_run(env, files, argv), env, patterns)


@pytest.mark.timeout(120)  # expanded, it would not end: a hang fails here, not a clock
def test_the_alias_bomb_is_refused_without_expanding_it(env):
    """10^12 leaves if expanded: refused from the composed graph, before any walk of it."""
    tracemalloc.start()
    result = _run(env, {"t.yaml": _bomb(12)}, TARGET)
    peak_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    _assert_refused(result, env, [r"aliases"])
    assert peak_bytes < 64 << 20, peak_bytes


def test_anchors_that_expand_small_still_load(env):
    """The node cap refuses blow-ups, not anchors: a workload reusing one mapping loads."""
    from infopt.specs.traffic_file import load_traffic

    p = env / "w.yaml"
    p.write_text("name: w\ninput_lengths: &l {kind: fixed, tokens: 8}\noutput_lengths: *l\n"
                 "measured_requests: 4\n")
    assert load_traffic(p).output_lengths.tokens == 8


# --- prompts longer than the model's context: refused, not clipped --------------------------


def _traffic(tmp_path: Path, text: str):
    from infopt.specs.traffic_file import load_traffic

    (tmp_path / "w.yaml").write_text(text)
    return load_traffic(tmp_path / "w.yaml")


def test_a_workload_longer_than_the_context_is_refused_with_its_lengths(tmp_path):
    from infopt.specs.base import InputError
    from infopt.specs.workload import check_fits_context

    long_in = _traffic(tmp_path, W.replace("tokens: 8}\nout", "tokens: 8000}\nout")
                       .replace("tokens: 8}\nmeas", "tokens: 500}\nmeas"))
    check_fits_context(long_in, context_tokens=8500, max_input_tokens=8192)  # fits
    with pytest.raises(InputError, match=r"8,000 prompt \+ 500 output = 8,500 tokens \(input_"
                                         r"lengths fixed; output_lengths fixed\), more than the "
                                         r"8,192-token context of SmolLM2"):
        check_fits_context(long_in, context_tokens=8192, what="SmolLM2")
    with pytest.raises(InputError, match=r"prompts up to 8,000 tokens .* max_input_tokens 4,096"):
        check_fits_context(long_in, max_input_tokens=4096)
    prefixed = _traffic(tmp_path, W + "prefix: {reuse_ratio: 0.5, shared_prefix_tokens: 9000}\n")
    with pytest.raises(InputError, match=r"9,008 tokens \(input_lengths fixed, with the "
                                         r"9,000-token shared prefix\)"):
        check_fits_context(prefixed, max_input_tokens=8192)
    (tmp_path / "t.jsonl").write_text('{"input_tokens": 10, "output_tokens": 9000}\n'
                                      '{"input_tokens": 5000, "output_tokens": 10}\n')
    paired = _traffic(tmp_path, TRACE_W)  # the longest pair, not the two longest columns
    check_fits_context(paired, context_tokens=9010)
    with pytest.raises(InputError, match=r"the longest row of lengths_trace"):
        check_fits_context(paired, context_tokens=9009)
    chat = _traffic(tmp_path, (Path(__file__).parents[2] / "examples" / "workloads" /
                               "chat.yaml").read_text())  # an uncapped log-normal: its p95
    check_fits_context(chat, context_tokens=8192, max_input_tokens=8192)
    with pytest.raises(InputError, match=r"2,048 prompt \+ 4,096 output .*p95_tokens"):
        check_fits_context(chat, context_tokens=6000)


def test_bench_refuses_prompts_it_would_clip(env):
    files = {"w.yaml": W.replace("tokens: 8}\nout", "tokens: 9000}\nout")}
    _assert_refused(_run(env, files, BENCH), env,
                    [r"prompts up to 9,000 tokens .* max_input_tokens 8,192"])


# --- routing: an HF directory on a CPU-only host ----------------------------------------------


def _cpu_host():
    from infopt.specs.hardware import HardwareInventory, HostInfo

    host = HostInfo(cpu_model="test CPU", architecture="x86_64", logical_cpus=2,
                    physical_cores=2, usable_cpus=2, cgroup_cpu_limit=None,
                    isa_features=["avx2"], ram_total_bytes=8 << 30,
                    ram_available_bytes=4 << 30, os="Linux", kernel="6.1")
    return HardwareInventory(host=host, gpus=[], gpu_probe="NVML: no NVIDIA driver")


def test_an_hf_directory_on_a_cpu_host_is_not_routed_to_llamacpp():
    """llama.cpp loads GGUF only and infopt has no HF -> GGUF conversion: vLLM's CPU build
    serves the HF directory, and llama.cpp comes in only through a GGUF of the same model."""
    from infopt.engines import serves
    from infopt.engines.routing import comparator_for, route, select_available
    from infopt.model.profile import profile_model
    from infopt.specs.model import ModelFormat
    from infopt.specs.serving import EngineName

    hf = profile_model(str(require(SMOL)))
    assert hf.format is ModelFormat.HF
    routes = route(_cpu_host(), hf, 4)
    assert [r.engine for r in routes] == [EngineName.VLLM]
    assert "not llama.cpp on this directory, which loads GGUF only" in routes[0].reason
    assert "NVML: no NVIDIA driver" in routes[0].reason
    chosen, skipped = select_available(routes, None, lambda n: None,
                                       lambda n: serves(n, hf.format))
    assert chosen is EngineName.VLLM and skipped == []
    # With a GGUF of the model beside it, llama.cpp is its comparator through the GGUF route.
    gguf_routes = route(_cpu_host(), hf.model_copy(update={"format": ModelFormat.GGUF}), 4)
    assert [r.engine for r in gguf_routes] == [EngineName.LLAMACPP]
    comp, _ = comparator_for(EngineName.VLLM, [(ModelFormat.HF, routes),
                                               (ModelFormat.GGUF, gguf_routes)],
                             None, lambda n: None, serves)
    assert comp == (EngineName.LLAMACPP, ModelFormat.GGUF)
