"""Profile the real SmolLM2 GGUF and its converted HF copy; bad paths give InputError."""

from __future__ import annotations

import pytest

from infopt.model.profile import profile_model
from infopt.specs.base import InputError

pytestmark = pytest.mark.integration


def test_gguf_profile_matches_published_architecture(gguf_model):
    m = profile_model(str(gguf_model))
    # SmolLM2-135M (HuggingFaceTB/SmolLM2-135M-Instruct config.json): 30 layers, hidden 576,
    # 9 query / 3 KV heads, head dim 64, max_position_embeddings 8192, vocab 49152.
    assert (m.architecture, m.num_layers, m.inspection.hidden_size) == ("llama", 30, 576)
    assert (m.num_query_heads, m.num_kv_heads, m.head_dim) == (9, 3, 64)
    assert m.native_context_tokens == 8192 and m.inspection.vocab_size == 49152
    # Publisher: "135M parameters"; tensors sum to 134.5 M (tied embeddings counted once).
    assert abs(m.params_total - 135e6) / 135e6 < 0.02
    # Verified from the stored tensor types, not the file name: Q4_1 blocks (32 weights, fp16
    # scale + min = 20 bytes per 32 weights = 5.0 bits/weight); token embedding kept at Q8_0.
    q = m.inspection.quantization
    assert (q.method, q.bits, q.group_size, q.scheme) == ("gguf", 4, 32, "W4A16")
    assert m.weight_format.startswith("Q4_1") and "Q8_0" in q.source
    assert m.inspection.chat_template_present and m.inspection.license == "apache-2.0"
    assert m.inspection.tie_word_embeddings  # no output.weight tensor in the GGUF
    assert m.inspection.params_active_per_token == m.params_total  # dense, tied: all read
    # 30 x 3 x 64 x 2 (K and V) x 2 bytes = 23,040 B/token, as vLLM's log implies.
    assert m.kv_bytes_per_token_f16 == 23_040


def test_hf_profile_agrees_with_gguf(hf_model, gguf_model):
    h, g = profile_model(str(hf_model)), profile_model(str(gguf_model))
    for field in ("num_layers", "num_query_heads", "num_kv_heads", "head_dim",
                  "native_context_tokens", "kv_bytes_per_token_f16"):
        assert getattr(h, field) == getattr(g, field), field
    assert h.inspection.chat_template_present
    assert h.inspection.params_total == g.params_total  # config arithmetic == GGUF tensor sum


def test_bad_paths_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        profile_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(InputError, match="no config.json"):
        profile_model(str(tmp_path))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(InputError, match="not a readable GGUF"):
        profile_model(str(junk))
