"""lm-evaluation-harness, the optional extra of `infopt quality --lm-eval`: the real lm-eval
(its own venv, `make lm-eval`) runs a local generative task through chat completions against
the real llama-server, on the reference and the candidate, and its metrics join the verdict;
a multiple-choice (loglikelihood) task is refused with the reason, not scored at chance."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.engines import endpoint_for, process
from infopt.engines.llamacpp import adapter as llamacpp
from infopt.quality.check import LmEvalRequest, check_quality
from infopt.specs.base import InputError
from infopt.specs.serving import LlamaCppConfig
from tests.fixture_data import FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(llama_server, gguf_model, tmp_path_factory):
    cfg = LlamaCppConfig(model_path=str(gguf_model), served_model_name="smollm2",
                         ctx_per_slot_tokens=2048, threads=2)
    running = process.start(llamacpp.ADAPTER, cfg, str(llama_server),
                            tmp_path_factory.mktemp("lm") / "engine.log", weights_bytes=10**8)
    yield running
    process.stop(running.pid)


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("lm_eval_tasks")
    src = FIXTURES / "lm_eval"
    data = src / "capitals.jsonl"
    for t in src.glob("*.yaml.in"):
        (d / t.name.removesuffix(".in")).write_text(
            t.read_text().replace("@DATA@", str(data.resolve())))
    return d


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No hub here: lm-eval must read the local dataset without asking for it."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_lm_eval_metrics_join_the_verdict(server, tasks_dir, tmp_path):
    """The same server as reference and candidate: lm-eval's metric is identical on both
    (greedy), so it passes; the verdict carries the task's metric and its results files."""
    ep = endpoint_for("llamacpp", server.base_url, "smollm2", server.pid)
    _, verdict = check_quality(ep, ep, tolerance=0.05, tokens=4, max_prompts=8,
                               lm_eval=LmEvalRequest(
        tasks=["infopt_capitals"], out_dir=tmp_path, include=tasks_dir))
    lm = [m for m in verdict.measures if m.measure.startswith("lm_eval:")]
    assert [m.measure for m in lm] == ["lm_eval:infopt_capitals/exact_match,last_word"]
    assert lm[0].passed and 0.0 <= lm[0].value <= 1.0
    assert list((tmp_path / "reference").rglob("results_*.json"))
    assert list((tmp_path / "candidate").rglob("results_*.json"))


def test_a_loglikelihood_task_is_refused_not_scored_at_chance(server, tasks_dir, tmp_path):
    ep = endpoint_for("llamacpp", server.base_url, "smollm2", server.pid)
    with pytest.raises(InputError, match="llama.cpp issue 27174"):
        check_quality(ep, ep, tokens=4, max_prompts=8, lm_eval=LmEvalRequest(
            tasks=["infopt_choice"], out_dir=tmp_path, include=tasks_dir))
