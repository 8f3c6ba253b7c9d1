"""The kernel path read from real startup logs (tests/fixtures/local_logs/): each adapter's
patterns find its engine's own lines, and what the version selects silently is said."""

from __future__ import annotations

from infopt.engines import adapter_for
from infopt.engines.kernel_log import read_kernel_lines, unlogged_notes
from infopt.report.kernel_text import kernel_lines
from infopt.specs.results import KernelPath
from tests.fixture_data import FIXTURES

LOGS = FIXTURES / "local_logs"


def _read(engine: str, name: str):
    spec = adapter_for(engine).kernel_log
    lines = read_kernel_lines((LOGS / name).read_text(), spec)
    return spec, lines, {ln.aspect: [x.line for x in lines if x.aspect == ln.aspect]
                         for ln in lines}


def test_llamacpp_at_verbosity_4_says_its_isa_weights_buffer_and_flash_attention():
    spec, lines, by = _read("llamacpp", "llamacpp0336_cpu_lv4_startup.log")
    assert spec.knobs == {"log_verbosity": 4}  # it prints none of this at its default level
    assert "AVX2 = 1" in by["CPU backend"][0] and "REPACK = 1" in by["CPU backend"][0]
    # Q4_1 on AVX2: the mmap-ed file as is, not a CPU_REPACK buffer.
    assert by["weights buffer"] == ["load_tensors:   CPU_Mapped model buffer size =    92.10 MiB"]
    assert by["flash attention"] == ["llama_context: flash_attn            = auto",
                                     "resolve_fused_ops: Flash Attention enabled"]
    assert "K (f16)" in by["KV cache"][0] and by["graph"][0].startswith("sched_reserve: graph")
    assert unlogged_notes(lines, spec) == []
    # Log order, each line once.
    assert [ln.aspect for ln in lines][:2] == ["CPU backend", "weights buffer"]


def test_llamacpp_repacks_q4_0_on_this_avx2_cpu_and_says_so():
    _, _, by = _read("llamacpp", "llamacpp0336_cpu_lv4_q4_0_startup.log")
    assert by["weights buffer"] == [
        "load_tensors:   CPU_Mapped model buffer size =    85.30 MiB",
        "load_tensors:   CPU_REPACK model buffer size =    56.95 MiB"]


def test_llamacpp_at_its_default_level_finds_nothing_to_claim():
    spec = adapter_for("llamacpp").kernel_log
    default = "0.00.546.415 I cmn          init: llama threadpool init, n_threads = 2\n"
    assert read_kernel_lines(default, spec) == []


def test_vllm_cpu_says_eager_and_its_kv_cache_and_what_it_does_not_log():
    spec, lines, by = _read("vllm", "vllm032_cpu_eager_startup.log")
    assert spec.knobs == {}  # its INFO level already logs them: the winner's own log is read
    assert by["compilation"] == [
        "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup"]
    assert by["KV cache"] == ["Using LBHNC KV cache layout.",
                              "CPU KV cache size: 46,592 tokens, Maximum concurrency for 4,096 "
                              "tokens per request: 11.38x"]
    assert "backend=gloo" in by["parallel"][0]
    [note] = unlogged_notes(lines, spec)
    assert note.startswith("attention backend: no log line") and "CPU_ATTN" in note


def test_the_report_section_quotes_the_lines_and_the_notes():
    k = KernelPath(engine="llamacpp", log="trials/t-kernel/engine.log", lines=read_kernel_lines(
        (LOGS / "llamacpp0336_cpu_lv4_startup.log").read_text(),
        adapter_for("llamacpp").kernel_log), notes=["read from one start"])
    md = "\n".join(kernel_lines(k))
    assert "From `trials/t-kernel/engine.log`" in md and "| weights buffer | `load_tensors:" in md
    assert "- read from one start" in md
    row = next(line for line in md.splitlines() if line.startswith("| CPU backend |"))
    assert row.replace("\\|", "").count("|") == 3  # its own | are escaped: one row, 2 cells
    assert kernel_lines(None) == []
