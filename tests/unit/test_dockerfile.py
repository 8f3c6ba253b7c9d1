"""deployments/Dockerfile, checked as far as a machine without Docker allows (issue 32, item
7): its base is the vLLM release infopt pins, overridable by digest; it copies every package
infopt installs and nothing .dockerignore drops; the engine's interpreter and the checkout the
deployments' pull step names are where the environment says; the base image's `vllm serve`
entrypoint is cleared for the worker's command; no secret is baked in."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from infopt.bootstrap import VLLM_CPU_VERSION

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deployments" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _env(instructions) -> dict[str, str]:
    env: dict[str, str] = {}
    for op, rest in instructions:
        if op == "ENV":
            env.update(dict(re.findall(r"(\w+)=(\S+)", rest)))
    return env


def test_the_base_is_the_pinned_vllm_release_and_overridable_by_digest():
    ins = _instructions()
    assert ins[0] == ("ARG", f"BASE_IMAGE=vllm/vllm-openai:v{VLLM_CPU_VERSION}")
    assert ins[1] == ("FROM", "${BASE_IMAGE}")
    assert "--build-arg BASE_IMAGE=vllm/vllm-openai@sha256:" in DOCKERFILE.read_text()


def test_every_installed_package_is_copied_and_none_is_ignored():
    ins = _instructions()
    copied = {src for op, rest in ins if op == "COPY" for src in rest.split()[:-1]}
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} <= copied
    assert {"pyproject.toml", "README.md", "prefect.yaml"} <= copied
    assert all((ROOT / src).exists() for src in copied), copied
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert not copied & ignored


def test_the_engine_interpreter_checkout_and_entrypoint_are_set_for_the_worker():
    ins = _instructions()
    env = _env(ins)
    runs = " ".join(rest for op, rest in ins if op == "RUN")
    assert env["INFOPT_VLLM_PYTHON"] in runs and "import vllm" in runs
    assert env["INFOPT_ENGINE_DEVICE"] == "cuda"
    workdir = next(rest for op, rest in ins if op == "WORKDIR")
    assert env["INFOPT_CHECKOUT"] == workdir
    assert '"{{ $INFOPT_CHECKOUT }}"' in (ROOT / "prefect.yaml").read_text()
    assert ("ENTRYPOINT", "[]") in ins
    assert env["PATH"].startswith("/opt/infopt/venv/bin")
    assert not [k for k in env if re.search(r"TOKEN|SECRET|PASSWORD|KEY", k)]
