"""The download gate against the real huggingface_hub client and the fake hub over real HTTP
(tests/hubserver.py), in a real Prefect flow: pre-authorized, the pinned files are fetched and
their sizes checked; unanswered, the run stops with the answer and not one weight byte is
requested. The gate's description names the repository, the revision, each file and its size,
the total, the license and the gating."""

from __future__ import annotations

from pathlib import Path

import pytest

from infopt.specs.request import ModelTarget, OptimizeRequest
from tests.hubserver import FakeHub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

REPO = "community-quants/SmolLM2-135M-Instruct-GGUF"


@pytest.fixture(scope="module")
def hub():
    with FakeHub(allow_downloads=True) as h:
        yield h


def _request(hub, **kw) -> OptimizeRequest:
    return OptimizeRequest(model=ModelTarget(hub_id=REPO, hub_endpoint=hub.endpoint,
                                             download=["*Q8_0.gguf"]), **kw)


def _run(request):
    from prefect import flow

    from flows.weights import download_model
    from infopt.specs.base import InfoptError

    @flow(name="download-only")
    def only_download():
        try:
            return download_model(request)
        except InfoptError as exc:
            return str(exc)

    return only_download()


def test_pre_authorized_the_pinned_files_are_fetched(prefect_api, hub, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # 0.14 GB of weights: not ~/.cache
    path, [answer] = _run(_request(hub, authorize=["download"]))
    assert path.endswith("SmolLM2-135M-Instruct.Q8_0.gguf") and path.startswith(str(tmp_path))
    assert Path(path).stat().st_size == 144811840
    assert answer.approved and answer.source.value == "pre-authorized"
    assert answer.title == f"download 1 file(s), 0.14 GB, of {REPO}"


def test_unanswered_nothing_is_fetched_and_the_run_says_so(prefect_api, hub):
    since = len(hub.requests)
    message = _run(_request(hub, approval_timeout_s=1))
    assert isinstance(message, str) and "was not approved (timeout: no answer within 1 s)" \
        in message and "--authorize download" in message
    assert not hub.requests_to(r"Q8_0\.gguf$", since)  # no weight byte asked for


def test_the_gate_describes_exactly_what_would_be_fetched(hub, tmp_path):
    from infopt.model.download import download_gate, select_files
    from infopt.model.hub import fetch_model_facts
    from infopt.specs.base import InputError

    facts = fetch_model_facts(REPO, cache_dir=tmp_path, endpoint=hub.endpoint,
                              read_weight_headers=False)
    gate = download_gate(facts, select_files(facts, ["*.gguf"]), tmp_path)
    d = gate.description
    assert facts.commit_sha in d and "apache-2.0" in d and "**gating:** none" in d
    assert "`SmolLM2-135M-Instruct.Q4_1.gguf` | 0.098 GB" in d and "0.24 GB" in d
    with pytest.raises(InputError, match=r"\['\*Q3_K\.gguf'\] match no file"):
        select_files(facts, ["*Q3_K.gguf"])


def test_a_4_bit_checkpoint_asks_the_download_gate_for_its_unquantized_base(
        prefect_api, tmp_path):
    """Without pre-authorization, only the base is asked for (as the quality reference: the
    served AWQ is 4-bit); unanswered, nothing is fetched and the notes say so."""
    from prefect import flow

    from flows.weights import ReferenceAsk, asker, hub_variants
    from infopt.engines.routing import engine_order_for
    from infopt.model.shortlist import build_shortlist
    from infopt.specs.checkpoint import DeviceKind, DeviceTarget
    from infopt.tuning.hub_weights import reference_checkpoint

    h200 = DeviceTarget(kind=DeviceKind.CUDA, compute_capability="9.0", name="NVIDIA H200")
    with FakeHub() as qwen_hub:
        shortlist = build_shortlist("Qwen/Qwen3-8B", device=h200, cache_dir=tmp_path,
                                    endpoint=qwen_hub.endpoint,
                                    engine_order=engine_order_for(h200, 8))
        base, why = reference_checkpoint(shortlist, "vllm", 4.0, 141 * 10**9)
        assert base is not None and why is None
        request = OptimizeRequest(model=ModelTarget(hub_id="Qwen/Qwen3-8B-AWQ"),
                                  approval_timeout_s=1)

        @flow(name="reference-ask")
        def ask_reference():
            return hub_variants(request, shortlist, "vllm", "sha256:" + "0" * 64,
                                asker(request), ReferenceAsk(base, "awq"))

        since = len(qwen_hub.requests)
        variants, answers, notes = ask_reference()
    assert variants == []
    assert list(answers) == ["Qwen/Qwen3-8B"] and answers["Qwen/Qwen3-8B"].source.value == \
        "timeout"
    assert "Qwen/Qwen3-8B: not downloaded (the download gate was not approved: timeout)" in \
        " ".join(notes)
    assert not qwen_hub.requests_to(r"\.safetensors$", since)
