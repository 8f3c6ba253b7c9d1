"""Run INSIDE the SGLang argument environment (`make sglang-args`, infopt.bootstrap
ensure_sglang_args), never by infopt itself: each SGLang command infopt builds is parsed and
resolved by SGLang 0.5.23's own code, as `python -m sglang.launch_server` would, on a
simulated NVIDIA host, and one verdict per command says what SGLang made of it.

launch_server.py (0.5.23) does `prepare_server_args(sys.argv[1:])` (server_args.py: a plain
argparse.ArgumentParser with ServerArgs.add_cli_args, then ServerArgs.from_cli_args), and
run_server then calls `server_args.resolve_once()`, which runs every resolution hook in
arg_groups/pipeline.py run_resolution_pipeline (memory defaults, CUDA graphs, hierarchical
cache, speculative decoding, ...). Both are done here; nothing is started.

The host: the hooks read the GPU through torch.cuda and sglang.srt.utils.common (is_cuda,
get_nvgpu_memory_capacity via nvidia-smi, the compute capability) and through
runtime_context.get_platform(). SGLang is imported with no device visible (its GPU kernels'
imports stay off: none is installed), then each command runs in a forked child whose torch.cuda
and nvidia-smi answers are the simulated host's (`hosts` below: memory in MiB as nvidia-smi's
memory.total reports it, count, name, compute capability, CUDA version), so one command's
resolution (hooks set environment variables) cannot leak into the next.

torchvision: imported by sglang.srt.configs (multimodal image transforms) but not loadable
beside CPU torch (PyPI's wheel links libtorch_cuda; `make engines` removes it from the vLLM CPU
environment); argument resolution never transforms an image, so where it is absent its imports
are answered by a placeholder whose names do nothing useful.

stdin: {"hosts": {NAME: {"count", "memory_mib", "name", "capability": [9, 0], "cuda"}},
        "cases": [{"host": NAME, "argv": [...]}]}
stdout: one line "RESULT {json}": {"options": {option string: its choices or null} of
        SGLang's parser,
        "verdicts": [{"ok": true, resolved fields...} | {"ok": false, "why": ...}]}
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import io
import json
import os
import sys
import types


class _Absent:
    """What a torchvision name stands for here: lookups and calls give more placeholders, so
    module-level uses (T.Compose([...]) in a function body, InterpolationMode.BICUBIC) import;
    their results are never used, as transforms run on images, never during resolution."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> _Absent:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self._name}.{attr}")

    def __call__(self, *args: object, **kwargs: object) -> _Absent:
        return _Absent(f"{self._name}()")

    def __getitem__(self, key: object) -> _Absent:
        return self


class _TorchvisionPlaceholder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def attr(name: str, owner: str = spec.name) -> _Absent:
            if name.startswith("__"):  # no __version__/__file__: transformers sees no torchvision
                raise AttributeError(name)
            return _Absent(f"{owner}.{name}")
        module.__getattr__ = attr  # type: ignore[method-assign]
        return module

    def exec_module(self, module) -> None:
        pass


def _import_sglang():
    """SGLang's argument code, imported with no GPU visible."""
    import torch

    torch.cuda.is_available = lambda: False
    torch.version.cuda = None
    # transformers decides once (lru_cache) whether torchvision is there: before the
    # placeholder exists, so it says no and never asks the placeholder for a version. Where
    # the borrowed environment has a working torchvision (a CUDA host's vLLM), it is used.
    from transformers.utils import import_utils

    if not import_utils.is_torchvision_available():
        sys.meta_path.insert(0, _TorchvisionPlaceholder())
    import argparse
    import pkgutil

    import sglang.srt.arg_groups as groups
    from sglang.srt.server_args import ServerArgs, prepare_server_args

    # The hooks import their modules when they run; imported now, with no GPU, their
    # module-level `if is_cuda(): from sgl_kernel import ...` stays off (a module first
    # imported under the simulated GPU would look for kernels, and its verdict says so).
    for mod in [m.name for m in pkgutil.walk_packages(groups.__path__, groups.__name__ + ".")]:
        importlib.import_module(mod)
    for mod in ("sglang.srt.kernel_plugins.nvidia.binding",
                "sglang.srt.kernel_plugins.amd.binding", "sglang.srt.speculative.spec_info"):
        importlib.import_module(mod)

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = {o: None if a.choices is None else [str(c) for c in a.choices]
               for a in parser._actions for o in a.option_strings}
    return prepare_server_args, options


