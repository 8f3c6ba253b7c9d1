"""The kernel a vLLM log names, judged against the support matrix's expected path for the
checkpoint on the device (infopt.engines.kernel_verify), on real upstream GPU logs
(tests/fixtures/kernel_logs, each with its source URL, GPU and version in its header) and the
local vLLM CPU build's own startup log."""

from __future__ import annotations

from pathlib import Path

from infopt.engines.kernel_log import read_kernel_lines
from infopt.engines.kernel_verify import verify
from infopt.engines.vllm.adapter import KERNEL_LOG
from infopt.specs.checkpoint import CheckpointFormat as F
from infopt.specs.checkpoint import DeviceKind, DeviceTarget
from infopt.specs.results import KernelVerdict as V
from infopt.specs.serving import EngineName

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VLLM = EngineName.VLLM


def _cuda(cc: str) -> DeviceTarget:
    return DeviceTarget(kind=DeviceKind.CUDA, compute_capability=cc)


def _judge(name: str, fmt: F, device: DeviceTarget, folder: str = "kernel_logs"):
    lines = read_kernel_lines((FIXTURES / folder / name).read_text(), KERNEL_LOG)
    return verify(VLLM, fmt, device, lines, KERNEL_LOG), lines


def test_fp8_on_ampere_is_the_matrixs_own_weight_only_path():
    """club-3090#347 (vLLM 0.22, RTX A5000 + 3090, SM86): Marlin W8A16 for an FP8
    checkpoint is what the matrix expects below CC 8.9, so it is not flagged; its tier says
    the GEMM runs in 16-bit."""
    f, _ = _judge("vllm_fp8_ampere_marlin.log", F.FP8, _cuda("8.6"))
    assert f.verdict is V.AS_EXPECTED and f.found == ["MarlinFP8ScaledMMLinearKernel"]
    assert "FP8 Marlin weight-only (W8A16) (fallback" in f.expected
    w, _ = _judge("vllm_fp8_ampere_warning.log", F.FP8, _cuda("8.6"))
    assert w.verdict is not V.FALLBACK  # the engine's warning is the matrix's path here


def test_the_same_weight_only_kernel_on_a_hopper_is_flagged_as_a_fallback():
    f, _ = _judge("vllm_fp8_ampere_marlin.log", F.FP8, _cuda("9.0"))
    assert f.verdict is V.FALLBACK and f.flagged
    assert "MarlinFP8ScaledMMLinearKernel is the matrix's FP8 Marlin weight-only" in f.detail
    assert "CUTLASS/DeepGEMM fp8 scaled_mm (W8A8)" in f.detail
    # vLLM's own warning on a GPU that has FP8 tensor cores: a fallback by its own words
    w, _ = _judge("vllm_fp8_ampere_warning.log", F.FP8, _cuda("9.0"))
    assert w.verdict is V.FALLBACK and "does not have native support for FP8" in w.detail


def test_nvfp4_moe_on_marlin_on_a_blackwell_is_flagged():
    """vllm#43507 (vLLM 0.24, RTX 5090 Laptop, SM120): the dense GEMM on CUTLASS NVFP4, the
    MoE on the Marlin weight-only backend with vLLM's own FP4 fallback warning."""
    f, lines = _judge("vllm_nvfp4_sm120_marlin_moe.log", F.MODELOPT_NVFP4, _cuda("12.0"))
    assert f.verdict is V.FALLBACK and f.flagged
    assert f.found == ["CutlassNvFp4LinearKernel", "MARLIN"]
    assert {ln.aspect for ln in lines} >= {"weights GEMM", "MoE backend", "fallback warning"}


def test_a_kernel_the_matrix_places_on_newer_gpus_is_another_path_not_a_pass():
    """vllm#55008 (vLLM 0.29, A100, SM80): CUTLASS FP8 elected where it cannot run natively."""
    f, _ = _judge("vllm_fp8_cutlass_on_a100.log", F.FP8, _cuda("8.0"))
    assert f.verdict is V.OTHER_PATH and f.flagged
    assert "CUDA CC >= 8.9" in f.detail


