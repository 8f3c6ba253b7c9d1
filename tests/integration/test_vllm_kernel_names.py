"""The names infopt gives vLLM's kernels (the adapter's KernelLog.kernel_names, which tell a
logged kernel from the support matrix's expected path) judged by the installed vLLM's own
lists: every kernel class in its CUDA priority lists (model_executor/kernels/linear) and every
value of its FP8 and NVFP4 MoE backends must be a path the matrix knows for that checkpoint
format, vLLM's first choice the matrix's best tier there and its emulation the fallback. A
vLLM that adds a kernel fails here before a trial ever calls it unrecognized."""

from __future__ import annotations

import json
import subprocess

import pytest

from infopt.engines.kernel_verify import row_of
from infopt.engines.vllm import adapter as vllm
from infopt.model.support_matrix import ROWS
from infopt.specs.checkpoint import CheckpointFormat as F
from infopt.specs.checkpoint import KernelTier
from infopt.specs.serving import EngineName

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

_SCRIPT = """
import enum, json
import vllm.model_executor.kernels.linear as L
from vllm.model_executor.layers.fused_moe.oracle import fp8, nvfp4
out = {n: [c.__name__ for c in getattr(L, n).get(L.PlatformEnum.CUDA, [])]
       for n in dir(L) if n.startswith("_POSSIBLE_") and isinstance(getattr(L, n), dict)}
out["Fp8MoeBackend"] = [m.value for m in fp8.Fp8MoeBackend]
out["NvFp4MoeBackend"] = [m.value for m in nvfp4.NvFp4MoeBackend]
print(json.dumps(out))
"""
# Which matrix format each of vLLM's lists serves. Left out: the INT8 list (the matrix has one
# int8 path, CUTLASS; its Triton and Humming alternatives are reported unrecognized, for a
# person to look at), and MXFP6/MXFP8 (no matrix rows yet).
_FORMATS = {"_POSSIBLE_FP8_KERNELS": F.FP8, "_POSSIBLE_FP8_BLOCK_KERNELS": F.FP8,
            "_POSSIBLE_WFP8A16_KERNELS": F.FP8, "_POSSIBLE_KERNELS": F.GPTQ,
            "_POSSIBLE_NVFP4_KERNELS": F.MODELOPT_NVFP4, "_POSSIBLE_MXFP4_KERNELS": F.MXFP4}
_MOE = {"Fp8MoeBackend": F.FP8, "NvFp4MoeBackend": F.MODELOPT_NVFP4}
# Backends that do not run on an NVIDIA GPU (ROCm, Intel, CPU, Gaudi) or mean "none".
_NOT_CUDA = {"NONE", "AITER_MXFP8", "XPU", "CPU", "CPU_W8A8", "HPC", "TRITON_MXFP8"}


@pytest.fixture(scope="module")
def lists():
    out = subprocess.run([vllm.locate(), "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rows(fmt: F):
    return [r for r in ROWS if r.engine is EngineName.VLLM and r.format is fmt and r.supported]


def test_every_cuda_kernel_of_vllm_is_a_path_the_matrix_knows(lists):
    unknown = [(n, k) for n, fmt in _FORMATS.items() for k in lists[n]
               if row_of(k, _rows(fmt), vllm.KERNEL_LOG) is None]
    unknown += [(n, b) for n, fmt in _MOE.items() for b in lists[n]
                if b not in _NOT_CUDA and row_of(b, _rows(fmt), vllm.KERNEL_LOG) is None]
    assert not unknown, unknown


def test_vllms_first_choice_is_the_best_tier_and_emulation_the_fallback(lists):
    for n, fmt in _FORMATS.items():
        if n == "_POSSIBLE_WFP8A16_KERNELS":  # the weight-only list: all of it is a fallback
            continue
        best = max((r.tier for r in _rows(fmt)),
                   key=[KernelTier.FALLBACK, KernelTier.OPTIMIZED, KernelTier.NATIVE].index)
        first = row_of(lists[n][0], _rows(fmt), vllm.KERNEL_LOG)
        assert first is not None and first.tier is best, (n, lists[n][0])
        for k in lists[n]:
            if k.startswith("Emulation"):
                assert row_of(k, _rows(fmt), vllm.KERNEL_LOG).tier is KernelTier.FALLBACK, k
    for k in lists["_POSSIBLE_WFP8A16_KERNELS"]:
        assert row_of(k, _rows(F.FP8), vllm.KERNEL_LOG).tier is KernelTier.FALLBACK, k
