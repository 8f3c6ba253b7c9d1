"""What the model is, as read from its files (GGUF metadata or config.json)."""

from __future__ import annotations

from enum import StrEnum

from .base import Spec


class ModelFormat(StrEnum):
    GGUF = "gguf"
    HF = "hf"  # a directory with config.json and safetensors


class ModelProfile(Spec):
    name: str  # display name (GGUF general.name or the directory name)
    path: str  # absolute path of the GGUF file or HF directory
    format: ModelFormat
    architecture: str  # GGUF general.architecture or config.json model_type
    num_layers: int
    hidden_size: int
    num_query_heads: int
    num_kv_heads: int
    head_dim: int
    native_context_tokens: int
    vocab_size: int | None
    params_total: int | None
    file_bytes: int
    weight_format: str  # GGUF file type (e.g. "MOSTLY_Q4_1") or torch dtype for HF
    chat_template_present: bool
    source: str  # which file and fields these figures came from

    @property
    def kv_bytes_per_token_f16(self) -> int:
        """K and V, every layer, 2 bytes per element: layers x kv_heads x head_dim x 2 x 2."""
        return self.num_layers * self.num_kv_heads * self.head_dim * 2 * 2
