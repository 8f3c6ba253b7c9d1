"""Compare infopt's load generator with `vllm bench serve` on the same real vLLM (CPU) server.

Run from the repository root after `make engines`: `.venv/bin/python -m bench.compare_vllm_bench`
(~4 min). Same workload for both: 256 input tokens (exact, by vLLM's tokenizer; both sides send
286 prompt tokens with the chat template), 64 forced output tokens, 20 requests, closed loop at
concurrency 4; runs alternate (theirs, ours) twice so drift hits both. Prints median TTFT and ITL.
Measured 2026-11-29 on 2 cores (see the issue-6 note): ours was 3.5-6.7% lower on ITL and
4.7-11% lower on TTFT; vllm bench's client shares the 2 cores with the engine.
"""
import json, os, re, statistics, subprocess, sys, time
from pathlib import Path
import httpx
from infopt.bootstrap import default_paths
from infopt.engines import process, vllm
from infopt.loadgen.benchmark import run_benchmark
from infopt.loadgen.tokens import engine_counter
from infopt.specs.serving import VllmConfig
from infopt.specs.workload import Workload
p = default_paths()
cfg = VllmConfig(model_path=str(p.hf_model), served_model_name="smollm2", max_model_len=2048,
                 enforce_eager=True, cpu_kvcache_space_gib=1)
r = process.start(vllm.ADAPTER, cfg, str(p.vllm_python), Path(os.environ.get("TMPDIR", "/tmp")) / "compare_vllm_bench.log", 3*10**8)
try:
    wl = Workload(input_tokens=256, output_tokens=64, concurrency_levels=[4], target_concurrency=4, requests_per_level=20)
    def ours(seed):
        with httpx.Client(timeout=30) as c:
            counter = engine_counter(c, r.base_url, "smollm2", vllm.ADAPTER)
            res, recs = run_benchmark(r.base_url, "smollm2", wl, vllm.ADAPTER.forced_length_fields(64), seed=seed, counter=counter)
        lv = res.levels[0]
        return lv.ttft_s.p50*1e3, lv.itl_s.p50*1e3, statistics.mean(x.prompt_tokens for x in recs)
    def theirs(seed):
        env = {**os.environ, "PYTHONPATH": str(p.vllm_metadata_shim), "HF_HUB_OFFLINE": "1"}
        out = subprocess.run([str(p.vllm_python), "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "openai-chat",
            "--base-url", r.base_url, "--endpoint", "/v1/chat/completions", "--model", "smollm2", "--tokenizer", str(p.hf_model),
            "--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "64", "--num-prompts", "20",
            "--max-concurrency", "4", "--ignore-eos", "--seed", str(seed)], capture_output=True, text=True, env=env, timeout=600)
        t = out.stdout + out.stderr
        ttft = float(re.search(r"Median TTFT \(ms\):\s+([\d.]+)", t).group(1))
        itl = float(re.search(r"Median ITL \(ms\):\s+([\d.]+)", t).group(1))
        tin = re.search(r"Total input tokens:\s+(\d+)", t).group(1)
        return ttft, itl, tin
    rows = []
    for i in range(2):
        rows.append(("vllm-bench",) + theirs(300+i))
        rows.append(("infopt",) + ours(400+i))
    for row in rows: print(row)
finally:
    process.stop(r.pid)
