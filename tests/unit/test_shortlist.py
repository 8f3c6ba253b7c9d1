"""Checkpoint shortlist: discovery on the fake hub, verification from metadata, ranking, and the
engine x format x compute-capability support matrix."""

from __future__ import annotations

import re

import pytest

from infopt.engines.routing import engine_order_for
from infopt.model.hub import fetch_model_facts
from infopt.model.shortlist import (
    KNOWN_QUANTIZERS,
    assess_variant,
    build_shortlist,
    checkpoint_format,
    device_from_inventory,
    name_claims,
    provenance,
)
from infopt.model.support_matrix import ROWS, kernel_paths, unsupported_reason
from infopt.specs.base import InputError
from infopt.specs.checkpoint import (
    CheckpointCandidate,
    DeviceKind,
    DeviceTarget,
    KernelTier,
    Provenance,
    RejectedCheckpoint,
)
from infopt.specs.checkpoint import (
    CheckpointFormat as F,
)
from infopt.specs.checkpoint import (
    RejectReason as R,
)
from infopt.specs.hardware import GpuDevice, HardwareInventory, HostInfo
from infopt.specs.serving import EngineName

try:  # tests/ is a package (tests/__init__.py) or, without one, on sys.path itself
    from tests.hubserver import FakeHub
except ImportError:  # pragma: no cover
    from hubserver import FakeHub

QWEN = "Qwen/Qwen3-8B"
H200 = DeviceTarget(kind=DeviceKind.CUDA, compute_capability="9.0", name="NVIDIA H200")
B200 = DeviceTarget(kind=DeviceKind.CUDA, compute_capability="10.0", name="NVIDIA B200")
CPU = DeviceTarget(kind=DeviceKind.CPU)


@pytest.fixture(scope="module")
def hub():
    with FakeHub() as h:
        yield h


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("hub-cache")


@pytest.fixture(scope="module")
def hopper(hub, cache):
    # 8 active generations: the router puts vLLM first on an NVIDIA GPU.
    return build_shortlist(QWEN, device=H200, cache_dir=cache, endpoint=hub.endpoint,
                           engine_order=engine_order_for(H200, 8))


def _by_repo(items):
    return {(i.repo_id, i.gguf_file): i for i in items}


def test_ties_go_to_the_engine_the_router_tries_first(hub, cache):
    # One active user: the router puts SGLang first on an NVIDIA GPU (engines.routing), so of
    # two fallback-tier 4-bit checkpoints from known quantizers the one SGLang serves (bnb)
    # now ranks ahead of the one only vLLM serves (NVFP4 on Hopper).
    single = build_shortlist(QWEN, device=H200, cache_dir=cache, endpoint=hub.endpoint,
                             engine_order=engine_order_for(H200, 1))
    order = [c.repo_id for c in single.candidates]
    assert order.index("unsloth/Qwen3-8B-bnb-4bit") < order.index("nvidia/Qwen3-8B-NVFP4")
    assert "routed engine order" in single.ranking


def test_hopper_ranking(hopper):
    order = [(c.repo_id, c.gguf_file) for c in hopper.candidates]
    assert order == [
        ("Qwen/Qwen3-8B-AWQ", None),  # official, Marlin, vLLM
        ("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf"),  # official, llama.cpp MMQ
        ("RedHatAI/Qwen3-8B-quantized.w4a16", None),  # known quantizer, Marlin/Machete
        ("quantfan/Qwen3-8B-GPTQ-Int4", None),  # unknown producer, Marlin
        ("nvidia/Qwen3-8B-NVFP4", None),  # Hopper has no FP4 tensor cores: weight-only
        ("unsloth/Qwen3-8B-bnb-4bit", None),  # NF4: dequantize + 16-bit GEMM
    ]
    assert all(c.weight_bits == 4 for c in hopper.candidates)
    assert hopper.max_weight_bits == 4 and hopper.queries == [
        f"filter=base_model:quantized:{QWEN}", "search=Qwen3-8B"]
    for c in hopper.candidates:
        assert re.fullmatch(r"[0-9a-f]{40}", c.commit_sha) and c.fit == "unknown"
        assert c.kernel_paths and all(p.source_url.startswith("https://") for p in c.kernel_paths)
    ref = hopper.reference
    assert ref.repo_id == QWEN and ref.format is F.UNQUANTIZED
    assert ref.weights_bytes == 2 * 8_190_735_360


