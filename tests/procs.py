"""Ending the processes a test started: a teardown never fails the test because a process was
slow to act on SIGTERM (a Prefect worker finishing its poll, a server draining)."""

from __future__ import annotations

import os
import signal
import subprocess


def end_process(proc: subprocess.Popen, grace_s: float = 30.0) -> int:
    """SIGTERM `proc` (its whole process group when it leads one, as a process started with
    start_new_session=True does), SIGKILL the group after `grace_s`; returns the exit status."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        own_group = os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        own_group = False

    def send(sig: int) -> None:
        try:
            if own_group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    try:
        code = proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        code = proc.wait(30)
    if own_group:  # what the leader left behind in its group (a worker's flow-run child)
        send(signal.SIGKILL)
    return code


def pasted_command(command: str, port: int) -> tuple[list[str], dict[str, str], str]:
    """A report's engine command as a reader pastes it, moved to `port`: (argv without the
    leading VAR=value assignments, the environment with them, the port it named)."""
    import shlex

    argv, env = shlex.split(command), dict(os.environ)
    while "=" in argv[0] and not argv[0].startswith("/"):  # leading VAR=value assignments
        key, _, value = argv.pop(0).partition("=")
        env[key] = value
    old = argv[argv.index("--port") + 1]
    argv[argv.index("--port") + 1] = str(port)
    return argv, env, old