def _simulate(host: dict) -> None:
    """torch.cuda and nvidia-smi as the simulated host answers them (in the child only)."""
    import torch

    major, minor = host["capability"]
    total = host["memory_mib"] * 2**20

    class Props:
        name = host["name"]
        total_memory = total
        multi_processor_count = host.get("sms", 132)

    Props.major, Props.minor = major, minor
    torch.cuda.is_available = lambda: True
    torch.cuda.is_initialized = lambda: False
    torch.cuda.device_count = lambda: host["count"]
    torch.cuda.get_device_capability = lambda *a, **k: (major, minor)
    torch.cuda.get_device_name = lambda *a, **k: host["name"]
    torch.cuda.get_device_properties = lambda *a, **k: Props()
    torch.cuda.mem_get_info = lambda *a, **k: (total, total)
    torch.version.cuda = host["cuda"]
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.utils import common

    for name in dir(common):  # the probes are lru_cache'd: forget the import-time answers
        probe = getattr(common, name)
        if callable(getattr(probe, "cache_clear", None)):
            probe.cache_clear()
    common.get_nvgpu_memory_capacity = lambda: float(host["memory_mib"])
    common._get_device_sm_via_nvml = lambda *a, **k: major * 10 + minor
    # sglang[all] ships FlashInfer on a CUDA host; here it is absent (no kernels), so the
    # platform's answer is given, not probed (it picks sampling and attention defaults).
    override_platform(has_flashinfer=True).install()


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _resolve(prepare, host: dict, argv: list[str]) -> dict:
    from sglang.srt.arg_groups.overrides import resolving_view

    _simulate(host)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = prepare(argv)
    except SystemExit as e:  # argparse's refusal: its message went to stderr
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"ok": False, "why": f"argparse exit {e.code}: {lines[-1] if lines else ''}"}
    try:
        args.resolve_once()
    except Exception as e:  # a hook's refusal
        return {"ok": False, "why": f"resolution: {type(e).__name__}: {e}"}
    cfg = resolving_view(args)
    graphs = cfg.cuda_graph_config
    out = {name: _plain(getattr(cfg, name)) for name in (
        "tp_size", "pp_size", "dp_size", "ep_size", "max_running_requests", "context_length",
        "mem_fraction_static", "chunked_prefill_size", "schedule_policy", "kv_cache_dtype",
        "attention_backend", "disable_radix_cache", "enable_torch_compile",
        "enable_hierarchical_cache", "hicache_size", "speculative_algorithm",
        "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
        "speculative_num_draft_tokens", "device", "model_path")}
    out.update(ok=True, cuda_graph_max_bs_decode=graphs.decode.max_bs,
               cuda_graph_backend_decode=_plain(graphs.decode.backend),
               cuda_graph_backend_prefill=_plain(graphs.prefill.backend))
    return out


def _in_child(prepare, host: dict, argv: list[str]) -> dict:
    """One command's verdict from a forked child (fresh state, the parent's imports)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            verdict = _resolve(prepare, host, argv)
        except BaseException as e:  # noqa: BLE001 - every failure is a verdict
            verdict = {"ok": False, "why": f"{type(e).__name__}: {e}"}
        with os.fdopen(write, "w") as fh:
            fh.write(json.dumps(verdict))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"ok": False, "why": f"the resolving child died (wait status {status})"}
    return json.loads(text)


def main() -> None:
    job = json.load(sys.stdin)
    prepare, options = _import_sglang()
    verdicts = [_in_child(prepare, job["hosts"][case["host"]], case["argv"])
                for case in job["cases"]]
    print("RESULT " + json.dumps({"options": options, "verdicts": verdicts}), flush=True)


if __name__ == "__main__":
    main()