def test_gptq_on_ampere_runs_marlin_as_expected():
    f, _ = _judge("vllm_gptq_ampere_marlin.log", F.GPTQ, _cuda("8.6"))
    assert f.verdict is V.AS_EXPECTED and set(f.found) == {"MarlinLinearKernel"}


def test_nothing_named_is_undecided_and_an_unknown_name_is_flagged():
    f, _ = _judge("vllm032_cpu_eager_startup.log", F.UNQUANTIZED,
                  DeviceTarget(kind=DeviceKind.CPU), folder="local_logs")
    assert f.verdict is V.NOT_LOGGED and not f.flagged and "undecided" in f.detail
    lines = read_kernel_lines("INFO [__init__.py:797] Selected NewFancyFP8LinearKernel for "
                              "Fp8LinearMethod\n", KERNEL_LOG)
    u = verify(VLLM, F.FP8, _cuda("9.0"), lines, KERNEL_LOG)
    assert u.verdict is V.UNRECOGNIZED and u.flagged and "NewFancyFP8LinearKernel" in u.detail
    n = verify(VLLM, F.MLX, _cuda("9.0"), lines, KERNEL_LOG)
    assert n.verdict is V.NO_EXPECTATION and not n.flagged


def test_the_report_names_the_winners_verdict_and_each_flagged_trial():
    from types import SimpleNamespace

    from infopt.report.kernel_text import kernel_lines
    from infopt.specs.results import KernelCheck, KernelPath

    bad, _ = _judge("vllm_nvfp4_sm120_marlin_moe.log", F.MODELOPT_NVFP4, _cuda("12.0"))
    good, _ = _judge("vllm_gptq_ampere_marlin.log", F.GPTQ, _cuda("8.6"))
    path = KernelPath(engine="vllm", log="trials/k/engine.log", finding=good)
    trials = [SimpleNamespace(trial_id=tid, kernels=KernelCheck(log="l", how="h", finding=f))
              for tid, f in (("t00-control-r1", good), ("t03-weights=nvfp4-r1", bad))]
    md = "\n".join(kernel_lines(path, trials))
    assert "Checked against the support matrix: **as expected**" in md
    assert "Kernels read per trial: 2 trial(s); flagged: 1." in md
    assert "- t03-weights=nvfp4-r1: **Flagged** against the support matrix: **fallback**" in md


def test_sglang_untuned_configs_on_blackwell_and_hopper_are_flagged_deepgemm_passes():
    """SGLang names no dense FP8 GEMM backend; its own "Performance might be sub-optimal!"
    warnings (sglang#5390 on a B200, sglang#4028 on an H20) flag the run, and DeepGEMM's JIT
    kernel (sglang#16026; DeepGEMM compiles only on SM90 and newer) is the matrix's FP8 path."""
    from infopt.engines.sglang.kernel_log import KERNEL_LOG as SGL

    def judge(name: str, cc: str):
        lines = read_kernel_lines((FIXTURES / "kernel_logs" / name).read_text(), SGL)
        return verify(EngineName.SGLANG, F.FP8, _cuda(cc), lines, SGL)

    b200 = judge("sglang_b200_default_moe_config.log", "10.0")
    assert b200.verdict is V.FALLBACK and "sub-optimal" in b200.detail
    assert judge("sglang_h20_default_configs.log", "9.0").verdict is V.FALLBACK
    deep = judge("sglang_deepgemm_jit.log", "9.0")
    assert deep.verdict is V.AS_EXPECTED and deep.found[0] == "GEMM_NT_F8F8BF16"


def test_trtllm_names_its_version_and_nothing_of_its_gemm():
    from infopt.engines.trtllm.kernel_log import KERNEL_LOG as TRT

    lines = read_kernel_lines((FIXTURES / "kernel_logs" / "trtllm_version_banner.log")
                              .read_text(), TRT)
    assert [ln.line for ln in lines if ln.aspect == "version"] == [
        "TensorRT-LLM version: 0.11.0"]
    f = verify(EngineName.TRTLLM, F.MODELOPT_FP8, _cuda("9.0"), lines, TRT)
    assert f.verdict is V.NOT_LOGGED and "undecided" in f.detail
