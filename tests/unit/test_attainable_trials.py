"""The project's own GPU trials as cases of the attainable fit, and the estimate in a GPU run's
ceiling ratios.

No GPU run exists on this machine, so the GPU report here is the real llama.cpp fixture report
(measured on a CPU) with its hardware swapped for a recorded 8x H100 inventory: its step times
are CPU numbers standing in for a GPU run. It tests the plumbing (which levels become cases, at
what batch and step time, how they join the fit and are named), never the fitted values."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infopt.costmodel.attainable_fit import build
from infopt.runs.attainable_trials import own_trials, trial_cases
from infopt.specs.fit import Envelope
from infopt.specs.results import OptimizationReport
from infopt.tuning.candidates import level_ceilings
from tests.fake_nvml import recorded_inventory
from tests.fixture_data import FIXTURES, MODEL_CONFIGS, require

CPU_REPORT = FIXTURES / "reports" / "llamacpp-optimize-report.json"


@pytest.fixture(scope="module")
def cpu_report() -> OptimizationReport:
    return OptimizationReport.model_validate_json(require(CPU_REPORT).read_text())


@pytest.fixture(scope="module")
def gpu_run(cpu_report, tmp_path_factory):
    """A run folder whose report.json claims an 8x H100 host (CPU numbers: plumbing only)."""
    run = tmp_path_factory.mktemp("runs") / cpu_report.run_id
    run.mkdir()
    swapped = cpu_report.model_copy(update={"hardware": recorded_inventory("h100_sxm_8x")})
    (run / "report.json").write_text(swapped.model_dump_json(), encoding="utf-8")
    return run, swapped


def test_a_cpu_run_is_left_out_with_its_reason():
    cases, left = trial_cases(CPU_REPORT)
    assert cases == []
    assert len(left) == 1 and "not a GPU run" in left[0]


def test_each_measured_level_of_a_gpu_run_is_a_case_at_the_batch_it_ran(gpu_run):
    run, report = gpu_run
    cases, left = trial_cases(run)
    assert left == []
    expected = [(t.trial_id, lvl.concurrency, lvl.itl_s.p50) for t in report.trials
                if t.benchmark is not None and not t.failed
                for lvl in t.benchmark.levels if lvl.itl_s.p50]
    assert [(c.id.split()[3], int(c.id.split()[4][1:]), c.measured_step_s)
            for c in cases] == expected
    assert all(c.group == ("llamacpp", "Hopper") for c in cases)
    assert all(1 <= c.batch <= int(c.id.split()[4][1:]) for c in cases)
    # The control's default single slot runs concurrency 2 as batch 1; two slots run batch 2.
    slots = {c.id.split()[3]: c.batch for c in cases if c.id.endswith("c2")}
    assert slots["t01-baseline-r1"] == 1 and slots["t06-parallel_slots=2-r1"] == 2
    # Repeats of a configuration are held out together; other knobs are other configurations.
    config = {c.id.split()[3]: c.config for c in cases}
    assert config["t00-control-r1"] == config["t02-control-r2"]
    assert config["t04-kv=q8_0-r1"] == config["t05-kv=q8_0-r2"]
    assert config["t00-control-r1"] != config["t04-kv=q8_0-r1"]


def _simulate(report: OptimizationReport, version: str = "0.32.0+simulated",
              trial_ids: set[str] | None = None) -> OptimizationReport:
    """The report as a simulated engine (tests/sim) would leave it: its version says so, for
    every trial or only those named."""
    trials = [t.model_copy(update={"engine": t.engine.model_copy(update={"version": version})})
              if t.engine and (trial_ids is None or t.trial_id in trial_ids) else t
              for t in report.trials]
    if trial_ids is not None:
        return report.model_copy(update={"trials": trials})
    engines = report.engines.model_copy(update={"results": [
        e.model_copy(update={"engine_version": version}) for e in report.engines.results]})
    return report.model_copy(update={"engine_version": version, "trials": trials,
                                     "engines": engines})


def test_a_simulated_run_is_left_out_with_its_reason(gpu_run, tmp_path):
    _, report = gpu_run
    (tmp_path / "report.json").write_text(_simulate(report).model_dump_json())
    cases, left = trial_cases(tmp_path)
    assert cases == []
    assert left == [f"run {report.run_id}: simulated engines (0.32.0+simulated), not measured "
                    "on a GPU"]


def test_a_simulated_trial_of_a_real_run_is_left_out_and_the_rest_kept(gpu_run, tmp_path):
    run, report = gpu_run
    sim = "t06-parallel_slots=2-r1"
    (tmp_path / "report.json").write_text(
        _simulate(report, "0.5.23+simulated", {sim}).model_dump_json())
    cases, left = trial_cases(tmp_path)
    assert left == [f"run {report.run_id} trial {sim}: a simulated engine (0.5.23+simulated), "
                    "not measured on a GPU"]
    assert {c.id for c in cases} == {c.id for c in trial_cases(run)[0]
                                     if c.id.split()[3] != sim}


@pytest.fixture(scope="module")
def fit_with_own(gpu_run):
    return build(MODEL_CONFIGS, own_trials=own_trials([gpu_run[0], CPU_REPORT]))


def test_own_trials_join_the_fit_and_are_named_in_it(gpu_run, fit_with_own):
    run, _ = gpu_run
    fit = fit_with_own
    own = fit["data"]["own_trials"]
    assert own["rows_used"] == len(trial_cases(run)[0]) > 0
    assert own["runs"][0]["report"] == str(run) and len(own["runs"][0]["sha256"]) == 64
    assert any("not a GPU run" in why for why in own["rows_left_out"])
    # 16 levels: enough for a llamacpp/Hopper group, and they join the family's too.
    assert fit["groups"]["llamacpp/Hopper"]["own_trial_rows"] == own["rows_used"] == 16
    assert fit["groups"]["any/Hopper"]["own_trial_rows"] == own["rows_used"]
    assert fit["groups"]["vllm/Hopper"]["own_trial_rows"] == 0
    assert fit["data"]["rows_used"] >= 400  # the published rows, counted apart


def test_a_gpu_runs_ceiling_ratios_carry_the_labelled_estimate(gpu_run):
    _, report = gpu_run
    trial = next(t for t in report.trials if t.benchmark is not None)
    ratios = level_ceilings(report.model, report.hardware, trial.config, trial.benchmark,
                            600)
    theoretical = [r for r in ratios if r.envelope is Envelope.THEORETICAL]
    assert theoretical and all(r.attainable is not None for r in theoretical)
    for r in theoretical:
        assert 0 < r.attainable < r.ceiling
        assert r.attainable_note.startswith("estimate (any/Hopper fit on")
        assert "published results" in r.attainable_note


def test_an_estimate_from_a_fit_with_own_trials_says_so(gpu_run, fit_with_own, monkeypatch):
    from infopt.costmodel import attainable

    monkeypatch.setattr(attainable, "load_fit", lambda: fit_with_own)
    _, report = gpu_run
    trial = next(t for t in report.trials if t.benchmark is not None)
    r = next(r for r in level_ceilings(report.model, report.hardware, trial.config,
                                       trial.benchmark, 600) if r.attainable is not None)
    assert r.attainable_note.startswith("estimate (llamacpp/Hopper fit on 16 measured "
                                        "levels of infopt's own GPU trials;")


def test_a_cpu_runs_ceiling_ratios_have_no_estimate(cpu_report):
    trial = next(t for t in cpu_report.trials if t.benchmark is not None)
    ratios = level_ceilings(cpu_report.model, cpu_report.hardware, trial.config,
                            trial.benchmark, 600)
    assert ratios and all(r.attainable is None for r in ratios)


def test_a_runs_path_that_is_not_a_report_is_refused_in_one_paragraph(tmp_path):
    out = tmp_path / "fit.json"
    (tmp_path / "notareport.json").write_text(json.dumps({"run_id": 3}))
    for bad in (tmp_path / "missing", tmp_path / "notareport.json"):
        p = subprocess.run([sys.executable, "-m", "infopt.runs.attainable_trials", "--runs",
                            str(bad), "--out", str(out)], capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr and str(bad) in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
        assert not out.exists()


def _ceiling_section(md: str) -> list[str]:
    start = md.index("### Fraction of the ceiling")
    return md[start:md.index("\n### ", start + 1)].splitlines()


def test_the_markdown_report_shows_the_estimate_column_only_where_there_is_one(gpu_run,
                                                                               cpu_report):
    from infopt.report.markdown import render_markdown

    cpu = _ceiling_section(render_markdown(cpu_report))
    assert not any("attainable" in line.lower() for line in cpu)
    _, report = gpu_run  # the ceilings recomputed for the H100 the report now names
    trials = [t.model_copy(update={"ceilings": level_ceilings(
        report.model, report.hardware, t.config, t.benchmark, 600)}) if t.benchmark else t
        for t in report.trials]
    gpu = _ceiling_section(render_markdown(report.model_copy(update={"trials": trials})))
    head = next(line for line in gpu if line.startswith("| trial |"))
    assert "attainable tok/s (estimate)" in head
    rows = [line.split(" | ") for line in gpu if line.startswith("| t0")]
    col = head.split(" | ").index("attainable tok/s (estimate)")
    assert rows and all(float(r[col]) > 0 for r in rows if r[2] == "theoretical")
    assert any(line.startswith("Attainable: estimate (any/Hopper") for line in gpu)
