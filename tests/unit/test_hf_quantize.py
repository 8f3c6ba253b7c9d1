"""Calibrated local quantization of HF checkpoints, without running llm-compressor: the default
calibration sample (fixed, and never the gate's own prompts), a request's sample read or
refused, the gate's description, the runner's failures, and which variants a run makes for
which engine (GGUF types with llama-quantize, HF schemes with llm-compressor)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from infopt.engines.calibration_texts import default_texts, read_texts, sample_digest
from infopt.engines.hf_quantize import SCHEMES, estimate_s, hf_quantize_gate, quantize_hf
from infopt.quality.long_document import entries
from infopt.quality.prompts import PROMPT_POOL
from infopt.specs.approval import AnswerSource, GateAnswer
from infopt.specs.base import InfoptError, InputError
from infopt.specs.request import ModelTarget, OptimizeRequest, QuantizeSettings


def test_the_default_sample_is_fixed_and_shares_no_text_with_what_the_gate_scores():
    texts = default_texts(64)
    assert texts == default_texts(64) and len(set(texts)) == 64
    assert sample_digest(texts) == sample_digest(default_texts(64))
    assert sample_digest(texts[:32]) != sample_digest(texts)
    judged = list(PROMPT_POOL.values()) + [e.text for e in entries(50)]
    assert not any(j[:40] in t or t[:40] in j for t in texts for j in judged)


def test_a_requests_sample_is_read_by_paragraph_and_a_short_or_unreadable_one_refused(
        tmp_path):
    good = tmp_path / "calib.txt"
    good.write_text("\n\n".join(f"sample {i} about our product" for i in range(10)))
    assert read_texts(str(good))[3] == "sample 3 about our product"
    few = tmp_path / "few.txt"
    few.write_text("one\n\ntwo")
    with pytest.raises(InputError, match="2 sample\\(s\\); give at least 8"):
        read_texts(str(few))
    with pytest.raises(InputError, match="cannot read it as UTF-8 text"):
        read_texts(str(tmp_path / "missing.txt"))


def test_the_gate_says_what_runs_on_which_data_for_how_long():
    q = QuantizeSettings(samples=32, max_seq_len=256, budget_s=900)
    gate = hf_quantize_gate(Path("/m/SmolLM2"), 270_000_000, 135_000_000, "W8A8",
                            "llm-compressor 0.14.0.1", Path("/cache"), q, "the default sample")
    assert gate.key == "quantize-w8a8" and gate.kind.value == "quantize"
    assert "SmoothQuant (strength 0.8) then GPTQ" in gate.description
    assert "the default sample, 32 samples of up to 256 tokens" in gate.description
    assert "stopped after 900 s" in gate.description and "(estimate" in gate.description
    assert gate.details["estimated_s"] == pytest.approx(454.0)  # the measured run itself
    fp8 = hf_quantize_gate(Path("/m/SmolLM2"), 270_000_000, 135_000_000, "FP8_DYNAMIC",
                           "llm-compressor", Path("/cache"), q, "the default sample")
    assert "none (this scheme needs none)" in fp8.description
    assert fp8.details["calibration"] is None
    # Twice the calibration tokens, twice the estimate; an uncalibrated scheme is quick.
    assert estimate_s(135_000_000, 64, 256, "W4A16") == pytest.approx(908.0)
    assert estimate_s(135_000_000, 64, 256, "FP8_DYNAMIC") < 100


def _fake_python(folder: Path, body: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    py = folder / "python"
    py.write_text("#!/bin/sh\n" + body)
    py.chmod(0o755)
    return str(py)


def test_the_runner_returns_the_summary_only_with_a_complete_folder(tmp_path):
    out = tmp_path / "variant"
    ok = _fake_python(tmp_path, f'mkdir -p "{out}"\necho \'{{"scheme": "W8A8", '
                                f'"seconds": 1.5, "samples": 8}}\'\n')
    assert quantize_hf(ok, tmp_path, out, "W8A8", ["x"] * 8)["seconds"] == 1.5
    failing = _fake_python(tmp_path / "f", 'echo "ValueError: columns not divisible" >&2\n'
                                           "exit 1\n")
    with pytest.raises(InfoptError, match="failed \\(status 1\\): ValueError: columns"):
        quantize_hf(failing, tmp_path, tmp_path / "other", "W8A8", ["x"] * 8)
    slow = _fake_python(tmp_path / "s", "sleep 5\n")
    with pytest.raises(InfoptError, match="did not finish within 1 s"):
        quantize_hf(slow, tmp_path, tmp_path / "late", "W8A8", ["x"] * 8, budget_s=1)
    with pytest.raises(InfoptError, match="choose from W8A8, W4A16, FP8_DYNAMIC"):
        quantize_hf(ok, tmp_path, out, "Q4_0", ["x"] * 8)


def _deny(gate) -> GateAnswer:
    return GateAnswer(kind=gate.kind, key=gate.key, title=gate.title, approved=False,
                      source=AnswerSource.PERSON, answered_at="2026-12-07T00:00:00+0000")


def _model(path: str):
    return SimpleNamespace(path=path, file_bytes=270_000_000, weight_format="bf16",
                           inspection=SimpleNamespace(params_total=135_000_000))


def test_each_engine_makes_its_own_kind_of_variant_and_says_which_it_cannot(
        tmp_path, monkeypatch):
    from flows import weights

    llmc = tmp_path / "llmc-python"
    llmc.write_text("")
    monkeypatch.setattr(weights, "default_paths", lambda: SimpleNamespace(llmc_python=llmc))
    asked = []

    def deny(gate):
        asked.append(gate)
        return _deny(gate)

    req = OptimizeRequest(model=ModelTarget(path=str(tmp_path)), requantize=["Q8_0", "W8A8"])
    made, answers, notes = weights.weight_variants(req, _model(str(tmp_path)), "vllm", "0.32.0",
                                                   "sha256:" + "0" * 64, deny)
    assert made == {} and list(answers) == ["W8A8"]
    assert asked[0].title.endswith("to W8A8 with llm-compressor")
    assert "requantize ['Q8_0']: not applicable" in notes[0]
    assert "weights W8A8: not made (the quantize gate was not approved)" in notes[-1]
    # llm-compressor missing here: nobody is asked about what cannot run.
    llmc.unlink()
    asked.clear()
    _, answers, notes = weights.weight_variants(req, _model(str(tmp_path)), "vllm", "0.32.0",
                                                "sha256:" + "0" * 64, deny)
    assert not asked and answers == {} and "make engines-quantize" in notes[-1]


def test_pre_authorized_vllm_tries_the_llm_compressor_schemes():
    from flows.weights import requested_types

    req = OptimizeRequest(model=ModelTarget(path="/m"), authorize=["quantize"])
    types, why = requested_types(req, "vllm", None)
    assert why is None and types == ["W4A16", "W8A8", "FP8_DYNAMIC"]
    assert set(types) == set(SCHEMES)
    req = OptimizeRequest(model=ModelTarget(path="/m"), requantize=["W4A16"])
    assert json.loads(req.model_dump_json())["requantize"] == ["W4A16"]


def test_a_calibration_file_that_is_not_there_is_refused_where_the_request_is_read(tmp_path):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="quantize.calibration '.*nope.txt' is not a file"):
        OptimizeRequest(model=ModelTarget(path="/m"),
                        quantize={"calibration": str(tmp_path / "nope.txt")})
    (tmp_path / "ok.txt").write_text("x")
    assert OptimizeRequest(model=ModelTarget(path="/m"), quantize={
        "calibration": str(tmp_path / "ok.txt")}).quantize.samples == 64
