"""What the hub says about one model repository, and the checkpoint shortlist built from it.

`HubModelFacts` is the hub client's output: everything read about a repository at one pinned
commit (sizes in bytes, the raw small JSON files as the hub served them). `Shortlist` is the
"Shortlist checkpoints" stage's output: quantized variants of the exact model, each verified from
its own metadata, matched to engine kernels on the target device, ranked; the rest kept in
`rejected` with the reason.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from .base import Spec
from .inspection import QuantizationInfo
from .serving import EngineName


class GatingMode(StrEnum):
    """The hub's `gated` field: False, "auto" (approved on request) or "manual" (reviewed)."""

    NONE = "none"
    AUTO = "auto"
    MANUAL = "manual"


class HubFile(Spec):
    path: str  # path inside the repository
    size_bytes: int
    blob_id: str  # git blob oid
    lfs_sha256: str | None = None  # LFS content hash: equal hashes mean identical files


class SafetensorsSummary(Spec):
    """Read from the safetensors headers with HTTP Range requests; no weight bytes downloaded."""

    files: list[str]
    tensor_count: int
    # Stored elements per safetensors dtype, as the hub's own "parameters" counts them: a packed
    # int4 checkpoint stores 8 weights per I32 element, so this is NOT the logical count.
    elements_by_dtype: dict[str, int]
    bytes_by_dtype: dict[str, int]
    total_bytes: int  # tensor data only (headers excluded): the weights' on-disk size
    tensor_names_sample: list[str]  # the first few names of the first file, for evidence


class GgufFileFacts(Spec):
    path: str  # first shard for split GGUFs (…-00001-of-0000N.gguf)
    size_bytes: int  # all shards together
    shards: int = 1
    file_type: str | None  # llama.cpp file type, e.g. "Q4_K_M"
    file_type_source: Literal["gguf header", "file name"]
    architecture: str | None = None  # general.architecture
    block_count: int | None = None
    embedding_length: int | None = None
    context_length_tokens: int | None = None
    token_count: int | None = None  # length of tokenizer.ggml.tokens


class HubModelFacts(Spec):
    repo_id: str
    endpoint: str
    requested_revision: str | None  # what the caller asked for (None: the default branch)
    commit_sha: str  # every file below was read at this commit
    author: str | None
    license: str | None  # SPDX-like id from the card metadata or a `license:` tag
    license_source: str | None
    gated: GatingMode
    tags: list[str]
    base_models: list[str]  # the repos this one declares it derives from
    base_model_relation: str | None  # "quantized", "finetune", "adapter", "merge" (hub tags)
    last_modified: str | None  # ISO 8601 from the hub
    files: list[HubFile]
    config: dict[str, Any] | None  # config.json as served
    tokenizer_config: dict[str, Any] | None  # tokenizer_config.json minus its chat template
    chat_template: str | None
    chat_template_source: str | None  # which file the template came from
    generation_config: dict[str, Any] | None
    hf_quant_config: dict[str, Any] | None  # ModelOpt's sidecar, when present
    safetensors: SafetensorsSummary | None
    gguf_files: list[GgufFileFacts] = Field(default_factory=list)
    hub_gguf_summary: dict[str, Any] | None = None  # the hub's own `gguf` field
    sources: list[str]  # URLs read, for the report's provenance
    notes: list[str] = Field(default_factory=list)  # what could not be read, and why

    @property
    def chat_template_present(self) -> bool:
        return self.chat_template is not None

    def file(self, path: str) -> HubFile | None:
        return next((f for f in self.files if f.path == path), None)


class CheckpointFormat(StrEnum):
    """On-disk format family as the engines dispatch on it (quant_method + scheme)."""

    UNQUANTIZED = "unquantized"  # bf16/fp16/fp32 safetensors
    AWQ = "awq"  # AutoAWQ int4 (W4A16)
    GPTQ = "gptq"  # AutoGPTQ/GPTQModel int4/int8 (W4A16/W8A16)
    CT_WNA16 = "compressed-tensors-wna16"  # llm-compressor int4/int8 weight-only
    CT_FP8 = "compressed-tensors-fp8"  # llm-compressor FP8 W8A8
    CT_INT8 = "compressed-tensors-int8"  # llm-compressor INT8 W8A8
    CT_NVFP4 = "compressed-tensors-nvfp4"  # llm-compressor NVFP4 (W4A4)
    FP8 = "fp8"  # HF fine-grained/block FP8 (Qwen-FP8, DeepSeek-V3)
    MODELOPT_FP8 = "modelopt-fp8"
    MODELOPT_NVFP4 = "modelopt-nvfp4"
    MXFP4 = "mxfp4"  # OCP microscaling FP4 (gpt-oss)
    BNB_NF4 = "bnb-nf4"  # bitsandbytes 4-bit (NF4/FP4)
    BNB_INT8 = "bnb-int8"  # bitsandbytes LLM.int8()
    GGUF = "gguf"
    MLX = "mlx"  # mlx-lm affine n-bit
    OTHER = "other"


