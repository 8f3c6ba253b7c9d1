"""The winner's kernel path in the domain (infopt.engines.kernel_path; tasks/kernel.py is its
thin task): read from the winner trial's own engine log where the engine logs its kernel
choices at its default level, said "not read" (and why) otherwise."""

from __future__ import annotations

from infopt.engines.kernel_path import kernel_path
from infopt.engines.session import Troubleshooting
from infopt.runs.rundir import trial_dir
from infopt.specs.results import Trial
from infopt.specs.serving import VllmConfig

VLLM_LOG = """INFO 12-06 10:00:00 [cpu.py:120] Using CPU attention backend.
INFO 12-06 10:00:01 [gpu_model_runner.py:2] Enforce eager set, disabling torch.compile and CUDA graphs
INFO 12-06 10:00:02 [kv_cache_utils.py:9] CPU KV cache size: 87,360 tokens
"""


def _winner(key: str) -> Trial:
    return Trial(trial_id="t07", key=key, role="tuning", dimension="scheduling", value="x",
                 repeat=1, config=VllmConfig(model_path="/m", max_model_len=2048),
                 engine=None, benchmark=None, objective_value=1.0)


def test_the_winners_own_log_is_read_and_each_aspect_said(tmp_path):
    log = trial_dir(tmp_path, "t07-abc") / "engine.log"
    log.parent.mkdir(parents=True)
    log.write_text(VLLM_LOG)
    kp = kernel_path(_winner("t07-abc"), str(tmp_path), 10**8, Troubleshooting())
    assert kp.log == "trials/t07-abc/engine.log"
    aspects = {line.aspect for line in kp.lines}
    assert {"compilation", "KV cache"} <= aspects
    assert any("read from trial t07" in n for n in kp.notes)


def test_a_missing_log_is_not_read_and_says_so(tmp_path):
    kp = kernel_path(_winner("t07-none"), str(tmp_path), 10**8, Troubleshooting())
    assert kp.log is None and kp.lines == [] and "is missing" in kp.notes[0]
