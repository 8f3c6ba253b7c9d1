"""bench/gpu_check (issue 48): the GPU check's command lines, time boxes, refusals and files,
without a GPU, a network or an engine (every command stubbed but a few `sleep`s and git)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.gpu_check import commands, prepare, run, stages
from bench.gpu_check.__main__ import main
from bench.gpu_check.build import build_progress, cublas_candidates
from bench.gpu_check.common import REPO, config

PY = "/opt/py3.12/bin/python3"


def _cfg(tmp_path: Path, dry: bool = False, **knobs: str):
    env = {"HOME": str(tmp_path), "GPU_CHECK_PYTHON": PY, "GPU_CHECK_WORK": str(tmp_path / "w"),
           "OUT": str(tmp_path / "out"), **knobs}
    return config(env, repo=tmp_path / "repo", dry=dry)


# ---------------------------------------------------------------------------------------------
# settings


def test_config_defaults_and_knobs(tmp_path):
    cfg = config({"HOME": str(tmp_path)}, repo=tmp_path)
    assert (cfg.py, cfg.budget_s, cfg.cuda_arch, cfg.device_py_version) == (
        "python3", 480, "90-real", "3.12")
    assert (cfg.outdir, cfg.work) == (Path("/tmp/gpu-check-out"), Path("/tmp/gpucheck"))
    assert (cfg.streams, cfg.in_tokens, cfg.out_tokens, cfg.requests) == (8, 128, 256, 16)
    assert cfg.ctx_per_slot == 512  # 128 + 256 + 64, in 256-token steps
    assert cfg.cache == tmp_path / ".cache/infopt" and cfg.pack == tmp_path / ".gpucheck"
    # $OUT (the device tool's) before GPU_CHECK_OUT; an empty knob is the default.
    cfg = config({"OUT": "/o", "GPU_CHECK_OUT": "/g", "GPU_CHECK_BUDGET_S": "240",
                  "GPU_CHECK_OPTIMIZE": "0", "GPU_CHECK_STREAMS": "",
                  "GPU_CHECK_CMAKE_EXTRA": "-DA=1  -DB=2"}, repo=tmp_path)
    assert (cfg.outdir, cfg.budget_s, cfg.optimize, cfg.streams) == (Path("/o"), 240, False, 8)
    assert cfg.cmake_extra == ("-DA=1", "-DB=2")
    assert config({"GPU_CHECK_OUT": "/g"}, repo=tmp_path).outdir == Path("/g")


def test_a_bad_knob_is_refused_in_one_paragraph(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        config({"GPU_CHECK_BUDGET_S": "8m"}, repo=tmp_path)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu_check: GPU_CHECK_BUDGET_S='8m' is not a whole number")
    assert err.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# command lines: prepare


def test_prepare_command_lines(tmp_path):
    assert commands.pip_download_sdist("py", tmp_path, "0.3.36") == [
        "py", "-m", "pip", "download", "-q", "--no-deps", "--no-binary=:all:", "-d",
        str(tmp_path), "llama-cpp-python==0.3.36"]
    wheel = commands.pip_download_wheel("py", tmp_path, "orjson", "3.11.0", "3.12")
    assert wheel[:11] == ["py", "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                          "--python-version", "3.12", "--implementation", "cp"]
    assert wheel[-3:] == ["-d", str(tmp_path), "orjson==3.11.0"]
    assert wheel.count("--platform") == len(commands.PLATFORMS) == 9
    assert "manylinux_2_17_x86_64" in wheel and not any("aarch64" in a for a in wheel)
    assert commands.recipe("py", Path("/m.gguf"), Path("/p/model")) == [
        "py", "-m", "bench.gpu_check", "recipe", "--gguf", "/m.gguf", "--out", "/p/model"]
    assert commands.pack_sources(Path("/t/vendor")) == (
        ["tar", "-C", "/t/vendor", "-cf", "-", "llama.cpp"], ["xz", "-T0", "-6"])
    pruned = {str(p.relative_to(tmp_path)) for p in commands.prune_paths(tmp_path)}
    assert {"models", "tests", "ggml/src/ggml-vulkan", "tools/ui/node_modules"} <= pruned
    assert not {"ggml/src/ggml-cuda", "ggml/src/ggml-cpu", "tools/server"} & pruned
    assert len(commands.WHEELS) == len(set(commands.WHEELS)) == 78


def test_wheel_file_names_match_their_distribution_only():
    pat = prepare.wheel_pattern("pydantic-core", "2.41.5")
    assert pat.match("pydantic_core-2.41.5-cp312-cp312-manylinux_2_17_x86_64.whl")
    assert not pat.match("pydantic-2.41.5-py3-none-any.whl")
    assert not pat.match("pydantic_core-2.41.50-cp312-cp312-manylinux_2_17_x86_64.whl")
    ruamel = prepare.wheel_pattern("ruamel-yaml", "0.18.6")
    assert ruamel.match("ruamel.yaml-0.18.6-py3-none-any.whl")
    assert prepare.wheel_pattern("Jinja2", "3.1").match("jinja2-3.1-py3-none-any.whl")


# ---------------------------------------------------------------------------------------------
# command lines: run


def test_run_command_lines(tmp_path):
    m, inv = Path("/w/standin.gguf"), Path("/w/hardware-nvml.json")
    assert commands.wheels_install("py", Path("/w/site"), [Path("/p/a.whl"), Path("/p/b.whl")]) == [
        "py", "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
        "--no-cache-dir", "--upgrade", "--target", "/w/site", "/p/a.whl", "/p/b.whl"]
    assert commands.import_check("py")[:2] == ["py", "-c"]
    assert "flows.optimize" in commands.import_check("py")[2]
    assert commands.standin("py", Path("/p/model"), m) == [
        "py", "-m", "bench.gpu_check", "standin", "--recipe", "/p/model", "--out", str(m)]
    assert commands.hardware("py", measure=False) == [
        "py", "-m", "infopt.cli", "hardware", "--json", "--no-measure"]
    assert commands.hardware("py", measure=True)[-1] == "--json"
    plan = commands.plan("py", m, inv, None, 128, 256, 8)
    assert plan == ["py", "-m", "infopt.cli", "plan", "--model", str(m), "--engine", "llamacpp",
                    "--inventory", str(inv), "--input-tokens", "128", "--output-tokens", "256",
                    "--context", "384", "--concurrency", "8", "--json"]
    assert commands.plan("py", m, inv, "H200", 128, 256, 8)[10:12] == ["--gpu", "H200"]
    assert commands.llama_bench(Path("/l/bin/llama-bench"), m, 128, 256, gpu=True) == [
        "/l/bin/llama-bench", "-m", str(m), "-ngl", "99", "-p", "128", "-n", "256", "-r", "3",
        "-o", "json"]
    assert "-ngl" not in commands.llama_bench(Path("/l/bin/llama-bench"), m, 128, 256, gpu=False)
    assert commands.llama_server(Path("/l/bin/llama-server"), m, 8, 512) == [
        "/l/bin/llama-server", "-m", str(m), "--host", "127.0.0.1", "--port", "18932",
        "--alias", "gpu-check", "--metrics", "-c", "4096", "--parallel", "8"]
    assert commands.bench("py", "http://127.0.0.1:18932", Path("/w/workload.yaml"),
                          Path("/w/bench")) == [
        "py", "-m", "infopt.cli", "bench", "--endpoint", "http://127.0.0.1:18932", "--model",
        "gpu-check", "--engine", "llamacpp", "--workload", "/w/workload.yaml", "--out", "/w/bench",
        "--json"]
    assert commands.optimize("py", m, Path("/w/runs"), 8, 128, 256, 8) == [
        "py", "-m", "infopt.cli", "optimize", "--model", str(m), "--engine", "llamacpp",
        "--runs-dir", "/w/runs", "--concurrency", "8", "--input-tokens", "128",
        "--output-tokens", "256", "--requests", "8", "--repeats", "1", "--scenarios", "none",
        "--dimensions", "scheduling"]
    assert commands.summary("py", Path("/w"), Path("/o"), 480, 300, dry=True) == [
        "py", "-m", "bench.gpu_check", "summary", "--work", "/w", "--out", "/o", "--budget",
        "480", "--elapsed", "300", "--dry-run"]
    assert "--dry-run" not in commands.summary("py", Path("/w"), Path("/o"), 480, 300, dry=False)
    assert commands.compare("py", Path("p"), Path("b"), Path("c"), Path("l"), Path("o"))[3:] == [
        "compare", "--plan", "p", "--bench", "b", "--copybw", "c", "--llama-bench", "l",
        "--out", "o"]
    tar = commands.logs_tar(Path("/w"), Path("/o/logs.tar.gz"))
    assert tar[:6] == ["tar", "-C", "/w", "-czf", "/o/logs.tar.gz", "--ignore-failed-read"]
    assert {"build.log", "server.log", "stages.tsv", "env.txt", "bench"} <= set(tar)
    assert "--exclude=*.parquet" in commands.optimize_tar(Path("/w"), Path("/o/optimize.tar.gz"))
    yaml = commands.workload_yaml(8, 128, 256, 16)
    assert "values: [1, 8]" in yaml and "tokens: 256" in yaml and "measured_requests: 16" in yaml


def test_cuda_build_command_lines():
    conf = commands.cmake_configure(Path("/w/src/llama.cpp"), Path("/w/build"),
                                    ["-DGGML_CUDA=ON"], ["-DGGML_CUDA_NO_VMM=ON"], "90-real",
                                    ninja=True)
    assert conf[:7] == ["cmake", "-S", "/w/src/llama.cpp", "-B", "/w/build", "-G", "Ninja"]
    assert conf.index("-DGGML_CUDA=ON") < conf.index("-DGGML_CUDA_NO_VMM=ON") \
        < conf.index("-DCMAKE_CUDA_ARCHITECTURES=90-real")
    assert {"-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_UI=OFF"} <= set(conf)
    assert "-G" not in commands.cmake_configure(Path("s"), Path("b"), [], [], "90", ninja=False)
    assert commands.cmake_build(Path("/w/build"), 16) == [
        "cmake", "--build", "/w/build", "-j", "16", "--target", "llama-server", "llama-quantize",
        "llama-bench"]
    # cuBLAS headers from the wheel: on every language's flags, CUDA's among the extras.
    flags, cuda = commands.with_include(["-DGGML_CUDA=ON", "-DCMAKE_C_FLAGS=-O2"], "-I/n/include")
    assert flags == ["-DGGML_CUDA=ON", "-DCMAKE_C_FLAGS=-O2 -I/n/include"]
    assert cuda == "-DCMAKE_CUDA_FLAGS=-I/n/include"
    flags, _ = commands.with_include(["-DGGML_CUDA=ON"], "-I/n/include")
    assert flags == ["-DGGML_CUDA=ON", "-DCMAKE_CXX_FLAGS=-I/n/include"]
    pairs = cublas_candidates(Path("/cuda"))
    assert pairs[0] == (Path("/cuda/lib64"), Path("/cuda/include")) and len(pairs) == 15


# ---------------------------------------------------------------------------------------------
# the budget


def test_time_boxes():
    assert stages.build_cap(480) == 385 and stages.build_cap(540) == 445
    assert stages.build_cap(600) == 450 and stages.build_cap(80) == -15  # skipped
    assert stages.within(400, 60, 20, dry=False) == 60
    assert stages.within(50, 60, 20, dry=False) == 45
    assert stages.within(10, 60, 20, dry=False) == 20  # the floor, past the budget
    assert stages.within(400, 60, 20, dry=True) == 300  # the CPU rehearsal: 5x
    assert stages.optimize_limit(300, 90) == 285
    assert stages.optimize_limit(104, 90) == 0 and stages.optimize_limit(105, 90) == 90


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FakeRunner(stages.Runner):
    """Every command answered at once: a step takes `took[name]` seconds of the fake clock and
    writes what its successors read; the time boxes, skips and records are the real ones."""

    def __init__(self, cfg, clock, took, captured=None):
        super().__init__(cfg.work, stages.Budget(cfg.budget_s, cfg.dry, clock), {})
        self.cfg, self.clock, self.took = cfg, clock, took
        self.captured = captured or {}
        self.ran: list[tuple[str, float | None, list[str]]] = []
        self.current = ""

    def stage(self, name, limit_s, argv, stdout=None, stderr=None):
        self.current = name
        try:
            return super().stage(name, limit_s, argv, stdout, stderr)
        finally:
            self.current = ""

    def execute(self, argv, limit_s=None, stdout=None, stderr=None):
        name = self.current or " ".join(argv[1:4])  # a command outside a stage: compare
        self.ran.append((name, limit_s, list(argv)))
        self.clock.t += self.took.get(name, 1)
        if name == "hardware-nvml" and isinstance(stdout, Path):
            stdout.write_text(json.dumps({"gpus": [] if self.cfg.dry else [{"name": "H100"}]}))
        elif name == "standin":
            self.cfg.model.write_bytes(b"GGUF")
        elif name == "plan" and isinstance(stdout, Path):
            stdout.write_text("{}")
        elif name == "build":
            (Path(argv[-1]) / "bin").mkdir(parents=True)
            (Path(argv[-1]) / "bin/llama-server").write_text("#!/bin/sh\n")
            os.chmod(Path(argv[-1]) / "bin/llama-server", 0o755)
        if limit_s is not None and self.took.get(name, 1) > limit_s:
            return 124
        return 0

    def capture(self, argv, env=None, timeout_s=120, merge=True):
        for needle, answer in self.captured.items():
            if needle in " ".join(argv):
                return answer
        return 1, ""

    def background(self, name, limit_s, argv):
        self.stage(name, limit_s, argv)  # at once: the steps beside it then come after it
        return _Joined()


class _Joined:
    def join(self) -> None:
        pass


def _run(tmp_path, dry, took, **knobs):
    cfg = _cfg(tmp_path, dry=dry, **knobs)
    cfg.work.mkdir(parents=True)
    cfg.outdir.mkdir(parents=True)
    llama = tmp_path / "llamacpp"
    captured = {"default_paths().llamacpp_dir": (0, f"{llama}\n")}
    if dry:
        (llama / "bin").mkdir(parents=True)
        (llama / "bin/llama-server").write_text("#!/bin/sh\n")
        os.chmod(llama / "bin/llama-server", 0o755)
        captured = {"default_paths().llama_server": (0, f"{llama}/bin/llama-server\n"),
                    "import prefect": (0, "")}
    runner = FakeRunner(cfg, Clock(), took, captured)
    rc = run.run_steps(cfg, runner)
    tsv = (cfg.work / "stages.tsv").read_text().splitlines()
    return rc, runner, [ln.split("\t") for ln in tsv]


def test_a_gpu_run_at_the_default_budget(tmp_path, capsys):
    rc, runner, rows = _run(tmp_path, False, {"build": 385, "served": 40})
    assert rc == 0
    limits = {name: limit for name, limit, _ in runner.ran if limit is not None}
    # The build: 480 - 95 s. The measurements after it: what is left (88 s, less 5) up to 60
    # and 180 s. The optimize step then has 46 s: under 15 + 90, skipped.
    assert limits == {"build": 385, "wheels": 120, "import": 90, "standin": 60,
                      "hardware-nvml": 60, "plan": 90, "copybw": 90, "hardware": 60,
                      "llama-bench": 60, "served": 82}
    assert [r[0] for r in rows] == ["build", "wheels", "import", "standin", "hardware-nvml",
                                    "plan", "copybw", "hardware", "llama-bench", "served",
                                    "optimize"]
    assert rows[0] == ["build", "0", "385", ""] and rows[9] == ["served", "0", "40", ""]
    assert runner.ran[0][2] == [sys.executable, "-m", "bench.gpu_check", "_build",
                                f"{tmp_path}/llamacpp"]  # re-entered under its time box
    assert rows[-1] == ["optimize", "skipped", "0", "too little time left"]
    plan = next(argv for name, _, argv in runner.ran if name == "plan")
    assert "--gpu" not in plan  # NVML's GPU, not the catalog's
    assert "-ngl" in next(argv for name, _, argv in runner.ran if name == "llama-bench")
    assert [name for name, limit, _ in runner.ran if limit is None] == [
        "-m bench.gpu_check compare"] * 2
    assert "skip optimize: too little of the 480 s budget left" in capsys.readouterr().out


def test_a_longer_budget_leaves_the_optimize_step_its_time(tmp_path):
    _, runner, rows = _run(tmp_path, False, {"build": 300, "served": 40},
                           GPU_CHECK_BUDGET_S="600")
    limits = {name: limit for name, limit, _ in runner.ran}
    assert limits["build"] == 450  # at most 450 s, whatever the budget
    # 600 - 300 (build) - 7 (the steps after it) = 293 s left: 60 and 180 s for the
    # measurements; 251 s after them, less 15 for the optimize step.
    assert (limits["llama-bench"], limits["served"], limits["optimize"]) == (60, 180, 236)
    assert rows[-1] == ["optimize", "0", "1", ""]


def test_a_second_call_resumes_the_build_in_its_shorter_budget(tmp_path):
    _, runner, rows = _run(tmp_path, False, {"build": 145}, GPU_CHECK_BUDGET_S="240")
    limits = {name: limit for name, limit, _ in runner.ran}
    assert (limits["build"], limits["llama-bench"], limits["served"]) == (145, 60, 82)
    assert rows[0] == ["build", "0", "145", ""]
    assert rows[-1][:2] == ["optimize", "skipped"]


def test_no_optimize_step_when_switched_off(tmp_path):
    _, runner, rows = _run(tmp_path, False, {"build": 10}, GPU_CHECK_OPTIMIZE="0")
    assert rows[-1][0] == "served" and "optimize" not in {n for n, _, _ in runner.ran}


def test_no_llama_server_after_the_build_ends_the_run(tmp_path, capsys):
    cfg = _cfg(tmp_path)
    cfg.work.mkdir(parents=True)
    cfg.outdir.mkdir(parents=True)
    (cfg.work / "build.log").write_text("[1/359] Building CUDA object\n[152/359] Building CUDA\n")

    class NoBuild(FakeRunner):
        def execute(self, argv, limit_s=None, stdout=None, stderr=None):
            if self.current == "build":
                self.clock.t += limit_s
                return 124
            return super().execute(argv, limit_s, stdout, stderr)

    runner = NoBuild(cfg, Clock(), {}, {"llamacpp_dir": (0, f"{tmp_path}/llamacpp\n")})
    assert run.run_steps(cfg, runner) == 1
    out = capsys.readouterr().out
    assert "nothing to measure" in out and "the build had reached [152/359]" in out
    rows = (cfg.work / "stages.tsv").read_text().splitlines()
    assert rows[0] == "build\t124\t385\tstopped at its 385 s limit"
    assert rows[-1].startswith("hardware\t")


def test_a_dry_run_takes_the_cpu_server_and_the_catalogs_gpu(tmp_path):
    rc, runner, rows = _run(tmp_path, True, {"llama-bench": 217, "served": 300})
    assert rc == 0
    assert rows[0] == ["build", "skipped", "0", f"dry run: the CPU build in {tmp_path}/llamacpp"]
    names = [r[0] for r in rows]
    assert "wheels" not in names and "copybw" not in names  # the venv has them; no GPU
    limits = {name: limit for name, limit, _ in runner.ran}
    assert (limits["llama-bench"], limits["served"]) == (300, 300)  # 5x on the CPU
    assert rows[-1][:2] == ["optimize", "skipped"]
    plan = next(argv for name, _, argv in runner.ran if name == "plan")
    assert plan[plan.index("--gpu") + 1] == "H200"
    assert "-ngl" not in next(argv for name, _, argv in runner.ran if name == "llama-bench")
    served = next(argv for name, _, argv in runner.ran if name == "served")
    assert served[:3] == [sys.executable, "-m", "bench.gpu_check"]


def test_a_step_is_time_boxed_with_everything_it_started(tmp_path):
    runner = stages.Runner(tmp_path, stages.Budget(60, False), dict(os.environ))
    marker = tmp_path / "left-behind"
    script = f"(sleep 1; touch {marker}) & sleep 30"
    assert runner.execute(["bash", "-c", script], limit_s=0.3) == 124
    assert runner.stage("slow", 1, ["sleep", "30"]) == 124
    assert runner.stage("none", 0, ["true"]) == 1
    assert runner.execute(["/no/such/program"]) == 127
    assert runner.execute(["bash", "-c", "kill -SEGV $$"]) == 139
    rows = (tmp_path / "stages.tsv").read_text().splitlines()
    assert rows == ["slow\t124\t1\tstopped at its 1 s limit",
                    "none\tskipped\t0\ttoo little time left"]
    time.sleep(0.5)
    assert not marker.exists()  # the child it had started died with it


# ---------------------------------------------------------------------------------------------
# prepare's size check, the work folder, the machine's description


def test_the_carry_check_refuses_an_oversized_pack(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("/.gpucheck/\n")
    pack = repo / ".gpucheck"
    pack.mkdir()
    with (pack / "wheels.bin").open("wb") as fh:  # sparse: 60 MiB without writing them
        fh.truncate(60 * 1048576)
    files, size, shared = prepare.travel_bytes(repo, pack)
    assert files == len("x = 1\n") + len("/.gpucheck/\n") and shared == 0
    assert size >= 60 * 1048576
    prepare.check_carry(files, size, shared)  # 60 MiB: fits
    assert "what travels: 60.00 MiB of the 64 MiB" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        prepare.check_carry(files, size + 5 * 1048576, shared)
    assert exc.value.code == 1
    assert capsys.readouterr().err == "gpu_check: over the device machine's 64 MiB: not ready.\n"


def test_a_run_clears_the_last_runs_files_but_keeps_the_build(tmp_path):
    for d in ("src", "build", "bench", "runs", "site"):
        (tmp_path / d).mkdir()
    for f in ("build.log", "stages.tsv", "plan.json", "bench.err", "standin.gguf"):
        (tmp_path / f).write_text("x")
    run.clean_work(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "build.log", "src"]


def test_env_report_keeps_going_past_missing_tools(tmp_path):
    cfg = _cfg(tmp_path)

    class Missing(stages.Runner):
        def capture(self, argv, env=None, timeout_s=120, merge=True):
            if argv[0] == "uname":
                return 0, "Linux box\n"
            return 127, f"{argv[0]}: command not found\n"

    text = run.env_report(cfg, Missing(tmp_path, stages.Budget(1, False), {}))
    lines = text.splitlines()
    assert lines[0].startswith("date: ") and lines[1] == "Linux box"
    assert "nvml_total_mib: nvidia-smi: command not found" in lines
    assert any(ln.startswith("cores: ") for ln in lines)
    assert lines[-1].endswith("MANIFEST.txt: no such file")


def test_build_progress_is_ninjas_last_step(tmp_path):
    assert build_progress(tmp_path) == ""
    (tmp_path / "build.log").write_text("[1/359] a\nerror x\n[17/359] b\n")
    assert build_progress(tmp_path) == "[17/359]"


# ---------------------------------------------------------------------------------------------
# fixture and bad input


def test_fixture_names_its_folder_by_date_and_gpu(tmp_path):
    s = {"date": "2026-12-07T10:11:12Z", "gpu": "NVIDIA H100 80GB HBM3", "dry_run": False}
    assert prepare.fixture_name(s) == "2026-12-07-NVIDIA-H100-80GB-HBM3"
    assert prepare.fixture_name({**s, "gpu": None, "dry_run": True}) == "2026-12-07-no-gpu-dry-run"
    assert prepare.fixture_name({}) == "undated-no-gpu"
    src = tmp_path / "files_at"
    src.mkdir()
    (src / "summary.json").write_text(json.dumps(s))
    (src / "plan.json").write_text("{}")
    assert prepare.cmd_fixture(tmp_path, str(src)) == 0
    dest = tmp_path / "tests/fixtures/gpu_check/2026-12-07-NVIDIA-H100-80GB-HBM3"
    assert sorted(p.name for p in dest.iterdir()) == ["plan.json", "summary.json"]


@pytest.mark.parametrize("argv, says", [
    ([], "no command"),
    (["bogus"], "unknown command 'bogus'"),
    (["run", "--gpu"], "unrecognized arguments: --gpu"),
    (["fixture"], "fixture DIR: DIR must hold the files a run returned"),
    (["fixture", "/no/such/dir"], "fixture DIR: DIR must hold the files a run returned"),
])
def test_bad_input_exits_2_with_one_paragraph(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpu_check: ") and says in err and err.count("\n") == 1


def test_a_summary_that_is_not_json_is_refused(tmp_path, capsys):
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(SystemExit) as exc:
        main(["fixture", str(tmp_path)])
    assert exc.value.code == 2 and "is not a run's summary" in capsys.readouterr().err


def test_run_refuses_without_the_pack_or_a_gpu(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = _cfg(tmp_path, GPU_CHECK_PYTHON=sys.executable)
    cfg.repo.mkdir()
    with pytest.raises(SystemExit) as exc:
        run.cmd_run(cfg)
    assert exc.value.code == 2 and "no .gpucheck/ in" in capsys.readouterr().err
    (cfg.pack / "model").mkdir(parents=True)
    (cfg.pack / "llama.cpp.tar.xz").write_bytes(b"")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi, no nvcc
    with pytest.raises(SystemExit) as exc:
        run.cmd_run(cfg)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("gpu_check: no NVIDIA GPU here")
    assert err.count("\n") == 1
    assert not cfg.outdir.exists()  # refused before anything was written


def test_the_shell_entry_finds_its_python_or_says_which_to_set(tmp_path):
    script = str(REPO / "bench/gpu_check.sh")
    env = {**os.environ, "GPU_CHECK_PYTHON": sys.executable}
    p = subprocess.run(["bash", script, "bogus"], env=env, capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("gpu_check: unknown command 'bogus'")
    env["GPU_CHECK_PYTHON"] = str(tmp_path / "python3.12")
    p = subprocess.run(["bash", script, "run"], env=env, capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr == f"gpu_check: no {tmp_path}/python3.12 on PATH (set GPU_CHECK_PYTHON).\n"
