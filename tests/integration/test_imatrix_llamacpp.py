"""GGUF requantization with an importance matrix (issue 50), against the real tools: the real
`llama-imatrix` (make engines-quantize) over infopt's default calibration sample, then the real
`llama-quantize --imatrix` from the shipped Q4_1, as the optimize flow does
(tasks/weights.py); the variant served by real llama-server and judged by the quality gate
beside the same type made without it, against the F16 reference (the Q4_1 dequantized, as in
test_quality_llamacpp.py). The calibration sample is disjoint from the gate's prompts
(infopt.engines.calibration_texts), so the gain is not measured on the text it was fitted to.
e2e: llama-imatrix is built by `make engines-quantize`, which `make test-e2e` needs."""

from __future__ import annotations

import pytest

from infopt.engines import endpoint_for, process
from infopt.engines.calibration_texts import default_texts
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.quantize import importance_matrix, requantize
from infopt.quality.check import check_quality
from infopt.report.quality_text import render_verdict
from infopt.specs.serving import LlamaCppConfig

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]

TOLERANCE = 0.05  # as test_quality_llamacpp.py
PROMPTS = 16
# k-quants (llama-quantize uses the matrix for k-quants and i-quants): Q2_K, which the gate
# fails without it (62.9% on the AVX2 EPYC), and Q3_K_M.
TYPES = ("Q2_K", "Q3_K_M")


@pytest.fixture(scope="module")
def variants(engine_paths, gguf_model, tmp_path_factory):
    if not engine_paths.llama_imatrix.exists():
        pytest.fail("llama-imatrix missing: run `make engines-quantize`")
    d = tmp_path_factory.mktemp("variants")
    matrix = importance_matrix(engine_paths.llama_imatrix, gguf_model, default_texts(64),
                               d / "imatrix.gguf")
    quantize = engine_paths.llama_quantize
    files = {"F16": requantize(quantize, gguf_model, d / "F16.gguf", "F16")}
    for t in TYPES:
        files[t] = requantize(quantize, gguf_model, d / f"{t}.gguf", t)
        files[f"{t}+imatrix"] = requantize(quantize, gguf_model, d / f"{t}-imatrix.gguf", t,
                                           imatrix=matrix)
    return matrix, files


def _serve(binary, model, d, name, **knobs):
    cfg = LlamaCppConfig(model_path=str(model), served_model_name="smollm2", threads=2,
                         ctx_per_slot_tokens=2048, **knobs)
    return process.start(llamacpp.ADAPTER, cfg, str(binary), d / f"{name}.log",
                         weights_bytes=model.stat().st_size)


def test_a_variant_made_with_the_importance_matrix_is_served_and_judged(
        variants, llama_server, tmp_path):
    matrix, files = variants
    assert matrix.is_file() and not list(matrix.parent.glob("*.partial*"))
    assert not list(matrix.parent.glob("*.sample.txt"))  # the sample file is removed
    # The matrix changed the rounding: the same type's bytes differ.
    assert all(files[t].read_bytes() != files[f"{t}+imatrix"].read_bytes() for t in TYPES)
    ref = _serve(llama_server, files["F16"], tmp_path, "ref")
    floor = _serve(llama_server, files["F16"], tmp_path, "floor", parallel_slots=2)
    verdicts = {}
    try:
        for name in [n for n in files if n != "F16"]:
            cand = _serve(llama_server, files[name], tmp_path, name)
            try:
                _, verdicts[name] = check_quality(
                    endpoint_for("llamacpp", ref.base_url, "smollm2"),
                    endpoint_for("llamacpp", cand.base_url, "smollm2"),
                    floor=endpoint_for("llamacpp", floor.base_url, "smollm2"),
                    tolerance=TOLERANCE, reference_file=tmp_path / "reference.json",
                    max_prompts=PROMPTS)
            finally:
                process.stop(cand.pid)
    finally:
        process.stop(ref.pid)
        process.stop(floor.pid)
    for name, v in verdicts.items():
        print(f"\n{name}\n{render_verdict(v)}")
    assert all(v.candidate is not None and v.candidate.positions > 0
               for v in verdicts.values())
