"""Every vLLM command infopt builds for a GPU host, parsed by the argument parser of the vLLM
package installed here (issue 32): no GPU is needed to learn that a flag is misspelt, a value
is out of range or two flags conflict, and that is exactly what would fail first on a user's
8-GPU node. The configurations are the vLLM ladder's layout candidates on the recorded 8x H100
inventory for a dense 70B model and two MoE models (the EP family), plus the knobs the other
rules set; each argv goes through vLLM 0.32's `make_arg_parser` and
`validate_parsed_serve_args` (vllm/entrypoints/launchers/cli_args.py), as `vllm serve` would,
in one subprocess of the vLLM environment. A misspelt flag planted among them must be refused,
so the check can fail.

The same commands go through vLLM 0.33's parser too (issue 46): 0.33's Python sources from its
wheel (`make vllm-args`, no kernels) over the CPU environment's torch, where the parser moved to
vllm/entrypoints/common/cli_args.py; VLLM_TARGET_DEVICE=cpu lets its DeviceConfig resolve a
platform without a GPU. The adapter's checked_versions names both."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from infopt.costmodel.layouts import candidate_layouts
from infopt.engines.launch import ServingTarget
from infopt.engines.vllm import adapter as vllm
from infopt.engines.vllm.rules import LAYOUT
from infopt.specs.serving import with_knobs
from tests.unit.test_layouts import model

pytestmark = [pytest.mark.integration, pytest.mark.vllm, pytest.mark.timeout(300)]

# Run in the vLLM environment: parse each argv (after `-m MODULE`) as the server's main()
# does, print one verdict per argv.
CHECK = r"""
import json, sys
import vllm
try:  # 0.33 moved the serve parser
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
except ImportError:  # 0.32
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.utils.argparse_utils import FlexibleArgumentParser

out = []
for argv in json.load(sys.stdin):
    parser = make_arg_parser(FlexibleArgumentParser(description="vLLM server"))
    try:
        args = parser.parse_args(argv)
        validate_parsed_serve_args(args)
        out.append({"ok": True, "tp": args.tensor_parallel_size,
                    "pp": args.pipeline_parallel_size, "dp": args.data_parallel_size,
                    "ep": bool(args.enable_expert_parallel)})
    except SystemExit as e:  # argparse's refusal: its message went to stderr
        out.append({"ok": False, "why": f"argparse exit {e.code}"})
    except Exception as e:
        out.append({"ok": False, "why": f"{type(e).__name__}: {e}"})
# Every spelling the parser accepts, hidden ones too (0.33 keeps --no-enable-x for
# --disable-x, registered but out of help: argparse_utils.py EnableDisableAction).
options = sorted(make_arg_parser(FlexibleArgumentParser())._option_string_actions)
print("RESULT " + json.dumps({"version": vllm.__version__, "verdicts": out,
                              "options": options}))
"""


def _configs() -> list[tuple[str, object]]:
    out = []
    for name in ("meta-llama__Meta-Llama-3.1-70B", "mistralai__Mixtral-8x7B-v0.1",
                 "Qwen__Qwen3-30B-A3B"):
        m = model(name)
        t = ServingTarget(model_path=f"/models/{name}", served_model_name="m",
                          native_context_tokens=m.native_context_tokens, usable_cpus=32)
        base = vllm.control_config(t)
        for layout, _ in candidate_layouts(m, 8):
            changes = LAYOUT.changes_from(base, layout)
            assert not isinstance(changes, str), changes
            out.append((f"{name} {layout.label}", with_knobs(base, changes)))
        # What the other rules set (infopt.engines.vllm.rules), on a TP=4 incumbent.
        tp4 = with_knobs(base, {"tensor_parallel_size": 4})
        for knobs in ({"kv_cache_dtype": "fp8"}, {"max_num_seqs": 64},
                      {"max_num_batched_tokens": 8192}, {"enable_prefix_caching": False},
                      {"enforce_eager": True}, {"gpu_memory_utilization": 0.85},
                      {"kv_offloading_size_gib": 64.0}, {"speculative_method": "ngram", "num_speculative_tokens": 4},
                      {"speculative_method": "mtp", "num_speculative_tokens": 1},
                      {"speculative_method": "eagle3", "num_speculative_tokens": 3,
                       "speculative_model": "/models/eagle3-head"},
                      {"enable_auto_tool_choice": True, "tool_call_parser": "hermes"}):
            out.append((f"{name} TP=4 {knobs}", with_knobs(tp4, knobs)))
    return out


def _argv(cfg) -> list[str]:
    launch = vllm.build_launch(cfg, "python", 8000)
    assert launch.argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    return launch.argv[3:]


@pytest.mark.parametrize("release", ["0.32", "0.33"])
def test_every_gpu_command_parses_with_vllms_own_parser(release, vllm_python, vllm_args_033):
    configs = _configs()
    argvs = [_argv(cfg) for _, cfg in configs]
    planted = argvs[0] + ["--tensor-paralel-size", "2"]  # misspelt: must be refused
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
    if release == "0.33":
        env["PYTHONPATH"] = str(vllm_args_033)  # its sources ahead of the installed 0.32
    out = subprocess.run([str(vllm_python), "-c", CHECK], input=json.dumps([*argvs, planted]),
                         capture_output=True, text=True, timeout=240, env=env)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, out.stderr[-3000:]
    result = json.loads(line[len("RESULT "):])
    assert result["version"].startswith(release)  # that release's parser judged them
    assert vllm.ADAPTER.checked_versions and release in vllm.ADAPTER.checked_versions.versions
    # The stand-in (tests/sim/vllm_gpu.py) knows no flag this release's parser lacks.
    from tests.sim import vllm_gpu as sim
    known = {o for a in sim.parser()._actions for o in a.option_strings} - {"-h", "--help"}
    assert known - set(result["options"]) == set(), release
    *verdicts, refused = result["verdicts"]
    assert refused["ok"] is False  # the check can fail
    bad = [(label, v["why"]) for (label, _), v in zip(configs, verdicts, strict=True)
           if not v["ok"]]
    assert bad == [], bad
    # vLLM read the layout infopt meant: TP x PP x DP as configured, EP where switched on.
    for (label, cfg), v in zip(configs, verdicts, strict=True):
        assert (v["tp"], v["pp"], v["dp"], v["ep"]) == (
            cfg.tensor_parallel_size or 1, cfg.pipeline_parallel_size or 1,
            cfg.data_parallel_size or 1, cfg.enable_expert_parallel), label
    assert any(v["ep"] for v in verdicts) and any(v["pp"] > 1 for v in verdicts)
    assert any(v["dp"] > 1 for v in verdicts)
