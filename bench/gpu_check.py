"""Helpers of bench/gpu_check.sh (issue 32), the one-shot check on a machine with an NVIDIA GPU.

Standard library and numpy only, except `recipe` (it reads the bundled GGUF with the `gguf`
package, here, in the project's venv): the GPU machine runs these with its own python3.

  recipe   (prepare, here)  the bundled GGUF's header (metadata, tokenizer, tensor table) and a
                            manifest of its tensors: 0.5 MiB gzipped instead of the 94 MiB file
  standin  (run, there)     a GGUF of the bundled model's exact layout from that recipe: the
                            same header bytes, tensor names, shapes, quantization types, offsets
                            and file size, with synthetic weights in place of the trained ones
  copybw   (run, there)     the GPU's device-to-device copy bandwidth through PyTorch (a
                            measured ceiling beside the catalog's, which `infopt plan` uses)
  compare  (run, there)     the measured decode rates against `infopt plan`'s ceilings and
                            attainable estimates; writes comparison.json, prints a table
  summary  (run, there)     one summary.json of the run: stages, times, versions, the stand-in,
                            llama-bench, the comparison, the optimize run's outcome

Why a stand-in: the device machine receives at most 64 MiB and reaches no network, and the
bundled SmolLM2-135M-Instruct Q4_1 GGUF is 94 MiB (98,362,432 bytes) and does not compress
(zstd: 88 MiB). Dense decode does the same work whatever the weights' values (same kernels,
same bytes read per token, forced output lengths with ignore_eos, greedy sampling after
top-k), so the decode rate measured on the stand-in is the bundled model's on that GPU; its
text is meaningless, so any quality verdict on it is too.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

# ggml type name -> (elements per block, bytes per block). Only the types the bundled model
# holds (and their neighbours) have a filler below; `recipe` refuses a model with others.
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q8_0": (32, 34)}
SEED = 32  # issue 32: every stand-in built from one recipe is byte-identical


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
        "source_name": gguf_path.name, "source_bytes": size, "source_sha256": _sha256(gguf_path),
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
    return {"path": str(out), "bytes": out.stat().st_size, "sha256": _sha256(out),
            "seconds": round(time.monotonic() - t0, 2),
            "layout_of": {k: manifest[k] for k in ("source_name", "source_bytes",
                                                   "source_sha256")},
            "note": "synthetic weights in the bundled model's exact GGUF layout (header, "
                    "tokenizer, tensor shapes and types, offsets, size); its text is meaningless"}


# ---------------------------------------------------------------------------------------------
# copybw: there, through PyTorch


def copybw(gib: float = 2.0, repeats: int = 20) -> dict:
    """Device-to-device copy of `gib` GiB, timed with CUDA events: 2 x size / time (bytes read
    plus written), median of `repeats` after a warm-up; rotates between two buffer pairs."""
    try:
        import torch
    except ImportError as exc:
        return {"error": f"no PyTorch: {exc}"}
    if not torch.cuda.is_available():
        return {"error": "torch.cuda.is_available() is False"}
    n = int(gib * 2**30)
    pairs = [(torch.empty(n, dtype=torch.uint8, device="cuda"),
              torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")) for _ in range(2)]
    for dst, src in pairs:
        dst.copy_(src)
    torch.cuda.synchronize()
    rates = []
    for i in range(repeats):
        dst, src = pairs[i % 2]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        rates.append(2 * n / (start.elapsed_time(end) / 1e3))
    ok = all(torch.equal(dst, src) for dst, src in pairs)
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "bytes_per_copy": n, "repeats": repeats, "copies_equal": ok,
            "median_bytes_per_s": statistics.median(rates), "min_bytes_per_s": min(rates),
            "max_bytes_per_s": max(rates)}


# ---------------------------------------------------------------------------------------------
# compare: there, after the measurements


def _load(path: Path | None) -> dict | None:
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def _plan_row(plan: dict, batch: int) -> dict | None:
    """The decode row for the model's own weights (the first weight path listed), llama.cpp's
    default KV type (f16) and `batch` sequences."""
    rows = plan.get("ceilings", {}).get("rows", [])
    decode = [r for r in rows if r.get("phase") == "decode"]
    if not decode:
        return None
    own = decode[0]["weight_path"]
    for r in decode:
        if r["weight_path"] == own and r["kv_dtype"] == "f16" and r["batch"] == batch:
            return r
    return None


def _measured(level: dict) -> dict:
    """Decode rates of one measured level, per sequence and aggregate (x concurrency): from the
    median TPOT ((E2E - TTFT) / (output tokens - 1) per request: stalls included) and from the
    median ITL (the typical gap between two tokens of a stream)."""
    c = level["concurrency"]
    tpot = (level.get("tpot_s") or {}).get("p50")
    itl = (level.get("itl_s") or {}).get("p50")
    return {"concurrency": c, "requests": level["requests"], "errors": level["errors"],
            "tpot_p50_s": tpot, "itl_p50_s": itl, "ttft_p50_s": level["ttft_s"]["p50"],
            "decode_tokens_per_s_aggregate": c / tpot if tpot else None,
            "decode_tokens_per_s_aggregate_from_itl": c / itl if itl else None,
            "output_tokens_per_s_end_to_end": level["output_tokens_per_s"],
            "gpu_util_percent_mean": level.get("gpu_util_percent_mean"),
            "engine_cpu_percent_mean": level.get("engine_cpu_percent_mean")}


def _llama_bench_rates(path: Path | None) -> dict:
    """llama-bench's own rates (no HTTP, no sampling server): {"pp128": tok/s, "tg256": ...}."""
    rows = _load(path)
    out = {}
    for r in rows if isinstance(rows, list) else []:
        key = f"pp{r['n_prompt']}" if r.get("n_prompt") else f"tg{r.get('n_gen')}"
        out[key] = r.get("avg_ts")
    return out


