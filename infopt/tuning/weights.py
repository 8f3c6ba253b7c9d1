"""Weight candidates made on this machine (`requantize`: llama-quantize types of the checkpoint's
own GGUF): the quantize gate's description of each; they are the ladder's weights dimension.
Pure.

Sizes are estimates from each type's bits per weight (llama.cpp's quantize table; the metadata
and the non-quantized tensors add a little) and are labelled so; the real file's size is
recorded once it exists. Requantizing an already-quantized file (the bundled Q4_1) starts from
its rounding, not from the original weights: the quality gate judges every variant against the
reference either way."""

from __future__ import annotations

from pathlib import Path

from infopt.specs.approval import GateKind, GateRequest

# Bits per weight of llama.cpp's types (tools/quantize/quantize.cpp, "bpw" in its type list).
BITS_PER_WEIGHT = {"F16": 16.0, "BF16": 16.0, "Q8_0": 8.5, "Q6_K": 6.56, "Q5_K_M": 5.69,
                   "Q4_K_M": 4.89, "Q4_0": 4.34, "Q4_1": 4.78, "Q3_K_M": 3.91, "Q2_K": 2.96}
# llama-quantize reads and writes at several hundred MB/s on 2 cores (SmolLM2-135M, 0.1 GB:
# under a second); the estimate is generous on purpose.
ESTIMATE_BYTES_PER_S = 100e6


def quantize_gate(source: Path, source_bytes: int, params: int | None, gguf_type: str,
                  tool: str, out_dir: Path, calibration: str | None = None) -> GateRequest:
    """The quantize gate of one GGUF type; `calibration`: the sample an importance matrix is
    computed on (llama-imatrix, once for all types), None: no importance matrix."""
    est = (params * BITS_PER_WEIGHT[gguf_type] / 8) if params else source_bytes
    secs = max(1.0, (source_bytes + est) / ESTIMATE_BYTES_PER_S)
    data = (f"{calibration}, through an importance matrix (llama-imatrix: one forward pass of "
            "the model over the sample, before the first type; not in the time estimate)"
            if calibration else "none (no importance matrix)")
    return GateRequest(
        kind=GateKind.QUANTIZE, key=f"quantize-{gguf_type.lower().replace('_', '-')}"
                                    + ("-imatrix" if calibration else ""),
        title=f"requantize {source.name} to {gguf_type} with llama-quantize"
              + (" and an importance matrix" if calibration else ""),
        description=(
            f"### Local quantization: {source.name} -> {gguf_type}\n\n"
            f"- **Input:** `{source}` (GGUF, {source_bytes / 1e9:.2f} GB)\n"
            f"- **Output:** GGUF {gguf_type} in `{out_dir}` (estimate: ~{est / 1e9:.2f} GB at "
            f"{BITS_PER_WEIGHT[gguf_type]} bits per weight)\n"
            f"- **Tool:** {tool} `--allow-requantize` (from the already-quantized weights)\n"
            f"- **Estimated time:** ~{secs:.0f} s on this machine (estimate)\n"
            f"- **Calibration data:** {data}\n\n"
            "The variant then runs as a weight candidate: the quality gate judges it against "
            "the reference before it is measured. Deny to skip it."),
        details={"input": str(source), "output_type": gguf_type, "tool": tool,
                 "estimated_bytes": int(est), "estimated_s": round(secs, 1),
                 "calibration": calibration})