def test_awq_candidate_verified_from_metadata(hopper):
    awq = _by_repo(hopper.candidates)[("Qwen/Qwen3-8B-AWQ", None)]
    q = awq.quantization
    assert (q.method.value, q.bits, q.group_size, q.scheme) == ("awq", 4, 128, "W4A16")
    assert awq.provenance is Provenance.OFFICIAL and awq.producer == "Qwen"
    assert awq.license == "apache-2.0" and awq.best_tier is KernelTier.OPTIMIZED
    assert any("I32" in e for e in awq.evidence)  # packed int4 tensors seen in the headers
    assert any("identical to the base" in e for e in awq.evidence)
    assert "filter=base_model:quantized:Qwen/Qwen3-8B" in awq.found_by
    vllm = next(p for p in awq.kernel_paths if p.engine is EngineName.VLLM)
    assert vllm.kernel == "awq_marlin" and not vllm.low_precision_math
    assert awq.weights_bytes < 8_190_735_360  # about a quarter of the 16-bit bytes


def test_rejections_keep_reasons(hopper):
    rej = _by_repo(hopper.rejected)
    lazy = rej[("lazyuploader/Qwen3-8B-AWQ", None)]
    assert lazy.reason is R.NO_QUANT_METADATA
    assert "name says AWQ" in lazy.detail and "BF16" in lazy.detail
    speedy = rej[("speedy-quants/Qwen3-8B-AWQ", None)]
    assert speedy.reason is R.NAME_MISMATCH and "says AWQ" in speedy.detail
    assert "gptq" in speedy.detail
    mixup = rej[("mixup/Qwen3-8B-Instruct-GPTQ", None)]
    assert mixup.reason is R.ARCHITECTURE_MISMATCH and "layers 28 != 36" in mixup.detail
    assert rej[("Qwen/Qwen3-8B-Base", None)].reason is R.NOT_QUANTIZED
    assert rej[("Qwen/Qwen3-8B-FP8", None)].reason is R.OUTSIDE_WEIGHT_BITS
    assert rej[("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q8_0.gguf")].reason is R.OUTSIDE_WEIGHT_BITS
    gated = rej[("acme-research/Qwen3-8B-AWQ", None)]
    assert gated.reason is R.NO_ACCESS and "HF_TOKEN" in gated.detail
    mlx = rej[("mlx-community/Qwen3-8B-4bit", None)]
    assert mlx.reason is R.UNSUPPORTED_ON_DEVICE and "metal" in mlx.detail
    assert not {r for r, _ in rej} & {c.repo_id for c in hopper.candidates
                                       if c.format is not F.GGUF}


def test_nvfp4_native_only_on_blackwell(hopper, hub, cache):
    on_hopper = _by_repo(hopper.candidates)[("nvidia/Qwen3-8B-NVFP4", None)]
    assert on_hopper.best_tier is KernelTier.FALLBACK
    assert not any(p.low_precision_math for p in on_hopper.kernel_paths)
    blackwell = build_shortlist(QWEN, device=B200, cache_dir=cache, endpoint=hub.endpoint,
                                engine_order=engine_order_for(B200, 1))
    first = blackwell.candidates[0]
    assert first.repo_id == "nvidia/Qwen3-8B-NVFP4" and first.best_tier is KernelTier.NATIVE
    assert first.quantization.scheme == "W4A4" and first.provenance is Provenance.KNOWN_QUANTIZER
    assert all(p.low_precision_math for p in first.kernel_paths)


def test_wider_search_admits_fp8(hub, cache):
    s = build_shortlist(QWEN, device=H200, cache_dir=cache, endpoint=hub.endpoint,
                        max_weight_bits=8, engine_order=engine_order_for(H200, 1))
    first = s.candidates[0]
    assert first.repo_id == "Qwen/Qwen3-8B-FP8" and first.best_tier is KernelTier.NATIVE
    assert first.quantization.weight_block_size == [128, 128]
    files = {c.gguf_file for c in s.candidates if c.format is F.GGUF}
    assert {"Qwen3-8B-Q4_K_M.gguf", "Qwen3-8B-Q8_0.gguf"} <= files


