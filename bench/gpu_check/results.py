"""The run's results: the GPU's copy bandwidth, the measured decode against `infopt plan`, and
one summary.json of everything.

  copybw   (run, there)     the GPU's device-to-device copy bandwidth through PyTorch (a
                            measured ceiling beside the catalog's, which `infopt plan` uses)
  compare  (run, there)     the measured decode rates against `infopt plan`'s ceilings and
                            attainable estimates; writes comparison.json, prints a table
  summary  (run, there)     one summary.json of the run: stages, times, versions, the stand-in,
                            llama-bench, the comparison, the optimize run's outcome

Standard library only (PyTorch, where there is one, for copybw).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

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
