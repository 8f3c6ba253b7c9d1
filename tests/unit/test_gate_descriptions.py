"""What each gate tells the person answering it: exactly what will happen, with sizes and
times labelled as estimates; and the report's binding line, read from sockets."""

from __future__ import annotations

from pathlib import Path

from infopt.tuning.weights import quantize_gate


def test_the_quantize_gate_names_input_output_tool_time_disk_and_calibration():
    g = quantize_gate(Path("/m/SmolLM2.Q4_1.gguf"), 98_362_432, 134_515_008, "Q8_0",
                      "llama-quantize (llama.cpp 0.3.36)", Path("/cache/requantized"))
    assert g.kind.value == "quantize" and g.key == "quantize-q8-0"
    d = g.description
    assert "`/m/SmolLM2.Q4_1.gguf` (GGUF, 0.10 GB)" in d
    assert "GGUF Q8_0 in `/cache/requantized` (estimate: ~0.14 GB at 8.5 bits per weight)" in d
    assert "llama-quantize (llama.cpp 0.3.36) `--allow-requantize`" in d
    assert "(estimate)" in d and "**Calibration data:** none" in d
    assert g.details["estimated_bytes"] == int(134_515_008 * 8.5 / 8)


def test_binding_line_reads_the_sockets_and_flags_a_wide_bind():
    from infopt.report.approvals_text import _loopback

    assert _loopback("127.0.0.1:8080") and _loopback("[::1]:8080")
    assert not _loopback("0.0.0.0:8080") and not _loopback("10.0.0.5:80")


def test_a_gate_with_an_importance_matrix_names_its_sample_and_is_its_own_question():
    g = quantize_gate(Path("/m/SmolLM2.Q4_1.gguf"), 98_362_432, 134_515_008, "Q2_K",
                      "llama-quantize (llama.cpp 0.3.36)", Path("/cache/requantized"),
                      calibration="infopt's default chat sample, 64 samples")
    # Another key: an answer about the plain Q2_K does not approve this one.
    assert g.key == "quantize-q2-k-imatrix" and "importance matrix" in g.title
    assert ("**Calibration data:** infopt's default chat sample, 64 samples, through an "
            "importance matrix (llama-imatrix" in g.description)
    assert g.details["calibration"] == "infopt's default chat sample, 64 samples"
