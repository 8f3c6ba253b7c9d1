"""What a configuration's quality scores depend on, as one content key (the quality gate's
files in a run folder and in the machine's memo are named by it): the configuration less where
it listens, the engine build, the model's digest, the prompts of the pool, the scoring code and
this machine's numerics."""

from __future__ import annotations

import glob
import json
from functools import cache
from pathlib import Path

import infopt.quality as quality_pkg
from infopt.engines import scoring
from infopt.hardware.host import parse_cpuinfo
from infopt.quality.prompts import PROMPT_POOL, pool_prefix
from infopt.quality.teacher import DEFAULT_TOKENS, DEFAULT_TOP_K
from infopt.specs.keys import code_digest, content_key
from infopt.specs.serving import AnyServingConfig, config_identity

# The gate's default prompt budget (the request's quality_max_prompts): the reference and the
# floor cover that many prompts of the pool; a candidate is scored on 8, then 16, then 32 until
# its verdict is decided.
DEFAULT_MAX_PROMPTS = 32


@cache
def scoring_digest() -> str:
    """The scoring's own code (teacher forcing, measures, verdict, the engines' scoring): a
    change invalidates every kept reference, floor and verdict."""
    files = [Path(scoring.__file__)] + sorted(Path(quality_pkg.__file__).parent.glob("*.py"))
    return code_digest(files)


@cache
def machine_numerics() -> str:
    """What decides a kernel's rounding on this machine: the CPU model and the ISA flags the
    engines dispatch on (an AVX-512 and an AVX2 build of the same weights differ at near-tie
    positions), and the GPU models. Part of every quality key: a verdict is not carried to a
    machine that computes differently."""
    try:
        model, isa, _ = parse_cpuinfo(Path("/proc/cpuinfo").read_text(encoding="utf-8"))
    except OSError:
        model, isa = "unknown", []
    gpus = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        text = Path(info).read_text(encoding="utf-8", errors="replace")
        gpus += [ln.split(":", 1)[1].strip() for ln in text.splitlines()
                 if ln.startswith("Model:")]
    return json.dumps({"cpu": model, "isa": isa, "gpus": gpus})


def quality_key(config: AnyServingConfig, engine_version: str, model_digest: str,
                prompts: int = DEFAULT_MAX_PROMPTS) -> str:
    """What a configuration's scores depend on; the port and the served name do not. For a
    reference, `prompts` is how many prompts of the pool it covers."""
    payload = {"config": config_identity(config, {"port", "served_model_name"}),
               "engine_version": engine_version, "model": model_digest,
               "prompts": pool_prefix(min(prompts, len(PROMPT_POOL))), "tokens": DEFAULT_TOKENS,
               "top_k": DEFAULT_TOP_K, "code": scoring_digest(), "machine": machine_numerics()}
    return content_key(payload)