class DeviceKind(StrEnum):
    CUDA = "cuda"  # NVIDIA GPU; support depends on compute capability
    CPU = "cpu"
    METAL = "metal"  # Apple Silicon GPU


class DeviceTarget(Spec):
    kind: DeviceKind
    compute_capability: str | None = None  # "9.0"; CUDA only
    name: str | None = None

    @property
    def cc(self) -> float | None:
        """Compute capability as a number: 8.9 < 9.0 < 10.0 < 12.0 (minors are one digit)."""
        return float(self.compute_capability) if self.compute_capability else None


class KernelTier(StrEnum):
    """How well an engine runs a format on a device; orders the shortlist."""

    NATIVE = "native"  # the GEMM itself runs at the checkpoint's low precision on tensor cores
    OPTIMIZED = "optimized"  # a dedicated fused kernel (Marlin W4A16, llama.cpp MMQ, MLX)
    FALLBACK = "fallback"  # generic dequantize path, weight-only emulation of a missing format


class KernelPath(Spec):
    engine: EngineName
    kernel: str  # what runs the linear layers
    math: str  # the arithmetic the GEMM runs in
    low_precision_math: bool  # True only when the multiply itself is below 16-bit
    tier: KernelTier
    source_url: str  # engine documentation the row was taken from
    note: str = ""


class Provenance(StrEnum):
    OFFICIAL = "official"  # published by the base model's own organization
    KNOWN_QUANTIZER = "known_quantizer"  # an organization engine docs point users to
    OTHER = "other"


class CheckpointCandidate(Spec):
    repo_id: str
    commit_sha: str
    producer: str  # the repository owner
    provenance: Provenance
    found_by: list[str]  # which hub queries returned it
    license: str | None
    gated: GatingMode
    format: CheckpointFormat
    weight_bits: int | None  # nominal bits per weight (4 for AWQ int4, Q4_K_M)
    quantization: QuantizationInfo | None  # None for GGUF and unquantized checkpoints
    gguf_file: str | None = None  # the file to serve, for GGUF repos
    gguf_type: str | None = None  # its llama.cpp file type ("Q4_0"), from header or name
    weights_bytes: int | None  # on-disk tensor bytes (safetensors data or GGUF file size)
    kernel_paths: list[KernelPath]  # every engine that runs it on the target device
    best_tier: KernelTier | None
    fit: Literal["unknown"] = "unknown"  # placeholder: the fit stage fills memory fit in
    evidence: list[str]  # what was checked, from which file
    warnings: list[str] = Field(default_factory=list)


class RejectReason(StrEnum):
    NAME_MISMATCH = "name_mismatch"  # the name claims a method the metadata contradicts
    NO_QUANT_METADATA = "no_quant_metadata"  # claims to be quantized, carries no metadata
    NOT_QUANTIZED = "not_quantized"  # an unquantized checkpoint (found by name search)
    METADATA_INCONSISTENT = "metadata_inconsistent"  # config says X, tensors say otherwise
    ARCHITECTURE_MISMATCH = "architecture_mismatch"
    TOKENIZER_MISMATCH = "tokenizer_mismatch"
    DIFFERENT_BASE_MODEL = "different_base_model"  # declares another model as its base
    UNSUPPORTED_ON_DEVICE = "unsupported_on_device"
    OUTSIDE_WEIGHT_BITS = "outside_weight_bits"  # e.g. 8-bit while the search asks for 4-bit
    NO_ACCESS = "no_access"  # gated or unreadable with the given token
    UNREADABLE = "unreadable"  # metadata could not be fetched or parsed


class RejectedCheckpoint(Spec):
    repo_id: str
    commit_sha: str | None
    producer: str
    reason: RejectReason
    detail: str  # says what was found and, where it applies, what to change
    gguf_file: str | None = None


class Shortlist(Spec):
    base_model: str
    base_commit_sha: str
    endpoint: str
    device: DeviceTarget
    max_weight_bits: int  # the search's precision ceiling (4 by default, per the specification)
    reference: CheckpointCandidate  # the unquantized base, the quality reference
    candidates: list[CheckpointCandidate]  # best first
    rejected: list[RejectedCheckpoint]
    queries: list[str]  # the hub searches that were run
    ranking: str  # how `candidates` is ordered, in words
