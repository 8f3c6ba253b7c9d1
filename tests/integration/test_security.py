"""Security, for real (issue 17): a real llama-server gets none of infopt's credentials and is
unreachable from another network namespace; a real `infopt optimize` whose baseline fails
sends the GitHub token where it should (the trusted issue-search URL) and writes canary
credentials nowhere: not into the run folder, its console output or the Prefect database."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from infopt.engines import process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.specs.serving import LlamaCppConfig
from tests.githubserver import FakeGitHub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

INFOPT = str(Path(sys.executable).with_name("infopt"))


def _canaries() -> dict[str, str]:
    """Distinctive values under the names a credential goes by; fresh per test session."""
    return {"HF_TOKEN": f"hf_CANARY{secrets.token_hex(12)}",
            "GITHUB_TOKEN": f"ghp_CANARY{secrets.token_hex(12)}",
            "AWS_SECRET_ACCESS_KEY": f"awsCANARY{secrets.token_hex(16)}"}


@pytest.fixture(scope="module")
def engine(llama_server, gguf_model, tmp_path_factory) -> Iterator[tuple[object, dict]]:
    """One real llama-server on 127.0.0.1, started through infopt's process control with
    canary credentials (and one ordinary variable, the control) in infopt's environment."""
    canaries = _canaries()
    control = {"INFOPT_SECURITY_CONTROL": f"plain{secrets.token_hex(8)}"}
    cfg = LlamaCppConfig(model_path=str(gguf_model), served_model_name="smollm2",
                         parallel_slots=1, ctx_per_slot_tokens=512, threads=1)
    log = tmp_path_factory.mktemp("security-engine") / "engine.log"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {**canaries, **control}.items():
            mp.setenv(k, v)
        running = process.start(llamacpp.ADAPTER, cfg, str(llama_server), log,
                                weights_bytes=10**8)
    try:
        yield running, {"canaries": canaries, "control": control}
    finally:
        process.stop(running.pid)


def test_the_engine_environment_has_no_credentials(engine):
    running, env = engine
    environ = Path(f"/proc/{running.pid}/environ").read_bytes().split(b"\0")
    names = {e.split(b"=", 1)[0].decode() for e in environ if e}
    assert Path(f"/proc/{running.pid}/exe").resolve().name == "llama-server"
    # The control: an ordinary variable of infopt's environment did reach the engine.
    (name, value), = env["control"].items()
    assert f"{name}={value}".encode() in environ
    blob = b"\0".join(environ)
    for var, canary in env["canaries"].items():
        assert var not in names and canary.encode() not in blob, var


# --- network namespace: an engine bound to 127.0.0.1 is not reachable from another host ---

def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def netns() -> Iterator[tuple[str, str]]:
    """A network namespace joined to this one by a veth pair: host side .1/30, the
    namespace's .2/30, on a random 10.200.x.y/30. Yields (namespace, host address)."""
    tag = secrets.token_hex(3)
    ns, host_if, peer_if = f"infopt-sec-{tag}", f"isech{tag}", f"isecp{tag}"
    base = 4 * secrets.randbelow(64)
    net = f"10.200.{secrets.randbelow(256)}"
    host_ip, peer_ip = f"{net}.{base + 1}", f"{net}.{base + 2}"
    made = _ip("netns", "add", ns)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here ({made.stderr.strip()})")
    try:
        for args in (["link", "add", host_if, "type", "veth", "peer", "name", peer_if],
                     ["link", "set", peer_if, "netns", ns],
                     ["addr", "add", f"{host_ip}/30", "dev", host_if],
                     ["link", "set", host_if, "up"],
                     ["-n", ns, "addr", "add", f"{peer_ip}/30", "dev", peer_if],
                     ["-n", ns, "link", "set", peer_if, "up"],
                     ["-n", ns, "link", "set", "lo", "up"]):
            out = _ip(*args)
            assert out.returncode == 0, f"ip {' '.join(args)}: {out.stderr}"
        yield ns, host_ip
    finally:
        _ip("netns", "del", ns)  # takes the peer end, and with it the pair
        _ip("link", "del", host_if)  # in case the pair was never moved


_CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("connected")
except OSError as exc:
    print(type(exc).__name__)
"""


def _connect_from(ns: str, host: str, port: int) -> str:
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", _CONNECT, host,
                          str(port)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_loopback_engine_is_unreachable_from_another_network_namespace(engine, netns):
    running, _ = engine
    ns, host_ip = netns
    assert running.bind_addresses == [f"127.0.0.1:{running.port}"]
    # The control: from the namespace this host is reachable, on a socket bound to every
    # address (a plain listener, not an engine).
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        accepted = threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True)
        accepted.start()
        assert _connect_from(ns, host_ip, listener.getsockname()[1]) == "connected"
        accepted.join(5)
    # The engine's port on the same address: nothing listens there.
    assert _connect_from(ns, host_ip, running.port) == "ConnectionRefusedError"


# --- canaries through a real `infopt optimize` ---

TARGET = """
name: security
workload: {{name: security, input_lengths: {{kind: fixed, tokens: 32}},
           output_lengths: {{kind: fixed, tokens: 8}}, measured_requests: 2}}