def test_cpu_and_apple_routes(hub, cache):
    cpu = build_shortlist(QWEN, device=CPU, cache_dir=cache, endpoint=hub.endpoint,
                          engine_order=engine_order_for(CPU, 1))
    assert cpu.candidates[0].gguf_file == "Qwen3-8B-Q4_K_M.gguf"
    assert [p.engine for p in cpu.candidates[0].kernel_paths] == [EngineName.LLAMACPP]
    metal = DeviceTarget(kind=DeviceKind.METAL)
    apple = build_shortlist(QWEN, device=metal, cache_dir=cache, endpoint=hub.endpoint,
                            engine_order=engine_order_for(metal, 1))
    mlx = _by_repo(apple.candidates)[("mlx-community/Qwen3-8B-4bit", None)]
    assert mlx.format is F.MLX and mlx.quantization.group_size == 64
    assert mlx.kernel_paths[0].engine is EngineName.MLX


def test_gated_base_needs_a_token(hub, cache):
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    with pytest.raises(InputError, match="gated"):
        build_shortlist(llama, device=H200, cache_dir=cache, endpoint=hub.endpoint,
                        engine_order=engine_order_for(H200, 1))
    s = build_shortlist(llama, device=H200, cache_dir=cache, endpoint=hub.endpoint,
                        token="hf_fake_granted", engine_order=engine_order_for(H200, 1))
    assert [c.repo_id for c in s.candidates] == [
        "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"]
    c = s.candidates[0]
    assert c.provenance is Provenance.KNOWN_QUANTIZER and c.license == "llama3.1"
    assert not c.warnings and s.reference.license == "llama3.1"


# --- pure checks on edited copies of fetched metadata ------------------------------------------

@pytest.fixture(scope="module")
def base(hub, cache):
    return fetch_model_facts(QWEN, cache_dir=cache, endpoint=hub.endpoint)


@pytest.fixture(scope="module")
def awq(hub, cache):
    return fetch_model_facts("Qwen/Qwen3-8B-AWQ", cache_dir=cache, endpoint=hub.endpoint)


def _one(result):
    assert len(result) == 1
    return result[0]


def test_config_contradicted_by_tensors(base, awq):
    fake = awq.model_copy(update={"safetensors": base.safetensors})  # BF16 tensors only
    r = _one(assess_variant(base, fake, H200))
    assert isinstance(r, RejectedCheckpoint) and r.reason is R.METADATA_INCONSISTENT
    assert "BF16" in r.detail and "I32" in r.detail


def test_declared_other_base_and_tokenizer(base, awq):
    other = awq.model_copy(update={"base_models": ["Qwen/Qwen3-14B"]})
    assert _one(assess_variant(base, other, H200)).reason is R.DIFFERENT_BASE_MODEL
    vocab = awq.model_copy(update={"config": {**awq.config, "vocab_size": 152064}})
    r = _one(assess_variant(base, vocab, H200))
    assert r.reason is R.TOKENIZER_MISMATCH and "152064" in r.detail
    orphan = awq.model_copy(update={"base_models": [], "license": "mit"})
    c = _one(assess_variant(base, orphan, H200))
    assert isinstance(c, CheckpointCandidate)
    assert any("declares no base_model" in w for w in c.warnings)
    assert any("license mit differs" in w for w in c.warnings)


def test_unsupported_on_old_gpu(base, awq):
    volta = DeviceTarget(kind=DeviceKind.CUDA, compute_capability="7.0")
    r = _one(assess_variant(base, awq, volta))
    assert r.reason is R.UNSUPPORTED_ON_DEVICE and "vllm on CUDA CC >= 8.0" in r.detail


