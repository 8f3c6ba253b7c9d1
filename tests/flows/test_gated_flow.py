"""The gates inside a real optimize run (real llama-server, real Prefect test server): two local
weight variants made with the real llama-quantize behind the quantize gate, each with an
importance matrix the real llama-imatrix computed over infopt's default calibration sample
(the request's `quantize.imatrix`; tests/integration/test_imatrix_llamacpp.py measures what it
changes), answered by a
person (another thread, through the API `infopt approve` uses) only once the control and the
baseline have run beside them (issue 49: no answer changes them), so the ladder waits and the
report says what ran meanwhile (Q8_0 passes the quality gate and is measured; Q2_K fails it and
is rejected unmeasured); pre-authorized by the request: a shortlisted hub checkpoint (a real Q4_0 GGUF on the fake
hub, over real HTTP) downloaded behind the download gate and tried as weights, while the hub's
byte-identical copy of the served file is not downloaded; and the winner exposed on 0.0.0.0
behind the expose gate with a generated API key (kept in a Prefect Secret block, never in the
run's files)."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from infopt.bootstrap import default_paths
from infopt.engines.quantize import requantize
from infopt.specs.request import Budgets, ModelTarget, OptimizeRequest
from infopt.specs.workload import fixed_levels
from tests.hubserver import FakeHub

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]


HUB_REPO = "community-quants/SmolLM2-135M-Instruct-GGUF"
HUB_Q4_0 = "SmolLM2-135M-Instruct.Q4_0.gguf"
HUB_LABEL = "weights=Q4_0-hub-community-quants.SmolLM2-135M-Instruct-GGUF"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The fake hub with real weights: a Q4_0 a community quantizer uploaded (made here with
    the real llama-quantize) and, as its Q4_1, the very file this run serves."""
    gguf = default_paths().gguf
    q4_0 = requantize(default_paths().llama_quantize, gguf,
                      tmp_path_factory.mktemp("upload") / HUB_Q4_0, "Q4_0")
    with FakeHub(allow_downloads=True, real_files={HUB_REPO: {
            HUB_Q4_0: q4_0, "SmolLM2-135M-Instruct.Q4_1.gguf": gguf}}) as h:
        yield h


def _approve_after_the_baseline(runs, keys: list[str]) -> threading.Thread:
    """Approve each gate once it waits and the control's and the baseline's trials are
    complete (their trial.json written)."""
    from flows.gate import approve, pending

    def answer():
        for key in keys:
            while not (found := [p for p in pending() if p.key == key]) or len(
                    list(runs.glob("*/trials/*/trial.json"))) < 2:
                time.sleep(0.5)
            approve(found[0].gate_run_id, key, True, "go ahead")

    t = threading.Thread(target=contextvars.copy_context().run, args=(answer,), daemon=True)
    t.start()
    return t


@pytest.fixture(scope="module")
def run(prefect_api, hub, tmp_path_factory):
    from flows.optimize import optimize

    runs = tmp_path_factory.mktemp("runs")
    wl = fixed_levels(input_tokens=32, output_tokens=8, levels=[1], target=1, requests=2,
                      cooldown_s=0.5)
    request = OptimizeRequest(
        model=ModelTarget(path=str(default_paths().gguf),
                          hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                          hub_endpoint=hub.endpoint),
        workload=wl.traffic, objective=wl.objective, budgets=Budgets(repeats=1), scenarios=[],
        quality_task_items=0, quality_tolerance=0.05, requantize=["Q8_0", "Q2_K"],
        quantize={"imatrix": True},
        authorize=["expose", "download"], expose={"address": "0.0.0.0"},
        dimensions=["weights"], approval_timeout_s=600)
    _approve_after_the_baseline(runs, ["quantize-q8-0-imatrix", "quantize-q2-k-imatrix"])
    with pytest.MonkeyPatch.context() as mp:  # downloads into this test's own hub cache
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))
        report = optimize(request=request, runs_dir=str(runs))
    return report, runs / report.run_id


