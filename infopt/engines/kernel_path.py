"""The kernel path of the recommended configuration, read from the engine's own log: what the
winner trial read already (infopt.runs.load_evidence: its own log, or its configuration's
load-only start on a GPU host), else the winner trial's engine.log, or, for an engine that
prints its kernel choices only at a higher log level (llama.cpp: -lv 4), one short start of the
winner with that level (trials/t-kernel/), which is measured nothing and stopped once
healthy."""

from __future__ import annotations

from pathlib import Path

from infopt.engines import adapter_for
from infopt.engines.kernel_log import read_kernel_lines, unlogged_notes
from infopt.engines.session import LOG, Logger, Troubleshooting, engine_session
from infopt.runs.rundir import trial_dir
from infopt.specs.base import EngineStartError
from infopt.specs.results import KernelPath, Trial
from infopt.specs.serving import with_knob


def kernel_path(winner: Trial, run_dir: str, weights_bytes: int, troubleshoot: Troubleshooting,
                logger: Logger = LOG) -> KernelPath:
    """What the winner's engine logged of its kernels, and how it was read (or why not)."""
    engine = winner.config.engine.value
    spec = adapter_for(engine).kernel_log
    if spec is None:
        return KernelPath(engine=engine, log=None, notes=[
            f"not read: infopt does not know {engine}'s kernel-selection log lines yet"])
    how = [f"read from trial {winner.trial_id}'s engine.log"]
    log = trial_dir(Path(run_dir), winner.key or winner.trial_id) / "engine.log"
    if (k := winner.kernels) is not None and k.log is not None:  # read already, per trial
        return KernelPath(engine=engine, log=k.log, lines=k.lines,
                          notes=[f"read from {k.how}"] + k.notes, finding=k.finding)
    if spec.knobs:  # the winner's own log lacks them: one start that logs them
        config = winner.config
        for knob, value in spec.knobs.items():
            config = with_knob(config, knob, value)
        log = trial_dir(Path(run_dir), "t-kernel") / "engine.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        try:
            with engine_session(config, log, weights_bytes, troubleshoot=troubleshoot,
                                log=logger):
                pass  # the start is what writes the kernel lines
        except EngineStartError as exc:
            return KernelPath(engine=engine, log=None, notes=[
                f"not read: the winner did not start with "
                f"{', '.join(f'{k}={v}' for k, v in spec.knobs.items())} "
                f"({str(exc).splitlines()[0][:200]})"])
        how = [f"read from one start of the winner's configuration with "
               f"{', '.join(f'{k}={v}' for k, v in spec.knobs.items())} (the level at which "
               f"{engine} logs its kernel choices), nothing measured"]
    if not log.is_file():
        return KernelPath(engine=engine, log=None, notes=[f"not read: {log} is missing"])
    lines = read_kernel_lines(log.read_text(errors="replace"), spec)
    logger.info("kernel path of %s: %d log lines", winner.trial_id, len(lines))
    return KernelPath(engine=engine, log=str(log.relative_to(run_dir)), lines=lines,
                      notes=how + unlogged_notes(lines, spec))
