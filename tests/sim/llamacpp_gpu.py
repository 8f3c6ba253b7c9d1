"""SIMULATED GPU offload for llama.cpp (issue 49): a stand-in for a CUDA build of `llama-server`
where no GPU exists, so that a model larger than the GPU is tuned with partial offload (-ngl N)
against a program, not a reading.

It is half real: the REAL CPU llama-server (INFOPT_SIM_LLAMA_REAL, the one `make engines`
built) parses every flag infopt sends (a flag it does not know fails the start), loads the real
GGUF and serves every request, so the contract, the quality gate and the benchmark measure a
real engine. What is simulated is the GPU, and only what a GPU changes in the log:
- `--list-devices` names one SIMULATED CUDA device (INFOPT_SIM_GPU: JSON with name and
  memory_bytes), so infopt takes it for a CUDA build;
- the start sizes the device's share with its own arithmetic (never infopt's cost model): the
  GGUF file split evenly over n_layer + 1 offloadable layers (llama.cpp counts the output
  layer), each offloaded layer's KV (2 x n_head_kv x head_dim x the -ctk type's bytes per
  token per layer, x -c cells, the model's trained context without -c) and a fixed compute
  buffer; -ngl N puts N of them on the device,
  -ngl all or a number above n_layer all of them, no -ngl or "auto" as many as fit (llama.cpp's
  own fitting);
- when that does not fit, it fails as a CUDA build does ("cudaMalloc failed: out of memory",
  then "failed to load model"), exit 1;
- else it replaces the real build's buffer and offload lines with llama.cpp's own formats
  ("load_tensors: offloaded N/M layers to GPU", "load_tensors: CUDA0 model buffer size = ... MiB",
  "llama_kv_cache: CUDA0 KV buffer size = ... MiB"), each marked [SIMULATED], and, as the real
  build does, prints them only at log verbosity 4 or more (-lv 4, or -v): libllama logs them at
  INFO, which common/log.cpp maps to TRACE (4), above the default threshold of 3.

Timing is the CPU's: a layer "on the GPU" serves no faster. Standard library plus gguf-py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

MIB = 2**20
TRACE = 4  # common/log.h LOG_LEVEL_TRACE: the level libllama's INFO lines print at
COMPUTE_BUFFER_BYTES = 160 * MIB  # the stand-in's own guess of a CUDA compute buffer
KV_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32,
                 "q4_1": 20 / 32, "iq4_nl": 18 / 32, "q5_0": 22 / 32, "q5_1": 24 / 32}
# The real build's lines the simulated device replaces (its CPU buffers and its ignored -ngl).
_REPLACED = re.compile(r"load_tensors:\s+\S+ model buffer size|load_tensors: offloaded|"
                       r"llama_kv_cache:\s+\S+ KV buffer size|no usable GPU found|"
                       r"--gpu-layers option will be ignored")


def write_server(folder: Path, real: str) -> str:
    """An executable `llama-server` that runs this stand-in over the real one at `real`."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "llama-server"
    exe.write_text(f"#!/bin/sh\nINFOPT_SIM_LLAMA_REAL='{real}' exec '{sys.executable}' "
                   f"'{Path(__file__).resolve()}' \"$@\"\n")
    exe.chmod(0o755)
    return str(exe)


def _gpu() -> dict:
    gpu = json.loads(os.environ["INFOPT_SIM_GPU"])
    return {"name": gpu["name"], "memory_bytes": int(gpu["memory_bytes"])}


def _flag(argv: list[str], *names: str) -> str | None:
    for i, a in enumerate(argv[:-1]):
        if a in names:
            return argv[i + 1]
    return None


