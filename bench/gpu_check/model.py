"""The model the check measures: a stand-in of the bundled GGUF, rebuilt there from a recipe.

Why a stand-in: the device machine receives at most 64 MiB and reaches no network, and the
bundled SmolLM2-135M-Instruct Q4_1 GGUF is 94 MiB (98,362,432 bytes) and does not compress
(zstd: 88 MiB). Dense decode does the same work whatever the weights' values (same kernels,
same bytes read per token, forced output lengths with ignore_eos, greedy sampling after
top-k), so the decode rate measured on the stand-in is the bundled model's on that GPU; its
text is meaningless, so any quality verdict on it is too.

  recipe   (prepare, here)  the bundled GGUF's header (metadata, tokenizer, tensor table) and a
                            manifest of its tensors: 0.5 MiB gzipped instead of the 94 MiB file
  standin  (run, there)     a GGUF of the bundled model's exact layout from that recipe: the
                            same header bytes, tensor names, shapes, quantization types, offsets
                            and file size, with synthetic weights in place of the trained ones

Standard library and numpy only, except `recipe` (it reads the bundled GGUF with the `gguf`
package, here, in the project's venv).
"""

from __future__ import annotations

import gzip
import json
import math
import time
from pathlib import Path

from bench.gpu_check.common import sha256_file

# ggml type name -> (elements per block, bytes per block). Only the types the bundled model
# holds (and their neighbours) have a filler below; `recipe` refuses a model with others.
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q8_0": (32, 34)}
SEED = 32  # issue 32: every stand-in built from one recipe is byte-identical


# ---------------------------------------------------------------------------------------------
# recipe: here, from the bundled GGUF


def recipe(gguf_path: Path, out_dir: Path) -> dict:
    from gguf import GGUFReader  # the project's dependency; not needed on the GPU machine

    reader = GGUFReader(str(gguf_path))
    tensors, unsupported = [], set()
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind not in BLOCKS:
            unsupported.add(kind)
        tensors.append({"name": t.name, "type": kind, "shape": [int(x) for x in t.shape],
                        "offset": int(t.data_offset), "n_bytes": int(t.n_bytes)})
    if unsupported:
        raise SystemExit(f"gpu_check recipe: {gguf_path} holds tensor types {sorted(unsupported)}"
                         f" that the stand-in has no filler for (only {sorted(BLOCKS)})")
    size = gguf_path.stat().st_size
    header = gguf_path.read_bytes()[:reader.data_offset]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "header.bin.gz").write_bytes(gzip.compress(header, 9, mtime=0))
    manifest = {
        "what": "header and tensor table of the bundled GGUF, for bench/gpu_check.py standin",
        "source_name": gguf_path.name, "source_bytes": size,
        "source_sha256": sha256_file(gguf_path),
        "header_bytes": len(header), "seed": SEED, "tensors": tensors,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


# ---------------------------------------------------------------------------------------------
# standin: there, from the recipe


def _scale(t: dict) -> float:
    """Half-width of the uniform weights: std 1/sqrt(fan-in) (ne0, the row length), so the
    activations keep their size through the layers and the logits are neither flat nor spiky."""
    return math.sqrt(3.0 / max(1, t["shape"][0]))


def _fill(t: dict, rng) -> bytes:
    import numpy as np

    kind, n = t["type"], t["n_bytes"]
    per_block, block_bytes = BLOCKS[kind]
    if n % block_bytes:
        raise SystemExit(f"gpu_check standin: {t['name']}: {n} bytes is no whole number of "
                         f"{kind} blocks")
    blocks, s = n // block_bytes, _scale(t)
    if kind in ("F32", "F16"):
        dtype = np.float32 if kind == "F32" else np.float16
        if len(t["shape"]) == 1:  # norms scale by 1, biases add 0
            return np.full(blocks, 1.0 if "norm" in t["name"] else 0.0, dtype).tobytes()
        return rng.uniform(-s, s, blocks).astype(dtype).tobytes()
    out = np.empty((blocks, block_bytes), np.uint8)
    if kind == "Q4_0":  # d, 16 bytes of nibbles q: w = d * (q - 8)
        head = np.array([s / 8], np.float16)
    elif kind == "Q4_1":  # d, m, nibbles: w = d * q + m
        head = np.array([2 * s / 15, -s], np.float16)
    else:  # Q8_0: d, 32 int8 q: w = d * q
        head = np.array([s / 127], np.float16)
    head_bytes = head.view(np.uint8)
    out[:, :head_bytes.size] = head_bytes
    out[:, head_bytes.size:] = rng.integers(0, 256, (blocks, block_bytes - head_bytes.size),
                                            dtype=np.uint8)
    return out.tobytes()


def standin(recipe_dir: Path, out: Path) -> dict:
    import numpy as np

    manifest = json.loads((recipe_dir / "manifest.json").read_text())
    header = gzip.decompress((recipe_dir / "header.bin.gz").read_bytes())
    if len(header) != manifest["header_bytes"]:
        raise SystemExit("gpu_check standin: the header does not match its manifest")
    t0 = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial")
    with tmp.open("wb") as fh:
        fh.write(header)
        pos = len(header)
        for i, t in enumerate(sorted(manifest["tensors"], key=lambda x: x["offset"])):
            if t["offset"] < pos:
                raise SystemExit(f"gpu_check standin: {t['name']} overlaps the tensor before it")
            fh.write(b"\0" * (t["offset"] - pos))  # the alignment padding, zeros as written
            fh.write(_fill(t, np.random.default_rng([manifest["seed"], i])))
            pos = t["offset"] + t["n_bytes"]
        fh.write(b"\0" * (manifest["source_bytes"] - pos))
    if tmp.stat().st_size != manifest["source_bytes"]:
        raise SystemExit(f"gpu_check standin: wrote {tmp.stat().st_size} bytes, the bundled "
                         f"model has {manifest['source_bytes']}")
    tmp.replace(out)
    return {"path": str(out), "bytes": out.stat().st_size, "sha256": sha256_file(out),
            "seconds": round(time.monotonic() - t0, 2),
            "layout_of": {k: manifest[k] for k in ("source_name", "source_bytes",
                                                   "source_sha256")},
            "note": "synthetic weights in the bundled model's exact GGUF layout (header, "
                    "tokenizer, tensor shapes and types, offsets, size); its text is meaningless"}
