"""`EngineRuntime`: one build of one engine, saved once and loaded by name: a binary, a virtual
environment or a container image, with the engine's version.

A flow points the engine's adapter at the build through `env_overrides()` (the adapter's own
`executable_env`, e.g. $INFOPT_VLLM_PYTHON, which its `locate()` reads), so no code branches on
the engine; an image goes to a Kubernetes run as the `image` job variable (`job_variables()`).
"""

from __future__ import annotations

from pathlib import Path

from prefect.blocks.core import Block
from pydantic import Field, field_validator, model_validator

from infopt.engines import ENGINES, adapter_for
from infopt.specs.base import InputError


class EngineRuntime(Block):
    _block_type_name = "infopt engine runtime"
    _description = ("One build of an inference engine for infopt: a binary, a virtual "
                    "environment or a container image, and its version.")

    engine: str = Field(description="engine name: " + ", ".join(e.value for e in ENGINES))
    version: str = Field(description="the engine's release, as its package index spells it")
    binary_path: str | None = Field(None, description="the engine's executable (llama-server, "
                                                      "trtllm-serve, or an interpreter)")
    venv_path: str | None = Field(None, description="a virtual environment the engine is "
                                                    "installed in")
    image: str | None = Field(None, description="a container image (pin a tag or digest)")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in {e.value for e in ENGINES}:
            raise ValueError(f"unknown engine '{v}': choose one of "
                             f"{', '.join(e.value for e in ENGINES)}")
        return v

    @field_validator("version")
    @classmethod
    def _version_given(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("version is empty: give the engine's release, e.g. 0.11.0")
        return v.strip()

    @model_validator(mode="after")
    def _exactly_one_source(self) -> EngineRuntime:
        given = [n for n in ("binary_path", "venv_path", "image") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of binary_path, venv_path or image (got "
                f"{', '.join(given) if given else 'none'}): one runtime is one build")
        adapter = adapter_for(self.engine)
        if self.venv_path and adapter.venv_executable is None:
            raise ValueError(f"{self.engine} is not installed as a Python package: give "
                             "binary_path (its executable) or image instead of venv_path")
        if (self.binary_path or self.venv_path) and adapter.executable_env is None:
            raise ValueError(f"infopt cannot point {self.engine} at another build on this "
                             "machine (its adapter has no executable variable): give image")
        return self

    def executable(self) -> str | None:
        """The file the adapter runs for this build (None: the build is an image)."""
        if self.binary_path:
            return str(Path(self.binary_path).expanduser())
        if self.venv_path:
            venv_exe = adapter_for(self.engine).venv_executable
            return str(Path(self.venv_path).expanduser() / str(venv_exe))
        return None

    def env_overrides(self) -> dict[str, str]:
        """Environment variables that make the adapter's `locate()` find this build; empty
        for an image (nothing runs from this machine's files)."""
        exe = self.executable()
        env = adapter_for(self.engine).executable_env
        return {env: exe} if exe and env else {}

    def job_variables(self) -> dict[str, str]:
        """The Kubernetes job variables of this build (deployments/k8s-gpu-job-template.json)."""
        return {"image": self.image} if self.image else {}

    def check_version(self) -> None:
        """InputError when the installed build reports another release than `version`. Not
        checked (returns) for an image, or when the adapter cannot tell the release."""
        exe, adapter = self.executable(), adapter_for(self.engine)
        if exe is None or adapter.installed_release is None:
            return
        found = adapter.installed_release(exe)
        if found is not None and found != self.version:
            raise InputError(f"engine runtime for {self.engine}: {exe} is release {found}, but "
                             f"the block says {self.version}; fix the block's version or path")
