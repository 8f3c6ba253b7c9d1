"""What a trial's engine says it loaded and selected, read from its own startup log: the kernel
lines (infopt.engines.kernel_log), the offload achieved and the KV cache allocated.

An engine that prints them at its default log level (vLLM) is read from the trial's own log. One
that prints them only at a higher level (llama.cpp: libllama's load lines are TRACE, shown from
-lv 4; a measured trial stays at the defaults, since -lv 4 also logs the serving loop) is read
from one load-only start per distinct configuration at that level (trials/load-<hash>/), which
is measured nothing, stopped once healthy, and reused by every trial of that configuration and
by a resumed run. That start is made on GPU hosts, where what loads where and which kernels run
differ by configuration; on a CPU host the recommended configuration's start
(infopt.engines.kernel_path) shows the one path the CPU build takes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from infopt.engines import adapter_for
from infopt.engines.kernel_log import read_kernel_lines, unlogged_notes
from infopt.engines.kernel_verify import verify
from infopt.engines.session import LOG, EnginePool, Logger, Troubleshooting, engine_session
from infopt.runs.rundir import trial_dir
from infopt.specs.base import EngineStartError
from infopt.specs.checkpoint import CheckpointFormat, DeviceTarget
from infopt.specs.results import KernelCheck
from infopt.specs.serving import AnyServingConfig, config_identity, with_knob

_HEAD_BYTES = 4 * 2**20  # the startup lines; a long run's request lines follow


@dataclass(frozen=True)
class LoadLog:
    text: str  # the log's head: what the engine printed while it loaded
    log: str  # where, relative to the run folder
    how: str  # how it was read, for the report
    with_knobs: bool = False  # started with the adapter's log knobs (a load-only start)


def read_head(path: str | Path) -> str:
    with open(path, errors="replace") as f:
        return f.read(_HEAD_BYTES)


def needs_load_start(config: AnyServingConfig, gpu_host: bool) -> bool:
    """Whether the trial's own log lacks the load lines (its engine prints them only with
    knobs a measured trial must not carry) and this host is one where they vary."""
    spec = adapter_for(config.engine).kernel_log
    return bool(spec is not None and spec.knobs and gpu_host)


def load_start(config: AnyServingConfig, run_dir: Path, weights_bytes: int,
               pool: EnginePool | None, fits_beside: bool, troubleshoot: Troubleshooting,
               logger: Logger = LOG
               ) -> LoadLog | str:
    """The load lines of `config` from one start with the adapter's log knobs (kept for every
    later trial of it), or why there are none."""
    spec = adapter_for(config.engine).kernel_log
    assert spec is not None and spec.knobs
    knobs = ", ".join(f"{k}={v}" for k, v in spec.knobs.items())
    digest = hashlib.sha256(json.dumps(config_identity(config), sort_keys=True)
                            .encode()).hexdigest()[:12]
    log = trial_dir(run_dir, f"load-{digest}") / "engine.log"
    how = (f"one load-only start of this configuration with {knobs} (the level at which "
           f"{config.engine.value} logs its load), nothing measured")
    rel = str(log.relative_to(run_dir))
    if log.is_file() and (log.parent / "done").is_file():
        return LoadLog(read_head(log), rel, how, with_knobs=True)
    probe = config
    for knob, value in spec.knobs.items():
        probe = with_knob(probe, knob, value)
    if pool is not None and not fits_beside:
        pool.close()  # a GPU's memory holds one engine: the probe's turn
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with engine_session(probe, log, weights_bytes, troubleshoot=troubleshoot, log=logger):
            pass  # the start is what writes the load lines
    except EngineStartError as exc:
        return f"not read: the configuration did not start with {knobs} ({str(exc)[:200]})"
    (log.parent / "done").write_text("")
    logger.info("load lines of %s: %s", config.engine.value, rel)
    return LoadLog(read_head(log), rel, how, with_knobs=True)


def own_log(log_path: str, run_dir: Path) -> LoadLog:
    path = Path(log_path)
    rel = str(path.relative_to(run_dir)) if path.is_relative_to(run_dir) else str(path)
    return LoadLog(read_head(path), rel, "the trial engine's own startup log")


def kernel_check(config: AnyServingConfig, found: LoadLog | str | None,
                 fmt: CheckpointFormat | None = None, device: DeviceTarget | None = None
                 ) -> KernelCheck | None:
    """The kernel lines the engine logged, judged against the support matrix's expected path
    for `fmt` on `device` (when given), or why none were read; None when infopt reads no
    kernel lines for this engine."""
    spec = adapter_for(config.engine).kernel_log
    if spec is None:
        return None
    if not isinstance(found, LoadLog):
        return KernelCheck(log=None, how=found or "not read on this host", lines=[])
    if spec.knobs and not found.with_knobs:  # its own log lacks them, by the engine's design
        knobs = ", ".join(f"{k}={v}" for k, v in spec.knobs.items())
        return KernelCheck(log=None, how=(
            f"not read per trial: {config.engine.value} logs them only with {knobs}; on a CPU "
            "host the recommended configuration's own start reads them"), lines=[])
    lines = read_kernel_lines(found.text, spec)
    finding = (verify(config.engine, fmt, device, lines, spec)
               if fmt is not None and device is not None else None)
    return KernelCheck(log=found.log, how=found.how, lines=lines,
                       notes=unlogged_notes(lines, spec), finding=finding)