def test_format_and_name_helpers(base, awq):
    assert checkpoint_format(base) == (F.UNQUANTIZED, None)
    assert checkpoint_format(awq)[0] is F.AWQ
    assert name_claims("x/Qwen3-8B-AWQ-INT4") == ({"awq"}, 4)
    assert name_claims("RedHatAI/Qwen3-8B-quantized.w4a16") == (set(), 4)
    assert name_claims("unsloth/Qwen3-8B-bnb-4bit") == ({"bnb"}, 4)
    assert provenance("Qwen", QWEN) is Provenance.OFFICIAL
    assert provenance("RedHatAI", QWEN) is Provenance.KNOWN_QUANTIZER
    assert provenance("someone", QWEN) is Provenance.OTHER
    assert all(url.startswith("https://") for url in KNOWN_QUANTIZERS.values())


def test_device_from_inventory():
    host = HostInfo(cpu_model="Apple M3 Max", architecture="arm64", logical_cpus=16,
                    physical_cores=16, usable_cpus=16, cgroup_cpu_limit=None, isa_features=[],
                    ram_total_bytes=1 << 36, ram_available_bytes=1 << 35, os="Darwin 24.1",
                    kernel="24.1.0")
    inv = HardwareInventory(host=host, gpus=[], gpu_probe="NVML: no driver")
    assert device_from_inventory(inv).kind is DeviceKind.METAL
    linux = host.model_copy(update={"os": "Linux", "architecture": "x86_64"})
    assert device_from_inventory(inv.model_copy(update={"host": linux})).kind is DeviceKind.CPU
    gpu = GpuDevice(index=0, name="NVIDIA H200", memory_total_bytes=141 << 30,
                    compute_capability="9.0")
    d = device_from_inventory(HardwareInventory(host=linux, gpus=[gpu], gpu_probe="NVML"))
    assert (d.kind, d.compute_capability) == (DeviceKind.CUDA, "9.0")


# --- support matrix ---------------------------------------------------------------------------

def _cuda(cc: str) -> DeviceTarget:
    return DeviceTarget(kind=DeviceKind.CUDA, compute_capability=cc)


def test_every_row_cites_engine_docs():
    assert all(r.source_url.startswith("https://") for r in ROWS)
    assert {r.engine for r in ROWS} == set(EngineName)


@pytest.mark.parametrize(("fmt", "cc", "engine", "kernel", "low", "tier"), [
    (F.AWQ, "8.0", EngineName.VLLM, "awq_marlin", False, KernelTier.OPTIMIZED),
    (F.GPTQ, "8.6", EngineName.SGLANG, "gptq_marlin", False, KernelTier.OPTIMIZED),
    (F.FP8, "8.9", EngineName.VLLM, "CUTLASS/DeepGEMM fp8 scaled_mm (W8A8)", True,
     KernelTier.NATIVE),
    (F.FP8, "8.0", EngineName.VLLM, "FP8 Marlin weight-only (W8A16)", False, KernelTier.FALLBACK),
    (F.MODELOPT_NVFP4, "10.0", EngineName.TRTLLM, "NVFP4 GEMM", True, KernelTier.NATIVE),
    (F.MODELOPT_NVFP4, "9.0", EngineName.VLLM, "Marlin FP4 weight-only (W4A16)", False,
     KernelTier.FALLBACK),
])
def test_kernel_paths(fmt, cc, engine, kernel, low, tier):
    path = next(p for p in kernel_paths(fmt, _cuda(cc)) if p.engine is engine)
    assert (path.kernel, path.low_precision_math, path.tier) == (kernel, low, tier)


def test_capability_limits():
    assert kernel_paths(F.AWQ, _cuda("7.0")) == []  # vLLM: AWQ unsupported on Volta
    assert [p.engine for p in kernel_paths(F.MODELOPT_NVFP4, _cuda("9.0"))] == [EngineName.VLLM]
    assert not kernel_paths(F.MODELOPT_FP8, _cuda("8.6"))[0].low_precision_math
    assert [p.engine for p in kernel_paths(F.GGUF, CPU)] == [EngineName.LLAMACPP]
    assert [p.engine for p in kernel_paths(F.GGUF, _cuda("6.1"))] == [EngineName.LLAMACPP]
    assert kernel_paths(F.AWQ, DeviceTarget(kind=DeviceKind.CUDA)) == []  # CC unknown
    # Explicitly unsupported rows say what to do instead.
    assert "convert_hf_to_gguf" in unsupported_reason(F.UNQUANTIZED, CPU)
    assert "mlx on metal" in unsupported_reason(F.MLX, H200)