def test_each_variant_passed_its_gate_and_the_quality_gate_decided(run):
    report, _ = run
    gates = {a.key: a for a in report.approvals}
    hub_gate = "download-community-quants-smollm2-135m-instruct-gguf-smollm2-135m-instruct-q4-0"
    assert set(gates) == {"quantize-q8-0-imatrix", "quantize-q2-k-imatrix", hub_gate,
                          "expose-winner"}
    assert all(a.approved for a in gates.values())
    assert {k for k, a in gates.items() if a.source.value == "person"} == {
        "quantize-q8-0-imatrix", "quantize-q2-k-imatrix"}
    assert {k for k, a in gates.items() if a.source.value == "pre-authorized"} == {
        hub_gate, "expose-winner"}
    weights = {t.value: t for t in report.trials if t.dimension == "weights"}
    assert set(weights) == {"weights=Q8_0", "weights=Q2_K", HUB_LABEL}
    q8, q2 = weights["weights=Q8_0"], weights["weights=Q2_K"]
    # Q8_0 (requantized from the shipped Q4_1) sits a few points under the reference: the gate
    # passes it or, where this CPU's kernels flip more near-ties (96.5% on an AVX-512 EPYC
    # against a 95% threshold), leaves it undecided after its prompt budget: never measured
    # then, and never called a pass.
    assert q8.quality.decision in ("pass", "undecided"), q8.quality.summary
    assert (q8.benchmark is not None) == q8.quality.passed
    if not q8.quality.passed:
        assert q8.failed.startswith("undecided by the quality gate")
    assert q2.quality.decision == "fail" and q2.benchmark is None
    assert q2.failed.startswith("rejected by the quality gate")
    assert [a.key for a in q8.approvals] == ["quantize-q8-0-imatrix"]
    assert "importance matrix" in q8.approvals[0].title
    assert "-Q8_0-imatrix" in q8.config.model_path and "-Q2_K-imatrix" in q2.config.model_path
    # The weights step of the ladder: Q2_K stopped by the gate; one repeat cannot tell a
    # gain from noise, so Q8_0 is not accepted.
    step = report.ladder.steps[0]
    status = {c.candidate.label: c.status for c in step.candidates}
    assert status["weights=Q2_K"] == "gate" and status["weights=Q8_0"] in (
        ("not run", "worse") if q8.quality.passed else ("undecided",))
    assert report.winner_label == "baseline"


def test_a_shortlisted_checkpoint_was_downloaded_behind_its_gate_and_tried(run, hub):
    report, _ = run
    t = next(t for t in report.trials if t.value == HUB_LABEL)
    # Served from the hub cache, the downloaded bytes being the uploaded file's.
    assert t.config.model_path.endswith(HUB_Q4_0) and "/xdg" in t.config.model_path
    assert [a.title for a in t.approvals] == [f"download 1 file(s), 0.09 GB, of {HUB_REPO}"]
    # The quality gate judged it against the reference like every other candidate.
    assert t.quality is not None
    assert (t.benchmark is not None) == t.quality.passed
    step = report.ladder.steps[0]
    c = next(c for c in step.candidates if c.candidate.label == t.value)
    assert "shortlisted from the hub" in c.candidate.why and "Q4_0" in c.candidate.why
    # The hub's Q4_1 is the served file byte for byte: its LFS hash said so, and only the
    # shortlist's header reads (byte ranges) touched it; the Q4_0 was fetched whole.
    assert any("byte-identical to the served checkpoint" in n for n in report.notes)
    files = hub.repos[HUB_REPO].files
    q4_1 = hub.requests_to("/lfs-cdn/" + files["SmolLM2-135M-Instruct.Q4_1.gguf"].lfs_sha256)
    assert q4_1 and all(r["range"] for r in q4_1)
    assert any(not r["range"] for r in hub.requests_to("/lfs-cdn/" + files[HUB_Q4_0].lfs_sha256))


def test_the_winner_was_exposed_with_a_key_that_appears_nowhere(run):
    from prefect.blocks.system import Secret

    report, run_dir = run
    e = report.exposure
    assert e.approved and e.bind_addresses == [f"0.0.0.0:{e.port}"]
    assert e.auth_passed and e.api_key_env == "LLAMA_API_KEY"
    assert e.api_key_source.startswith("Prefect Secret block infopt-engine-api-key")
    key = Secret.load("infopt-engine-api-key").get()
    assert len(key) >= 32
    for f in run_dir.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".md", ".log", ".jsonl", ".txt"):
            assert key not in f.read_text(errors="replace"), f
    md = (run_dir / "report.md").read_text()
    assert "## Approvals" in md and "pre-authorized" in md
    assert f"listening on 0.0.0.0:{e.port}" in md
    assert "all on loopback" in md  # the trials themselves


def test_the_control_and_baseline_ran_while_the_quantize_gates_waited(run):
    report, run_dir = run
    waits = {w.gate_key: w for w in report.gate_waits}
    assert set(waits) == {"quantize-q8-0-imatrix", "quantize-q2-k-imatrix"}
    for w in waits.values():
        [said] = w.ran_meanwhile
        assert said.startswith("the quality reference, the control and the baseline "
                               "(finished while waiting; the ladder then waited ")
    md = (run_dir / "report.md").read_text()
    assert "- Gate `quantize-q8-0-imatrix` waited " in md
    assert "Ran meanwhile: the quality reference, the control and the baseline" in md
