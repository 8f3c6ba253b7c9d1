"""A local model artifact (file or directory) and its classification.

`inspection` is the full component classification (infopt.specs.inspection); the properties
below are the dense-decoder facts the engine, benchmark and report stages read most often.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from .base import Spec
from .inspection import ModelInspection


class ModelFormat(StrEnum):
    GGUF = "gguf"
    HF = "hf"  # a directory with config.json and safetensors


class ModelProfile(Spec):
    path: str  # absolute path of the GGUF file or HF directory
    format: ModelFormat
    file_bytes: int  # weights on disk (GGUF file, or the directory's *.safetensors / *.bin)
    inspection: ModelInspection
    source: str  # which files the figures came from

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def architecture(self) -> str:
        return self.inspection.model_type or self.inspection.architecture

    @property
    def weight_format(self) -> str:
        q = self.inspection.quantization
        return q.format or q.scheme if q else (self.inspection.weights_dtype or "unknown")

    @property
    def num_layers(self) -> int:
        return self.inspection.num_layers

    @property
    def num_query_heads(self) -> int:
        return self.inspection.attention.num_query_heads

    @property
    def num_kv_heads(self) -> int:
        return self.inspection.attention.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.inspection.attention.head_dim

    @property
    def native_context_tokens(self) -> int:
        return self.inspection.native_context_tokens

    @property
    def params_total(self) -> int:
        return self.inspection.params_total

    @property
    def kv_bytes_per_token_f16(self) -> int:
        """KV bytes per token at 16-bit over the layers whose cache grows with context, with a
        sparse-attention indexer's keys (kept at their own FP8 format)."""
        kv = self.inspection.kv_cache
        return kv.bytes_per_token_16bit + kv.indexer_bytes_per_token