def compare(plans: list[Path], bench: Path | None, copy: Path | None, out: Path,
            llama_bench: Path | None = None) -> dict:
    result: dict = {"levels": [], "notes": [], "llama_bench": _llama_bench_rates(llama_bench)}
    bench_d = _load(bench)
    copy_d = _load(copy)
    plan_by_batch: dict[int, dict] = {}
    for p in plans:
        d = _load(p)
        if d is None:
            result["notes"].append(f"{p}: missing or not JSON (infopt plan failed?)")
            continue
        for r in d.get("ceilings", {}).get("rows", []):
            if r.get("phase") == "decode":
                plan_by_batch.setdefault(r["batch"], d)
        result.setdefault("plan_device", d["ceilings"].get("device"))
    if bench_d is None:
        result["notes"].append("no bench result: nothing measured to compare")
    for scen in (bench_d or {}).get("scenarios", []):
        m = _measured(scen["level"])
        row = _plan_row(plan_by_batch.get(m["concurrency"], {}), m["concurrency"])
        agg = m["decode_tokens_per_s_aggregate"]
        if row is not None:
            est = (row.get("estimate") or {}).get("tokens_per_s")
            m.update({"plan_weight_path": row["weight_path"], "plan_kv_dtype": row["kv_dtype"],
                      "plan_context_tokens": row["context_tokens"],
                      "plan_bytes_per_step": row["bytes_per_step"],
                      "ceiling_tokens_per_s": row["tokens_per_s"],
                      "estimate_tokens_per_s": est,
                      "estimate_label": (row.get("estimate") or {}).get("label"),
                      "measured_over_ceiling": agg / row["tokens_per_s"] if agg else None,
                      "measured_over_estimate": agg / est if agg and est else None})
            if copy_d and copy_d.get("median_bytes_per_s"):
                bw = copy_d["median_bytes_per_s"]
                m["copy_bandwidth_ceiling_tokens_per_s"] = (
                    row["tokens_per_step"] * bw / row["bytes_per_step"])
        else:
            result["notes"].append(f"no plan decode row for batch {m['concurrency']}")
        result["levels"].append(m)
    result["copy_bandwidth"] = copy_d
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def _fmt(x: float | None, spec: str = ",.1f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(result: dict) -> None:
    print("decode, tokens/s over all streams: measured (1/TPOT, 1/ITL medians) against "
          "infopt plan's ceiling and estimate")
    print(f"{'streams':>7} {'meas TPOT':>10} {'meas ITL':>10} {'ceiling':>10} {'estimate':>9} "
          f"{'meas/ceil':>9} {'meas/est':>8} {'copy-bw ceil':>12} {'TTFT p50 s':>10}")
    for m in result["levels"]:
        print(f"{m['concurrency']:>7} {_fmt(m['decode_tokens_per_s_aggregate']):>10} "
              f"{_fmt(m['decode_tokens_per_s_aggregate_from_itl']):>10} "
              f"{_fmt(m.get('ceiling_tokens_per_s')):>10} "
              f"{_fmt(m.get('estimate_tokens_per_s')):>9} "
              f"{_fmt(m.get('measured_over_ceiling'), '.4f'):>9} "
              f"{_fmt(m.get('measured_over_estimate'), '.2f'):>8} "
              f"{_fmt(m.get('copy_bandwidth_ceiling_tokens_per_s')):>12} "
              f"{_fmt(m['ttft_p50_s'], '.4f'):>10}")
    if result.get("llama_bench"):
        print("llama-bench (one sequence, no server): " + ", ".join(
            f"{k} {_fmt(v)} tok/s" for k, v in result["llama_bench"].items()))
    bw = (result.get("copy_bandwidth") or {}).get("median_bytes_per_s")
    if bw:
        print(f"GPU copy bandwidth (PyTorch, device to device): {bw / 1e12:.2f} TB/s")
    for note in result["notes"]:
        print(f"note: {note}")


def _stages(work: Path) -> list[dict]:
    out = []
    text = (work / "stages.tsv").read_text() if (work / "stages.tsv").is_file() else ""
    for line in filter(None, text.splitlines()):
        name, rc, secs, note = (line.split("\t") + ["", "", "", ""])[:4]
        out.append({"stage": name, "exit": int(rc) if rc.lstrip("-").isdigit() else rc,
                    "seconds": int(secs) if secs.isdigit() else None, "note": note or None})
    return out


def _llama_bench(work: Path) -> list[dict] | None:
    rows = _load(work / "llama-bench.json")
    if not isinstance(rows, list):
        return None
    keep = ("build_commit", "backends", "gpu_info", "cpu_info", "model_type", "model_size",
            "n_gpu_layers", "flash_attn", "n_prompt", "n_gen", "avg_ts", "stddev_ts")
    return [{k: r.get(k) for k in keep} for r in rows]


def _optimize(work: Path) -> dict | None:
    reports = sorted((work / "runs").glob("*/report.json"))
    if not reports:
        runs = sorted((work / "runs").glob("*")) if (work / "runs").is_dir() else []
        return {"finished": False, "run_dirs": [p.name for p in runs]} if runs else None
    rep = _load(reports[-1]) or {}
    gain = rep.get("gain_vs_control") or {}
    return {"finished": True, "run_id": rep.get("run_id"),
            "winner_command": rep.get("winner_command"),
            "gain_vs_control": {k: gain.get(k) for k in ("objective", "ratio", "note")}}


def _build_progress(work: Path) -> str | None:
    """ninja's last "[N/M]" in the build log: how far a build cut off by its time box got."""
    log = work / "build.log"
    found = re.findall(r"^\[(\d+/\d+)\]", log.read_text(errors="replace"), re.M) \
        if log.is_file() else []
    return found[-1] if found else None


def summary(work: Path, out_dir: Path, budget_s: int, elapsed_s: int, dry_run: bool) -> dict:
    hw = _load(out_dir / "hardware.json") or {}
    gpus = hw.get("gpus") or []
    first = gpus[0] if gpus and isinstance(gpus[0], dict) else {}
    s = {"what": "bench/gpu_check.sh run (issue 32)",
         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         "dry_run": dry_run, "gpu": first.get("name"), "gpu_count": len(gpus),
         "budget_s": budget_s, "elapsed_s": elapsed_s, "stages": _stages(work),
         "build_progress": _build_progress(work),
         "model": _load(work / "standin.json"), "llama_bench": _llama_bench(work),
         "comparison": _load(work / "comparison.json"), "optimize": _optimize(work),
         "environment": (work / "env.txt").read_text(errors="replace")
         if (work / "env.txt").is_file() else None}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(s, indent=2) + "\n")
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.gpu_check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("recipe")
    a.add_argument("--gguf", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("standin")
    a.add_argument("--recipe", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("copybw")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--gib", type=float, default=2.0)
    a = sub.add_parser("compare")
    a.add_argument("--plan", type=Path, action="append", default=[])
    a.add_argument("--bench", type=Path)
    a.add_argument("--copybw", type=Path)
    a.add_argument("--llama-bench", type=Path)
    a.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("summary")
    a.add_argument("--work", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True, help="the results folder")
    a.add_argument("--budget", type=int, default=0)
    a.add_argument("--elapsed", type=int, default=0)
    a.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "recipe":
        m = recipe(args.gguf, args.out)
        print(f"recipe: {len(m['tensors'])} tensors, header {m['header_bytes']:,} bytes, "
              f"layout of {m['source_name']} ({m['source_bytes']:,} bytes) -> {args.out}")
    elif args.cmd == "standin":
        print(json.dumps(standin(args.recipe, args.out), indent=1))
    elif args.cmd == "copybw":
        r = copybw(args.gib)
        args.out.write_text(json.dumps(r, indent=1) + "\n")
        print(json.dumps(r, indent=1))
        return 1 if "error" in r else 0
    elif args.cmd == "compare":
        print_table(compare(args.plan, args.bench, args.copybw, args.out, args.llama_bench))
    else:
        s = summary(args.work, args.out, args.budget, args.elapsed, args.dry_run)
        print("stages: " + ", ".join(f"{x['stage']} {x['exit']} ({x['seconds']} s)"
                                     for x in s["stages"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
