"""infopt's calibrated quantization of an HF checkpoint with llm-compressor, run with the
python of its own environment (`make engines-quantize`: llmcompressor beside the vLLM
environment's torch). Standalone on purpose: it imports nothing of infopt. Prints one JSON line.

Schemes (llm-compressor's own preset names and recipes, examples/quantization_w8a8_int8,
quantization_w4a16 and quantization_w8a8_fp8 of vllm-project/llm-compressor):
- W8A8: SmoothQuantModifier(smoothing_strength=0.8) then GPTQModifier(scheme="W8A8"): int8
  weights per channel, int8 activations per token (dynamic); calibrated.
- W4A16: GPTQModifier with the W4A16 preset's arguments (symmetric int4 weights per group,
  16-bit activations) at the largest group of 128, 64 or 32 that tiles every row; calibrated.
- FP8_DYNAMIC: QuantizationModifier(scheme="FP8_DYNAMIC"): fp8 weights per channel, fp8
  activations per token at run time; no calibration data.
lm_head stays unquantized in each (as the examples do). The output is written to a temporary
folder beside `--out` and renamed when complete.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def _group_size(model: Any) -> int:
    """The largest of 128, 64, 32 that divides every quantized Linear's input columns: GPTQ's
    groups must tile a row (llm-compressor refuses otherwise; SmolLM2-135M's hidden size 576
    is 4.5 x 128, so its W4A16 runs in groups of 64)."""
    import torch

    columns = {m.in_features for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head")}
    return next((g for g in (128, 64, 32) if all(c % g == 0 for c in columns)), 0)


def _recipe(scheme: str, model: Any) -> tuple[list, dict]:
    """(the recipe, what the summary says about it)."""
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

    if scheme == "W8A8":
        from llmcompressor.modifiers.smoothquant import SmoothQuantModifier
        return [SmoothQuantModifier(smoothing_strength=0.8),
                GPTQModifier(targets="Linear", scheme="W8A8", ignore=["lm_head"])], {}
    if scheme == "W4A16":
        from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

        group = _group_size(model)
        if not group:
            raise SystemExit(json.dumps({"error": "no group size of 128, 64 or 32 divides "
                                         "every Linear layer's columns: W4A16 cannot tile "
                                         "this model's rows"}))
        # llm-compressor's W4A16 preset (symmetric int4, per group) at a group that fits.
        args = QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group",
                                group_size=group, dynamic=False)
        scheme_ = QuantizationScheme(targets=["Linear"], weights=args)
        return [GPTQModifier(config_groups={"group_0": scheme_}, ignore=["lm_head"])], \
            {"group_size": group}
    if scheme == "FP8_DYNAMIC":
        return [QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC",
                                     ignore=["lm_head"])], {}
    raise SystemExit(json.dumps({"error": f"unknown scheme {scheme!r}"}))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--scheme", required=True)
    p.add_argument("--calibration", help="a JSON file: a list of texts")
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--max-seq-len", type=int, default=512)
    a = p.parse_args(argv)
    t0 = time.time()
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype="auto")
    kwargs: dict = {}
    used = 0
    if a.scheme != "FP8_DYNAMIC":
        from datasets import Dataset

        texts = json.loads(Path(a.calibration).read_text(encoding="utf-8"))[:a.samples]
        used = len(texts)
        kwargs = dict(dataset=Dataset.from_dict({"text": texts}), max_seq_length=a.max_seq_len,
                      num_calibration_samples=used)
    out = Path(a.out)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    recipe, about = _recipe(a.scheme, model)
    oneshot(model=model, recipe=recipe, output_dir=str(tmp), tokenizer=tok, **kwargs)
    tmp.replace(out)
    import llmcompressor
    print(json.dumps({"scheme": a.scheme, "out": str(out), "samples": used,
                      "max_seq_len": a.max_seq_len, "seconds": round(time.time() - t0, 1),
                      "llmcompressor": llmcompressor.__version__, **about}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
