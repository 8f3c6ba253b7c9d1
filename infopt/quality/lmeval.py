"""lm-evaluation-harness as an optional extra of `infopt quality` (`--lm-eval TASKS`): the same
standard (or the user's own, `--lm-eval-include DIR`) tasks on the reference and the candidate,
through lm-eval's `local-chat-completions` model, and a verdict per task metric.

Chat completions only, on purpose: through llama-server's completions route lm-eval's
loglikelihood tasks score at chance without any error (llama.cpp issue 27174), so a
loglikelihood (multiple-choice) task is refused with that reason instead of being run. lm-eval
lives in a venv of its own (`make lm-eval`); infopt runs its CLI and reads its results file.

A metric regresses when the candidate is lower by more than the tolerance *and* the drop is
beyond 1.96 combined standard errors (lm-eval's own stderr of each mean; the runs are treated
as independent, which overstates the noise of paired items, so this errs towards passing).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

from infopt.bootstrap import default_paths
from infopt.environ import scrubbed
from infopt.specs.base import InputError
from infopt.specs.endpoint import Endpoint
from infopt.specs.quality import MeasureVerdict

LOGLIKELIHOOD_REFUSAL = "Loglikelihood is not supported for chat completions"


def lm_eval_binary() -> Path:
    exe = default_paths().lm_eval
    if not exe.is_file():
        raise InputError(f"lm-evaluation-harness is not installed ({exe} is missing); run "
                         "`make lm-eval` once (its own venv under the infopt cache, ~760 MB)")
    return exe


def argv(endpoint: Endpoint, tasks: list[str], out_dir: Path, *, limit: int | None,
         include: Path | None) -> list[str]:
    model_args = ",".join([f"base_url={endpoint.base_url.rstrip('/')}/v1/chat/completions",
                           f"model={endpoint.model}", "num_concurrent=1", "max_retries=1"])
    return [str(lm_eval_binary()), "--model", "local-chat-completions", "--model_args",
            model_args, "--tasks", ",".join(tasks), "--apply_chat_template",
            "--output_path", str(out_dir), "--seed", "0",
            *(["--limit", str(limit)] if limit else []),
            *(["--include_path", str(include)] if include else [])]


def run_lm_eval(endpoint: Endpoint, tasks: list[str], out_dir: Path, *,
                limit: int | None = None, include: Path | None = None,
                api_key: str | None = None, timeout_s: float = 3600.0) -> dict[str, dict]:
    """lm-eval's results per task ({"metric,filter": value, "metric_stderr,filter": se})."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "lm-eval.log"
    # The key goes through the environment lm-eval's API models read, never on argv; none of
    # infopt's own credentials goes along (infopt.environ).
    env = {**scrubbed(), **({"OPENAI_API_KEY": api_key} if api_key else {})}
    with log.open("w") as fh:
        proc = subprocess.run(argv(endpoint, tasks, out_dir, limit=limit, include=include),
                              stdout=fh, stderr=subprocess.STDOUT, env=env,
                              timeout=timeout_s, check=False)
    text = log.read_text(errors="replace")
    if LOGLIKELIHOOD_REFUSAL in text:
        raise InputError(f"an lm-eval task among {tasks} needs loglikelihoods (multiple "
                         "choice); infopt runs lm-eval through chat completions only, because "
                         "through llama-server's completions route such tasks score at chance "
                         "without an error (llama.cpp issue 27174); choose generative "
                         "(generate_until) tasks")
    results = sorted(out_dir.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if proc.returncode != 0 or not results:
        tail = "\n  ".join(text.splitlines()[-8:])
        raise InputError(f"lm-eval failed on {endpoint.base_url} (exit {proc.returncode}; "
                         f"log: {log}); check the task names (`lm_eval ls tasks`) and that "
                         f"their datasets are reachable. Last lines:\n  {tail}")
    return json.loads(results[-1].read_text())["results"]


def metric_verdicts(reference: dict[str, dict], candidate: dict[str, dict],
                    tolerance: float) -> list[MeasureVerdict]:
    out = []
    for task, ref in reference.items():
        cand = candidate.get(task, {})
        for key, r in ref.items():
            if "_stderr," in key or not isinstance(r, (int, float)) or key in ("sample_len",):
                continue
            c = cand.get(key)
            if not isinstance(c, (int, float)):
                continue
            metric, _, filt = key.partition(",")
            se_key = f"{metric}_stderr,{filt}"
            se = math.hypot(_num(ref.get(se_key)), _num(cand.get(se_key)))
            drop = r - c
            passed = not (drop > tolerance and drop > 1.96 * se)
            out.append(MeasureVerdict(
                measure=f"lm_eval:{task}/{key}", value=float(c), floor=None,
                threshold=float(r) - tolerance, passed=passed,
                why=f"lm-eval {task} {key}: {c:.3f} vs the reference's {r:.3f} (combined "
                    f"stderr {se:.3f}; a regression needs a drop beyond {tolerance:g} and "
                    "1.96 stderr)"))
    if not out:
        raise InputError("lm-eval reported no numeric metric both runs share; check the "
                         f"tasks ({sorted(reference)})")
    return out


def _num(v: object) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else 0.0
