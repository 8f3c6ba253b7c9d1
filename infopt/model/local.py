"""Inspect a local model: a Hugging Face directory (config.json) or a GGUF file.

A GGUF file carries the same facts as config.json under `{arch}.*` metadata keys; we translate
them into config.json terms and run the one classifier, so local GGUF, local HF and hub models
are classified by the same code. The GGUF's own tensor index is authoritative for the parameter
count and the tensor types (quantization verified from the file, not its name).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from infopt.model.classify import classify_config
from infopt.model.quantization import gguf_bits_per_weight
from infopt.specs.base import InputError
from infopt.specs.inspection import ModelInspection, QuantizationInfo, QuantMethod

# GGUF general.architecture -> transformers model_type, where the names differ
# (llama.cpp convert_hf_to_gguf.py registers each HF architecture under a GGUF arch name).
_GGUF_ARCH_TO_MODEL_TYPE = {
    "qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe", "deepseek2": "deepseek_v3",
    "gpt-oss": "gpt_oss", "nemotron_h": "nemotron_h",
}

# (config.json key, GGUF key suffix after "{arch}.")
_GGUF_KEYS = (
    ("num_hidden_layers", "block_count"),
    ("hidden_size", "embedding_length"),
    ("intermediate_size", "feed_forward_length"),
    ("num_attention_heads", "attention.head_count"),
    ("num_key_value_heads", "attention.head_count_kv"),
    ("head_dim", "attention.key_length"),
    ("max_position_embeddings", "context_length"),
    ("rms_norm_eps", "attention.layer_norm_rms_epsilon"),
    ("rope_theta", "rope.freq_base"),
    ("num_local_experts", "expert_count"),
    ("num_experts_per_tok", "expert_used_count"),
    ("moe_intermediate_size", "expert_feed_forward_length"),
    ("sliding_window", "attention.sliding_window"),
    ("kv_lora_rank", "attention.kv_lora_rank"),
    ("q_lora_rank", "attention.q_lora_rank"),
    ("interleave_moe_layer_step", "interleave_moe_layer_step"),  # Llama 4's MoE layer stride
    ("attention_chunk_size", "attention.chunk_size"),  # written by some converters (Ollama's)
)
# llama.cpp does not read Llama 4's chunk from the GGUF: llama-model.cpp (LLM_ARCH_LLAMA4)
# sets n_swa = 8192, chunked, with swa pattern 4 (3 chunked layers, then 1 full), "the same
# for Scout and Maverick". The layer pattern is Llama4TextConfig's default no_rope interval 4,
# which the classifier applies when no_rope_layers is absent.
_LLAMA4_CHUNK_TOKENS = 8192


def read_gguf(path: Path) -> tuple[dict[str, Any], list[tuple[str, str, int]]]:
    """(metadata without vocabulary arrays, [(tensor name, ggml type name, elements)])."""
    import gguf  # memory-maps the file; only the header and tensor index are read

    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - any parse failure means "not a GGUF model"
        raise InputError(
            f"{path} is not a readable GGUF file ({type(exc).__name__}: {exc}). Pass a .gguf "
            "model file or a Hugging Face model directory containing config.json.") from exc
    meta: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key == "tokenizer.ggml.tokens":
            meta["tokenizer.ggml.tokens.count"] = len(field.data)
            continue
        if key.startswith("tokenizer.ggml."):
            continue  # other vocabulary arrays: large, unused
        try:
            meta[key] = field.contents()
        except Exception:  # noqa: BLE001 - an exotic field type must not stop the inspection
            continue
    tensors = [(t.name, t.tensor_type.name, int(t.n_elements)) for t in reader.tensors]
    return meta, tensors


def gguf_to_config(meta: dict[str, Any], tensor_names: set[str]) -> dict[str, Any]:
    """config.json-shaped dict from GGUF metadata (pure)."""
    arch = meta.get("general.architecture")
    if not arch:
        raise InputError("GGUF metadata has no general.architecture; not a model file.")
    cfg: dict[str, Any] = {
        "model_type": _GGUF_ARCH_TO_MODEL_TYPE.get(arch, arch),
        "architectures": [f"gguf:{arch}"],
        "vocab_size": meta.get("tokenizer.ggml.tokens.count"),
        # No separate output tensor: the output head reuses the token embedding.
        "tie_word_embeddings": "output.weight" not in tensor_names,
    }
    for hf_key, suffix in _GGUF_KEYS:
        value = meta.get(f"{arch}.{suffix}")
        if value is not None:
            cfg[hf_key] = value
    if "num_local_experts" in cfg:
        cfg["num_experts"] = cfg["num_local_experts"]
    if arch == "llama4":
        cfg.setdefault("attention_chunk_size", _LLAMA4_CHUNK_TOKENS)
    return cfg


def gguf_quantization(tensors: list[tuple[str, str, int]], file_type: str) -> QuantizationInfo:
    """Quantization verified from the tensor types actually stored, by element share."""
    import gguf

    by_type: Counter[str] = Counter()
    for _name, ttype, n in tensors:
        by_type[ttype] += n
    main_type, _ = by_type.most_common(1)[0]
    nominal = re.search(r"(\d+)", main_type)  # Q4_1 -> 4, Q8_0 -> 8, F16 -> 16, MXFP4 -> 4
    block = gguf.GGML_QUANT_SIZES.get(gguf.GGMLQuantizationType[main_type], (1, 0))[0]
    try:
        bpw = f"{gguf_bits_per_weight(main_type):g} bits/weight with block scales"
    except (KeyError, ValueError):
        bpw = "bits/weight unknown"
    bits = int(nominal.group(1)) if nominal else None
    mix = ", ".join(f"{t} {n / sum(by_type.values()):.0%}" for t, n in by_type.most_common())
    return QuantizationInfo(
        method=QuantMethod.GGUF, bits=bits, group_size=block if block > 1 else None,
        format=f"{main_type} ({bpw})", activations_quantized=False,
        scheme=f"W{bits}A16" if bits and bits < 16 else f"W{bits}A{bits}",
        modules_not_converted=[], producer=None,
        source=f"GGUF tensor types by elements ({mix}); general.file_type {file_type}")


def inspect_gguf(path: Path) -> ModelInspection:
    meta, tensors = read_gguf(path)
    names = {t[0] for t in tensors}
    cfg = gguf_to_config(meta, names)
    try:
        import gguf

        file_type = gguf.LlamaFileType(int(meta.get("general.file_type", -1))).name
    except (ValueError, TypeError):
        file_type = str(meta.get("general.file_type"))
    try:
        insp = classify_config(cfg, model=str(path.resolve()),
                               license=meta.get("general.license"),
                               chat_template_present=bool(meta.get("tokenizer.chat_template")))
    except InputError as exc:  # keys are named in config.json terms; the file is named here
        raise InputError(f"{path} (GGUF metadata): {exc}") from None
    total = sum(n for _, _, n in tensors)
    notes = [*insp.notes, f"params_total summed over the GGUF's {len(tensors)} tensors "
             f"(config-derived estimate was {insp.params_total:,})"]
    return insp.model_copy(update={"params_total": total, "notes": notes,
                                   "quantization": gguf_quantization(tensors, file_type)})


# The side files read here are a few KB (tokenizer_config.json of a large vocabulary: ~1 MB);
# anything past this is not a configuration.
MAX_JSON_BYTES = 16 << 20


def read_json_object(path: Path) -> dict[str, Any]:
    """A checkpoint's JSON side file as a dict; each problem is one InputError naming the
    file: unreadable, not UTF-8, not JSON, or not a JSON object."""
    try:
        if (size := path.stat().st_size) > MAX_JSON_BYTES:
            raise InputError(f"{path}: {size:,} bytes is not a model configuration (at most "
                             f"{MAX_JSON_BYTES:,}); pass the checkpoint's own file")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}: {raw[exc.start]:#04x}); "
                         "pass the checkpoint's file unmodified, saved as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                         "is this a model directory? Pass the checkpoint's file unmodified"
                         ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a model configuration") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got a {_json_type(data)}; pass the "
                         "checkpoint's file unmodified")
    return data


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _chat_template(tok: Path) -> bool:
    """Whether tokenizer_config.json carries a chat template: a string, or transformers' list
    of {name, template} entries; anything else is a broken file, not "no template"."""
    template = read_json_object(tok).get("chat_template")
    named = isinstance(template, list) and all(
        isinstance(t, dict) and isinstance(t.get("template"), str) for t in template)
    if template is not None and not isinstance(template, str) and not named:
        raise InputError(f"{tok}: chat_template must be a string (a Jinja template) or a list "
                         f"of {{name, template}} objects, got {_short(template)}; fix or "
                         "remove the key")
    return bool(template)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def inspect_hf_dir(path: Path) -> ModelInspection:
    cfg_path = path / "config.json"
    cfg = read_json_object(cfg_path)
    sidecar = path / "hf_quant_config.json"
    hqc = read_json_object(sidecar) if sidecar.exists() else None
    tok = path / "tokenizer_config.json"
    template = (path / "chat_template.jinja").exists() or (tok.exists() and _chat_template(tok))
    try:
        return classify_config(cfg, hf_quant_config=hqc, model=str(path.resolve()),
                               chat_template_present=template)
    except InputError as exc:  # the classifier names the key; the file is named here
        raise InputError(f"{cfg_path}: {exc}") from None


def inspect_local(path_str: str) -> ModelInspection:
    if not path_str.strip():  # Path("") is the current folder: never what was meant
        raise InputError("an empty model path; pass a local .gguf file, a Hugging Face model "
                         "directory (with config.json), or a hub id such as ORG/NAME")
    path = Path(path_str).expanduser()
    if not path.exists():
        raise InputError(
            f"model path '{path_str}' does not exist. Pass a local .gguf file, a Hugging Face "
            "model directory (with config.json), or a hub id such as ORG/NAME.")
    if path.is_dir():
        if not (path / "config.json").exists():
            raise InputError(f"directory '{path_str}' has no config.json; it is not a Hugging "
                             "Face model directory. Pass the model's directory or a .gguf file.")
        return inspect_hf_dir(path)
    return inspect_gguf(path)