def _model(path: str) -> dict:
    import gguf

    r = gguf.GGUFReader(path)

    def field(key: str) -> int:
        f = r.fields[key]
        return int(f.parts[f.data[0]][0])
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    heads = field(f"{arch}.attention.head_count")
    sizes = {t.name: int(t.n_bytes) for t in r.tensors}
    layers = field(f"{arch}.block_count")
    return {"layers": layers, "tensor_bytes": sum(sizes.values()),
            "output_bytes": sizes.get("output.weight", sizes.get("token_embd.weight", 0))
            + sizes.get("output_norm.weight", 0),
            "block_bytes": [sum(b for n, b in sizes.items() if n.startswith(f"blk.{i}."))
                            for i in range(layers)],
            "context": field(f"{arch}.context_length"),
            "kv_heads": field(f"{arch}.attention.head_count_kv"),
            "head_dim": field(f"{arch}.embedding_length") // heads}


def split(argv: list[str], gpu: dict) -> dict:
    """Where the stand-in puts the model: layers offloaded, device bytes, fits."""
    m = _model(_flag(argv, "-m", "--model") or "")
    layers = m["layers"]
    offloadable = layers + 1
    # -c 0 or none: llama.cpp takes the model's trained context as the whole pool
    cells = int(_flag(argv, "-c", "--ctx-size") or 0) or m["context"]
    kv_type = _flag(argv, "-ctk", "--cache-type-k") or "f16"
    kv_layer = cells * 2 * m["kv_heads"] * m["head_dim"] * KV_TYPE_BYTES[kv_type]

    def on_device(n: int) -> tuple[float, int]:
        """(weight bytes, decoder blocks) on the GPU at -ngl n: the output, then the last
        blocks."""
        blocks = min(max(0, n - 1), layers)
        return (m["output_bytes"] if n else 0) + sum(m["block_bytes"][layers - blocks:]), blocks

    def device_bytes(n: int) -> float:
        weights, blocks = on_device(n)
        return weights + blocks * kv_layer + COMPUTE_BUFFER_BYTES

    asked = _flag(argv, "-ngl", "--gpu-layers", "--n-gpu-layers")
    if asked in (None, "auto"):
        n = max((k for k in range(offloadable + 1) if device_bytes(k) <= gpu["memory_bytes"]),
                default=0)
    else:
        n = offloadable if asked == "all" else min(int(asked), offloadable)
    weights, blocks = on_device(n)
    return {"n": n, "of": offloadable, "weights": weights, "host_weights": m["tensor_bytes"],
            "kv": blocks * kv_layer, "host_kv": (layers - blocks) * kv_layer,
            "need": device_bytes(n), "fits": device_bytes(n) <= gpu["memory_bytes"]}


def _said(s: dict, gpu: dict) -> list[str]:
    return [f"load_tensors: offloaded {s['n']}/{s['of']} layers to GPU [SIMULATED]",
            f"load_tensors:        CUDA0 model buffer size = {s['weights'] / MIB:.2f} MiB "
            "[SIMULATED]",
            f"load_tensors:   CPU_Mapped model buffer size = {s['host_weights'] / MIB:.2f} MiB "
            "[SIMULATED]",
            f"llama_kv_cache:      CUDA0 KV buffer size = {s['kv'] / MIB:.2f} MiB [SIMULATED]",
            f"llama_kv_cache:        CPU KV buffer size = {s['host_kv'] / MIB:.2f} MiB "
            "[SIMULATED]"]


def _verbosity(argv: list[str]) -> int:
    """The log threshold the real build sets from these flags (common/arg.cpp: -v is every
    level; -lv N; the default 3)."""
    if any(a in argv for a in ("-v", "--verbose", "--log-verbose")):
        return 2**31 - 1
    level = _flag(argv, "-lv", "--verbosity", "--log-verbosity")
    return int(level) if level is not None else 3


def _fail(s: dict, gpu: dict) -> None:
    print(f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {s['need'] / MIB:.2f} MiB "
          f"on device 0: cudaMalloc failed: out of memory [SIMULATED {gpu['name']}, "
          f"{gpu['memory_bytes'] / MIB:.0f} MiB]", flush=True)
    print("llama_model_load: error loading model: unable to allocate CUDA0 buffer", flush=True)
    print("srv    load_model: failed to load model", flush=True)
    raise SystemExit(1)


def serve(real: str, argv: list[str], gpu: dict) -> int:
    print(f"SIMULATED GPU offload on SIMULATED {gpu['name']} (tests/sim/llamacpp_gpu.py): the "
          "real CPU llama-server serves; no GPU ran this", flush=True)
    s = split(argv, gpu)
    if not s["fits"]:
        _fail(s, gpu)
    if _verbosity(argv) >= TRACE:
        print("\n".join(_said(s, gpu)), flush=True)
    proc = subprocess.Popen([real, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    assert proc.stdout is not None
    for line in proc.stdout:
        if not _REPLACED.search(line):
            sys.stdout.write(line)
            sys.stdout.flush()
    return proc.wait()


def main(argv: list[str]) -> int:
    real, gpu = os.environ["INFOPT_SIM_LLAMA_REAL"], _gpu()
    if "--list-devices" in argv:
        print(f"Available devices:\n  CUDA0: SIMULATED {gpu['name']} "
              f"({gpu['memory_bytes'] // MIB} MiB, {gpu['memory_bytes'] // MIB} MiB free)")
        return 0
    if "--version" in argv:
        out = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=30)
        text = re.sub(r"^(version:\s*.+?)\s*$", r"\1+simulated-gpu", out.stdout + out.stderr,
                      count=1, flags=re.M)
        print(text.rstrip())
        return out.returncode
    return serve(real, argv, gpu)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
