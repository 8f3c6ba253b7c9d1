"""Nothing fits: a 70B bf16 checkpoint (the real Llama-3.1-70B architecture; its 141 GB of
weights a sparse file, so the disk holds none of it) on this machine. The run starts no engine,
writes a report with the binding constraint and the smallest alternatives, and stops with one
paragraph saying what to change; `infopt report` re-renders it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infopt.specs.request import ModelTarget, OptimizeRequest
from tests.fixture_data import MODEL_CONFIGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

WEIGHTS_BYTES = 141_107_412_992  # 70.55B parameters x 2 bytes (bf16)


@pytest.fixture(scope="module")
def big_model(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("llama-70b-bf16")
    config = json.loads((MODEL_CONFIGS / "nvidia__Llama-3.1-70B-Instruct-FP8.json").read_text())
    config.pop("quantization_config", None)  # the same architecture, unquantized
    config["torch_dtype"] = "bfloat16"
    (d / "config.json").write_text(json.dumps(config))
    with (d / "model.safetensors").open("wb") as f:
        f.truncate(WEIGHTS_BYTES)  # sparse: no block of it is written
    return d


@pytest.fixture(scope="module")
def outcome(prefect_api, big_model, tmp_path_factory):
    from flows.optimize import optimize
    from infopt.engines import process
    from infopt.tuning.nofit import NothingFits

    runs = tmp_path_factory.mktemp("runs")
    starts = []
    request = OptimizeRequest(model=ModelTarget(path=str(big_model)), engines=["vllm"],
                              scenarios=[])
    with pytest.MonkeyPatch.context() as mp, pytest.raises(NothingFits) as err:
        mp.setattr(process, "start", lambda *a, **k: starts.append(a) or 1 / 0)
        optimize(request=request, runs_dir=str(runs))
    [run_dir] = list(runs.iterdir())
    return str(err.value), run_dir, starts


def test_nothing_is_started_and_the_message_names_the_constraint(outcome):
    message, run_dir, starts = outcome
    assert starts == []  # no engine was launched
    assert not (run_dir / "trials").exists()
    assert message.startswith("No allowed engine's configuration fits this machine.")
    assert "Binding constraint: memory: vllm's baseline" in message
    assert "GiB short" in message and "Smallest alternatives:" in message
    assert str(run_dir / "report.md") in message


def test_the_report_states_the_fit_in_numbers_with_alternatives(outcome):
    from infopt.report.provenance import unlabelled
    from infopt.specs.results import NoFitReport

    _, run_dir, _ = outcome
    data = json.loads((run_dir / "report.json").read_text())
    r = NoFitReport.model_validate(data)
    assert r.kind == "no-fit" and [e.engine for e in r.engines] == ["vllm"]
    fit = r.engines[0].fit
    assert not fit.fits and fit.weights_bytes_per_gpu == WEIGHTS_BYTES
    # Short by at least what the weights take beyond the device's memory, whatever this host
    # has (infopt's inventory: its RAM on the CPU route, a GPU's memory on a GPU host).
    assert fit.memory_per_gpu_bytes < WEIGHTS_BYTES
    assert fit.gap_bytes >= WEIGHTS_BYTES - fit.memory_per_gpu_bytes > 0, fit
    assert any("smaller weight format" in a for a in fit.alternatives)
    assert unlabelled(data) == []  # every number has its provenance
    md = (run_dir / "report.md").read_text()
    assert md.startswith("# No configuration fits:") and "**Binding constraint:** memory" in md
    assert "Smallest alternatives" in md and "## Where each number comes from" in md


def test_infopt_report_re_renders_a_no_fit_report(outcome):
    _, run_dir, _ = outcome
    original = (run_dir / "report.md").read_text()
    (run_dir / "report.md").unlink()
    infopt = str(Path(sys.executable).with_name("infopt"))
    out = subprocess.run([infopt, "report", run_dir.name, "--runs-dir", str(run_dir.parent)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (run_dir / "report.md").read_text() == original


def test_comparing_a_run_that_measured_nothing_is_one_paragraph(outcome):
    """`infopt compare` with a no-fit run: exit 2 and what to give, not an AttributeError."""
    _, run_dir, _ = outcome
    infopt = str(Path(sys.executable).with_name("infopt"))
    out = subprocess.run([infopt, "compare", str(run_dir), str(run_dir)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "measured nothing" in out.stderr and "Traceback" not in out.stderr


def test_the_cli_establishes_the_target_once(prefect_api, big_model, tmp_path, monkeypatch):
    """`infopt optimize`: the pre-flight measures this machine (bandwidth, GEMM rate) and the
    flow reuses that inventory: one measurement per run, not one per stage."""
    from typer.testing import CliRunner

    from infopt.cli import app
    from infopt.engines import process
    from infopt.hardware import host

    measured = []
    original = host.measure_host_bandwidth
    monkeypatch.setattr(host, "measure_host_bandwidth",
                        lambda *a, **k: measured.append(1) or original(*a, **k))
    monkeypatch.setattr(process, "start", lambda *a, **k: pytest.fail("an engine started"))
    out = CliRunner().invoke(app, ["optimize", "--model", str(big_model), "--engine", "vllm",
                                   "--scenarios", "none", "--runs-dir", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert "No allowed engine's configuration fits this machine." in out.output
    assert measured == [1]
