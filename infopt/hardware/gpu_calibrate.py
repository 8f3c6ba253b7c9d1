"""infopt's GPU envelope calibration, run with an engine environment's own python (its torch and
CUDA build: what the engine's kernels get, not a datasheet). Standalone on purpose: it imports
nothing of infopt, which the engine's environment does not have. Prints one JSON line.

- Device-to-device copy: `dst.copy_(src)` of `--copy-mib` MiB; bytes moved = 2 x the size (one
  read, one write), as the host's memory-copy measure counts them.
- Dense GEMM per dtype, m = n = k = `--gemm`: bf16 and fp16 (`a @ b`), fp8 e4m3 with per-tensor
  scales (`torch._scaled_mm`, bf16 out; CUDA capability 8.9 or newer) and int8
  (`torch._int_mm`, int32 out); 2 m n k operations each. A dtype the build or device cannot run
  is reported under "skipped" with torch's own error, never guessed.

Each is warmed up once and timed over `--repeats` runs (CUDA events on a GPU, the wall clock
with a synchronize elsewhere); the median and the range are printed.

Also runs on `--device cpu` (the CPU build's torch), which is how a machine without a GPU
checks this script end to end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _timer(torch, device):
    """A function timing `fn` once, in seconds."""
    if device.type == "cuda":
        def run(fn):
            start, end = (torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True))
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        return run

    def run_cpu(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return run_cpu


def _rates(timer, fn, work: float, repeats: int) -> dict:
    fn()  # warm-up: kernels chosen, caches and clocks up
    rates = sorted(work / timer(fn) for _ in range(repeats))
    return {"median": statistics.median(rates), "min": rates[0], "max": rates[-1],
            "repeats": repeats}


def _gemm(torch, device, dtype: str, n: int):
    """The GEMM of `dtype` as a no-argument function, or raise what torch raises."""
    if dtype in ("bf16", "fp16"):
        t = torch.bfloat16 if dtype == "bf16" else torch.float16
        a = torch.randn(n, n, device=device, dtype=t)
        b = torch.randn(n, n, device=device, dtype=t)
        return lambda: a @ b
    if dtype == "fp8":
        a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)
    if dtype == "int8":
        a = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8)
        b = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8)
        return lambda: torch._int_mm(a, b)
    raise ValueError(dtype)


def calibrate(device_name: str, copy_mib: int, gemm_n: int, repeats: int) -> dict:
    import torch

    device = torch.device(device_name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(json.dumps({"error": "torch sees no CUDA device "
                                     f"(torch {torch.__version__}, CUDA {torch.version.cuda})"}))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    timer = _timer(torch, device)
    out: dict = {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None),
                 "device": (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else "cpu"),
                 "capability": (".".join(map(str, torch.cuda.get_device_capability(device)))
                                if device.type == "cuda" else None),
                 "copy_mib": copy_mib, "gemm_n": gemm_n, "gemm": {}, "skipped": {}}
    size = copy_mib * 2**20
    bufs = [torch.empty(size, dtype=torch.uint8, device=device) for _ in range(2)]

    def copy():
        bufs[1].copy_(bufs[0])
        sync()
    out["copy_bytes_per_s"] = _rates(timer, copy, 2.0 * size, repeats)
    bufs.clear()  # the GEMMs get the memory back
    for dtype in ("bf16", "fp16", "fp8", "int8"):
        try:
            fn = _gemm(torch, device, dtype, gemm_n)

            def step(fn=fn):
                fn()
                sync()
            out["gemm"][dtype] = _rates(timer, step, 2.0 * gemm_n ** 3, repeats)
        except Exception as exc:  # noqa: BLE001 - torch's own reason is the evidence
            out["skipped"][dtype] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--copy-mib", type=int, default=1024)
    p.add_argument("--gemm", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=10)
    a = p.parse_args(argv)
    print(json.dumps(calibrate(a.device, a.copy_mib, a.gemm, a.repeats)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
