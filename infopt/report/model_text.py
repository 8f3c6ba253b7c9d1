"""Plain-text views of a ModelInspection and a Shortlist for the CLI (units converted here)."""

from __future__ import annotations

from infopt.specs.checkpoint import Shortlist
from infopt.specs.inspection import ModelInspection


def _b(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e9:.2f} B"


def render_inspection(m: ModelInspection) -> str:
    a = m.attention
    att = f"{a.kind.value}: {a.num_query_heads} query / {a.num_kv_heads} KV heads x {a.head_dim}"
    if a.kv_lora_rank:
        att += f", latent {a.kv_lora_rank} + rope {a.qk_rope_head_dim}"
    lines = [
        f"Model: {m.model}" + (f" @ {m.revision}" if m.revision else ""),
        f"Architecture: {m.architecture} (model_type {m.model_type}), {m.num_layers} layers, "
        f"hidden {m.hidden_size}, vocab {m.vocab_size}",
        f"Attention: {att}" + (", attention sinks" if a.sinks else ""),
        "Layers: " + ", ".join(f"{k.value if hasattr(k, 'value') else k} x{v}"
                               for k, v in m.layer_kinds.items())
        + (f" (sliding window {m.sliding_window_tokens} tokens)" if m.sliding_window_tokens else "")
        + (f" (attention chunk {m.attention_chunk_tokens} tokens)" if m.attention_chunk_tokens
           else ""),
        f"Native context: {m.native_context_tokens} tokens"
        + (f"; rope_scaling present (reported, not applied): {m.rope_scaling}" if m.rope_scaling
           else ""),
        f"Parameters: {_b(m.params_total)} total, {_b(m.params_active_per_token)} active per token",
        f"KV cache: {m.kv_cache.bytes_per_token_16bit:,} B/token at 16-bit over "
        f"{m.kv_cache.full_attention_layers} full-attention layers",
    ]
    kv = m.kv_cache
    if kv.sliding_attention_layers:
        lines.append(f"Windowed KV: {kv.sliding_bytes_per_token_16bit:,} B/token at 16-bit over "
                     f"{kv.sliding_attention_layers} layers, at most {kv.sliding_window_tokens} "
                     "tokens per sequence")
    if kv.indexer_bytes_per_token:
        lines.append(f"Sparse attention: top-{a.index_topk} tokens per query; indexer keys "
                     f"{kv.indexer_bytes_per_token:,} B/token (FP8 + scales) over "
                     f"{kv.full_attention_layers} layers, {a.index_n_heads} heads x "
                     f"{a.index_head_dim}")
    if kv.recurrent_layers:
        state = kv.recurrent_state_bytes_per_sequence or kv.recurrent_state_bytes_per_sequence_16bit
        lines.append(f"Recurrent state: {state / 2**20:,.1f} MiB per sequence over "
                     f"{kv.recurrent_layers} layers (fixed, whatever the context)")
    if m.linear_attention:
        la = m.linear_attention
        lines.append(f"Linear attention (Gated DeltaNet): {la.num_key_heads} key / "
                     f"{la.num_value_heads} value heads x {la.key_head_dim}/{la.value_head_dim}, "
                     f"conv {la.conv_kernel}, state dtype {la.state_dtype or '16-bit'}")
    if m.skipped_blocks or m.linear_replaced_blocks:
        lines.append(f"Heterogeneous blocks: {m.skipped_blocks} skipped (no_op), "
                     f"{m.linear_replaced_blocks} replaced by one linear layer")
    if m.moe:
        lines.append(f"MoE: {m.moe.num_experts} experts, top-{m.moe.experts_per_token}, "
                     f"{m.moe.num_shared_experts} shared, {m.moe.num_dense_layers} dense layers")
    if m.mtp_layers:
        lines.append(f"MTP / draft layers: {m.mtp_layers}")
    if m.multimodal_encoders:
        lines.append(f"Encoders: {', '.join(m.multimodal_encoders)}")
    q = m.quantization
    lines.append(f"Quantization: {q.method.value} {q.scheme}, {q.bits} bits, group {q.group_size}, "
                 f"{q.format} (from {q.source})" if q else "Quantization: none (16-bit weights)")
    kept = q.params_not_converted if q else None
    if kept is not None:
        parts = [f"{name} {getattr(kept, name) / 1e9:.2f} B" for name in (
            "attention", "dense_mlp", "routed_experts", "shared_experts", "mamba",
            "linear_attention", "embedding", "lm_head") if getattr(kept, name)]
        lines.append("Left at 16 bits by the checkpoint: " + (", ".join(parts) or "none"))
    lines.append(f"Chat template: {'yes' if m.chat_template_present else 'no'}; license: "
                 f"{m.license or 'unknown'}; gated: {m.gated}")
    lines += [f"note: {n}" for n in m.notes]
    return "\n".join(lines)


def render_shortlist(s: Shortlist) -> str:
    dev = s.device.kind.value + (f" CC {s.device.compute_capability}"
                                 if s.device.compute_capability else "")
    lines = [f"Shortlist for {s.base_model} @ {s.base_commit_sha[:12]} on {dev} "
             f"(<= {s.max_weight_bits}-bit weights; ranking: {s.ranking})", ""]
    for i, c in enumerate(s.candidates, 1):
        best = c.kernel_paths[0] if c.kernel_paths else None
        engine = f"{best.engine.value}: {best.kernel} ({best.math})" if best else "no kernel"
        lines.append(f"{i:2d}. {c.repo_id}{' / ' + c.gguf_file if c.gguf_file else ''} "
                     f"[{c.format.value}, {c.weight_bits}-bit, {c.best_tier.value if c.best_tier else '?'}] "
                     f"{engine}; {c.provenance.value}; license {c.license or '?'}")
    if s.rejected:
        lines += ["", "Rejected:"]
        lines += [f"  - {r.repo_id}: {r.reason.value} — {r.detail}" for r in s.rejected]
    return "\n".join(lines)
