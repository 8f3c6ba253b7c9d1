"""What an engine is started with: the launch (argv, environment, files) and the facts an
adapter builds a control and a baseline from. Below the adapters (infopt.engines.base) and the
renderings of a launch (helm, layout, render), so none of them imports another to name it."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from infopt.specs.serving import AnyServingConfig


@dataclass(frozen=True)
class Launch:
    """What to execute: argv plus the environment variables the engine needs on top of ours."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # What a container or cluster rendering needs (infopt.engines.render); optional so a Launch
    # built by hand (or by an adapter that does not set them) stays valid for local process use.
    engine: str | None = None  # EngineName value: the health path comes from its adapter
    port: int | None = None
    model_path: str | None = None  # mounted read-only into a container at the same path
    # Files the engine reads (path as the engine sees it -> text), e.g. TensorRT-LLM's
    # --extra_llm_api_options YAML; written by render.write_launch_files before a local start.
    files: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        """Copy-pasteable shell command (env assignments first)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + shlex.join(self.argv)


@dataclass(frozen=True)
class ServingTarget:
    """What an adapter needs to build the control and the baseline for one model here."""

    model_path: str
    served_model_name: str
    native_context_tokens: int
    usable_cpus: int
    port: int | None = None
    # The host RAM the user allows for reusable KV prefixes (request.kv_prefix_budget): an
    # engine whose defaults keep more (llama.cpp's 8 GiB prompt cache) is capped to it in the
    # baseline. None: not given.
    kv_prefix_ram_bytes: int | None = None


class BuildsLaunch(Protocol):
    """An engine adapter, as far as a launch needs one (infopt.engines.base.EngineAdapter)."""

    @property
    def build_launch(self) -> Callable[[Any, str, int], Launch]: ...


def launch_for(adapter: BuildsLaunch, config: AnyServingConfig, executable: str,
               port: int) -> Launch:
    """The adapter's launch of `config`, with the configuration's own environment (a remedy's
    variables) on top of what the adapter sets: every start and every rendering goes through
    here, so what ran is what is printed and deployed."""
    launch = adapter.build_launch(config, executable, port)
    env = getattr(config, "env", None)
    return replace(launch, env={**launch.env, **env}) if env else launch
