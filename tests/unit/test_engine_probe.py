"""An engine executable that is not the engine: its version report hangs, cannot run, or prints
nothing (or no version line). One error naming the program and what it did; a bad executable
the user named ($INFOPT_LLAMA_SERVER) stops engine selection instead of skipping to another."""

from __future__ import annotations

import pytest

from infopt.engines.base import version_report
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.engines.routing import RouteChoice, select_available
from infopt.specs.base import EngineOverrideError, EngineUnavailableError
from infopt.specs.serving import EngineName


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "fake-engine"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_a_version_report_that_hangs_is_named_with_its_timeout(tmp_path):
    exe = _script(tmp_path, "sleep 30 &\nsleep 30")  # a child holds the pipes too
    with pytest.raises(EngineUnavailableError, match=r"did not answer within 1 s") as err:
        version_report([exe, "--version"], engine="X", env_var="INFOPT_X", timeout_s=1)
    assert exe in str(err.value) and "$INFOPT_X" in str(err.value)


def test_silence_and_a_missing_program_are_named(tmp_path):
    with pytest.raises(EngineUnavailableError, match="status 3 and printed nothing"):
        version_report([_script(tmp_path, "exit 3"), "--version"], engine="X",
                       env_var="INFOPT_X", timeout_s=5)
    with pytest.raises(EngineUnavailableError, match="could not run"):
        version_report([str(tmp_path / "absent")], engine="X", env_var="INFOPT_X", timeout_s=5)


def test_llama_server_without_a_version_line_is_refused(tmp_path, monkeypatch):
    exe = _script(tmp_path, "echo 'usage: something else'")
    llamacpp.detect_version.cache_clear()
    with pytest.raises(EngineUnavailableError, match="printed no 'version:' line") as err:
        llamacpp.detect_version(exe)
    assert type(err.value) is EngineUnavailableError  # no override: an unusable default
    monkeypatch.setenv(llamacpp.ENV_OVERRIDE, exe)
    llamacpp.detect_version.cache_clear()
    with pytest.raises(EngineOverrideError, match="usage: something else"):
        llamacpp.detect_version(exe)
    llamacpp.detect_version.cache_clear()
    good = _script(tmp_path, "echo 'version: 7123 (a1b2c3d)' >&2")
    assert llamacpp.detect_version(good) == "7123 (a1b2c3d)"


def test_a_named_executable_that_is_unusable_is_not_skipped(tmp_path):
    routes = [RouteChoice(engine=EngineName.LLAMACPP, reason="GGUF"),
              RouteChoice(engine=EngineName.VLLM, reason="comparator")]

    def available(name):
        if name == EngineName.LLAMACPP:
            raise EngineOverrideError("llama-server binary is missing ($INFOPT_LLAMA_SERVER)")

    with pytest.raises(EngineOverrideError):
        select_available(routes, None, available)

    def default_missing(name):
        if name == EngineName.LLAMACPP:
            raise EngineUnavailableError("not built")

    assert select_available(routes, None, default_missing) == (
        EngineName.VLLM, ["llamacpp: not built"])