objective: throughput
scenarios: []
quality_task_items: 0
budgets: {{repeats: 1}}
dimensions: [scheduling]
engines: [llamacpp]
github_search: true
github_url: {github_url}
github_token_to_url: true
"""

# Answers --version like llama-server; any start prints its environment (as a careless
# engine might, into the log infopt copies into the run folder) and fails to load the model.
FAKE_SERVER = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "version: 9999 (security-test)"; exit 0; fi
env | sort
echo "llama_model_load: error loading model: tensor 'token_embd.weight' data is not within \
the file bounds, model is corrupted or incomplete" >&2
echo "main: exiting due to model loading error" >&2
exit 1
"""


def _hits(blob: bytes, canaries: list[str]) -> list[str]:
    return [c for c in canaries if c.encode() in blob]


def _scan(root: Path, canaries: list[str]) -> tuple[dict[str, list[str]], int, int]:
    """({file: canaries in it}, files scanned, bytes scanned) for every file under root."""
    found, files, size = {}, 0, 0
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            files, size = files + 1, size + len(data)
            if hits := _hits(data, canaries):
                found[str(p)] = hits
    return found, files, size


def test_canary_credentials_go_only_where_they_should(prefect_server, gguf_model, tmp_path):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from blocks.credentials import InfoptCredentials

    env_canaries = _canaries()
    block_canaries = {"hf_token": f"hf_CANARY{secrets.token_hex(12)}",
                      "github_token": f"ghp_CANARY{secrets.token_hex(12)}"}
    everything = [*env_canaries.values(), *block_canaries.values()]
    block = f"security-canary-{secrets.token_hex(4)}"
    with temporary_settings({PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        InfoptCredentials(**block_canaries).save(block, overwrite=True)
    fake = tmp_path / "bin" / "llama-server"
    fake.parent.mkdir()
    fake.write_text(FAKE_SERVER)
    fake.chmod(0o755)
    control = f"plain{secrets.token_hex(8)}"  # an ordinary variable: it should be in the log
    runs = tmp_path / "runs"
    with FakeGitHub(token=block_canaries["github_token"]) as gh:
        target = tmp_path / "target.yaml"
        target.write_text(TARGET.format(github_url=gh.url))
        out = subprocess.run(
            [INFOPT, "optimize", "--target", str(target), "--runs-dir", str(runs),
             "--credentials-block", block],
            env={**prefect_server, **env_canaries, "INFOPT_LLAMA_SERVER": str(fake),
                 "INFOPT_SECURITY_CONTROL": control, "PREFECT_LOGGING_LEVEL": "INFO"},
            capture_output=True, timeout=180)
    console = out.stdout + out.stderr
    # The token travelled where it should: the block's, to the trusted issue-search URL.
    assert gh.requests, console[-3000:].decode(errors="replace")
    assert {r["auth"] for r in gh.requests} == {f"Bearer {block_canaries['github_token']}"}, (
        "the request's github_token_to_url did not reach the trial's issue search "
        "(EngineRun.troubleshoot, set where the flow builds it)")
    assert b"error line leave this machine" in console  # said before sending

    run_dirs = [d for d in runs.iterdir() if d.is_dir()]
    assert len(run_dirs) == 1
    logs = list(run_dirs[0].rglob("engine*.log"))
    # The scan would see a leak: the engine's environment dump is in the run folder.
    assert logs and any(f"INFOPT_SECURITY_CONTROL={control}" in p.read_text() for p in logs)

    home = Path(prefect_server["PREFECT_HOME"])
    db = home / "prefect.db"
    assert db.is_file(), sorted(p.name for p in home.iterdir())
    found_runs, n_run, b_run = _scan(runs, everything)
    found_home, n_home, b_home = _scan(home, everything)  # the database, its WAL, results
    # The database scanned is the server's: the block is in it (its data encrypted) and so is
    # the run's log of the search notice.
    db_bytes = b"".join(p.read_bytes() for p in home.glob("prefect.db*"))
    assert block.encode() in db_bytes and b"error line leave this machine" in db_bytes
    print(f"canary scan: {n_run} run files ({b_run} bytes), {n_home} Prefect home files "
          f"({b_home} bytes), {len(console)} console bytes")
    assert found_runs == {} and found_home == {} and _hits(console, everything) == []
