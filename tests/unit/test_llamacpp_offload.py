"""llama.cpp beyond device memory (issue 49), first step: the offload knobs as flags and the
offload achieved read from the engine's own load log (lines recorded from upstream reports),
not assumed from what was asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.serving import LlamaCppConfig, config_identity

LOGS = Path(__file__).parents[1] / "fixtures" / "engine_logs"


def _cfg(**kw) -> LlamaCppConfig:
    return LlamaCppConfig(model_path="/m.gguf", ctx_per_slot_tokens=4096, **kw)


def test_the_offload_knobs_become_llama_servers_flags():
    argv = llamacpp.build_launch(_cfg(n_gpu_layers=20, n_cpu_moe=4, split_mode="layer",
                                      tensor_split=[3, 1]), "llama-server", 8000).argv
    tail = argv[argv.index("-ngl"):]
    assert tail == ["-ngl", "20", "-ncmoe", "4", "-sm", "layer", "-ts", "3,1"]
    assert "-ngl" in llamacpp.build_launch(_cfg(n_gpu_layers="all"), "x", 1).argv
    plain = llamacpp.build_launch(_cfg(), "x", 1).argv
    assert not {"-ngl", "-ncmoe", "-sm", "-ts"} & set(plain)  # the build's defaults


def test_bad_offload_values_are_refused_where_the_config_is_read():
    for bad in ({"n_gpu_layers": -1}, {"n_gpu_layers": "most"}, {"tensor_split": []},
                {"tensor_split": [0, 0]}, {"split_mode": "rows"}):
        with pytest.raises(ValidationError):
            _cfg(**bad)


def test_unset_offload_knobs_leave_a_configurations_identity_as_it_was():
    # Trial keys and kept results made before the knobs existed stay valid.
    assert not {"n_gpu_layers", "n_cpu_moe", "split_mode", "tensor_split"} & set(
        config_identity(_cfg()))
    assert config_identity(_cfg(n_gpu_layers=10))["n_gpu_layers"] == 10


def test_the_offload_achieved_is_read_from_the_load_log():
    full = llamacpp.offload_from_log((LOGS / "llamacpp_offload_full_two_gpus.log").read_text())
    assert full is not None and full.full
    assert (full.layers_offloaded, full.layers_total) == (81, 81)
    assert full.model_buffer_bytes == {"CUDA0": int(24277.75 * 2**20),
                                       "CUDA2": int(46151.91 * 2**20),
                                       "CPU_Mapped": int(1064.62 * 2**20)}
    none = llamacpp.offload_from_log(
        (LOGS / "llamacpp_offload_none_older_build.log").read_text())
    assert none is not None and not none.full
    assert (none.layers_offloaded, none.layers_total) == (0, 33)
    assert none.model_buffer_bytes == {"CPU": int(5459.93 * 2**20)}
    assert "offloaded 0/33 layers to GPU" in none.line
    # A CPU build prints no offload line: nothing was offloaded, nothing to read.
    assert llamacpp.offload_from_log(
        "load_tensors:   CPU_Mapped model buffer size =    92.10 MiB\n") is None


def test_a_trial_records_the_offload_its_engine_logged_and_the_report_shows_it():
    from infopt.runs.trial_run import logged_offload

    text = (LOGS / "llamacpp_offload_none_older_build.log").read_text()
    got = logged_offload("llamacpp", text)
    assert got is not None and (got.layers_offloaded, got.layers_total) == (0, 33)
    from types import SimpleNamespace

    from infopt.report.markdown import _offload_lines

    lines = _offload_lines(SimpleNamespace(trials=[SimpleNamespace(trial_id="t01",
                                                                   offload=got)]))
    assert "| t01 | 0/33 (partial) | CPU 5.33 GiB |" in lines
    # A CPU build: nothing offloaded, nothing claimed.
    assert logged_offload("llamacpp", "load_tensors:   CPU_Mapped model buffer size =    "
                          "92.10 MiB\n") is None
    assert logged_offload("vllm", text) is None  # vLLM reports no offload infopt reads
