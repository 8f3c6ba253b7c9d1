"""Root-error extraction: the first cause, not the last line."""

from __future__ import annotations

from pathlib import Path

from infopt.specs.diagnosis import FailureCategory
from infopt.troubleshoot.diagnose import diagnose_text
from infopt.troubleshoot.rootcause import normalize, root_error

LOCAL = Path(__file__).resolve().parents[1] / "fixtures" / "local_logs"


def test_prefixes_are_stripped():
    assert normalize("(EngineCore_0 pid=4242) ERROR 06-12 08:12:23 [core.py:45] ValueError: x") \
        == "ValueError: x"
    assert normalize("[rank0]: torch.OutOfMemoryError: CUDA out of memory.") == \
        "torch.OutOfMemoryError: CUDA out of memory."
    assert normalize("0.00.191.814 E llama_init_from_model: quantized V cache") == \
        "llama_init_from_model: quantized V cache"


def test_interleaved_workers_first_cause_wins_over_wrapper():
    log = "\n".join([
        "(VllmWorkerProcess pid=7) INFO 01-01 00:00:00 [worker.py:1] loading",
        "(VllmWorkerProcess pid=7) ERROR 01-01 00:00:01 [worker.py:2] Traceback (most recent call last):",
        "(APIServer pid=3) INFO 01-01 00:00:01 [api.py:9] waiting",
        "(VllmWorkerProcess pid=7) ERROR 01-01 00:00:01 [worker.py:2]   File \"x.py\", line 1, in f",
        "(VllmWorkerProcess pid=7) ERROR 01-01 00:00:01 [worker.py:2] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "",
        "The above exception was the direct cause of the following exception:",
        "Traceback (most recent call last):",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ])
    root, idx, ctx = root_error(log)
    assert root.startswith("torch.OutOfMemoryError: CUDA out of memory") and idx == 4
    assert diagnose_text(log, "vllm").category is FailureCategory.OOM


def test_real_vllm_kv_insufficient_log():
    d = diagnose_text((LOCAL / "vllm032_cpu_kv_insufficient.log").read_text(), "vllm")
    assert d.root_error.startswith("ValueError: To serve at least one request with the model's "
                                   "max seq len (100000)")
    assert d.category is FailureCategory.KV_INSUFFICIENT
    # The last line is the generic wrapper; it must not be taken for the cause.
    assert "Engine core initialization failed" not in d.root_error


def test_real_vllm_max_model_len_log_includes_pydantic_detail():
    d = diagnose_text((LOCAL / "vllm032_cpu_max_model_len_above_native.log").read_text(), "vllm")
    assert "User-specified max_model_len (100000) is greater than the derived" in d.root_error
    assert d.category is FailureCategory.CONTEXT_TOO_LONG


def test_real_vllm_unrecognized_argument_log():
    d = diagnose_text((LOCAL / "vllm032_cpu_unrecognized_argument.log").read_text(), "vllm")
    assert "unrecognized arguments: --max-modl-len" in d.root_error
    assert d.category is FailureCategory.BAD_ARGUMENT


def test_llamacpp_e_level_line_is_the_root():
    log = "\n".join([
        "0.00.005.632 W srv  llama_server: security: no API key is set",
        "0.00.191.814 E llama_init_from_model: quantized V cache requires flash_attn to be enabled",
        "0.00.208.872 E common_fit_params: encountered an error while trying to fit params",
        "0.00.300.000 E srv    load_model: failed to load model",
        "0.00.300.100 E srv   llama_server: exiting due to model loading error",
    ])
    assert root_error(log)[0] == \
        "llama_init_from_model: quantized V cache requires flash_attn to be enabled"


def test_signal_crash_is_found():
    log = "loading model\nllama_context: n_ctx = 4096\nSegmentation fault (core dumped)\n"
    d = diagnose_text(log, "llamacpp")
    assert d.category is FailureCategory.CRASH and "Segmentation fault" in d.root_error


def test_empty_log():
    assert root_error("") == ("", None, [])


def test_real_vllm_cpu_node_memory_log_the_warning_before_it_is_not_the_cause():
    """vLLM's defaults on this host: a WARNING about the fd ulimit ("failed ... with error")
    comes first; the worker's ValueError (its process name has a hyphen) is the cause, and the
    catalog names the remedy: an explicit CPU KV space."""
    d = diagnose_text((LOCAL / "vllm032_cpu_node_memory_below_utilization.log").read_text(),
                      "vllm")
    assert d.root_error.startswith("ValueError: Available memory on node 0 (9.52/11.46 GiB)")
    assert "ulimit" not in d.root_error
    assert d.category is FailureCategory.OOM
    first = next(r for r in d.remedies if r.preserves_contract and r.knob_changes)
    assert first.knob_changes == {"cpu_kvcache_space_gib": 4}
    assert normalize("(VllmWorker-0 pid=7) ERROR 12-02 02:56:00 [multiproc_executor.py:953] "
                     "ValueError: x") == "ValueError: x"
