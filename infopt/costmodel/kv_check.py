"""The fit's KV estimate checked against what the engine allocated (issue 32, item 11): every
trial's startup log (EngineAdapter.kv_from_log) against its MemoryFit. Tokens where the engine
logs tokens (vLLM "KV cache size: N tokens", SGLang "#tokens", TensorRT-LLM's max tokens in
paged KV cache), bytes where it logs buffers (llama.cpp's "KV buffer size" at -lv 4). A large
error stops the ladder: the fit prunes candidates and sizes layouts with overhead terms that are
wrong for this engine build. Pure."""

from __future__ import annotations

from typing import Literal

from infopt.specs.fit import KvCheck, KvObservation, MemoryFit

# |observed / predicted - 1| above this stops the ladder. The fit's estimated terms (activation
# peak, CUDA graphs, runtime) are a few hundred MiB each; an error this large means one of them,
# or the allocation rule itself, does not hold for this build.
KV_STOP_ERROR = 0.30


def kv_check(observed: KvObservation | None, fit: MemoryFit | None) -> KvCheck | None:
    """None where the log said nothing, or the fit has nothing to compare with."""
    if observed is None or fit is None or not fit.fits:
        return None
    if observed.tokens is not None and fit.kv_capacity_tokens:
        return _check("tokens", observed.tokens, fit.kv_capacity_tokens, observed.line)
    if observed.bytes is not None and fit.required_kv_bytes_per_gpu > 0:
        # llama.cpp allocates -c cells up front: what the fit requires is what it allocates.
        return _check("bytes", observed.bytes, fit.required_kv_bytes_per_gpu, observed.line)
    return None


def _check(unit: Literal["tokens", "bytes"], seen: int, predicted: int, line: str) -> KvCheck:
    error = seen / predicted - 1
    return KvCheck(unit=unit, observed=seen, predicted=predicted, error=error, line=line[:400],
                   stops_ladder=abs(error) > KV_STOP_ERROR)


def stop_reason(trial_id: str, check: KvCheck) -> str:
    return (f"the engine's KV capacity in {trial_id} is {check.observed:,} {check.unit} against "
            f"the fit's {check.predicted:,} ({check.error:+.0%}, beyond ±{KV_STOP_ERROR:.0%}): "
            "the fit's overhead terms do not hold for this engine build, so its pruning and "
            "layout sizing cannot be trusted; correct them (infopt.costmodel.allocation) or "
            "pass the engine's measured figures before climbing further")
