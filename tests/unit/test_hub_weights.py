"""Which shortlisted hub checkpoints an engine tries as weights, which files each needs, and
when a hub file is the served checkpoint itself (pure functions; the shortlist comes from the
fake hub over real HTTP, as tests/unit/test_shortlist.py builds it)."""

from __future__ import annotations

import pytest

from infopt.engines.routing import engine_order_for
from infopt.model.shortlist import build_shortlist
from infopt.specs.base import InputError
from infopt.specs.checkpoint import DeviceKind, DeviceTarget, HubFile
from infopt.specs.request import ModelTarget, OptimizeRequest
from infopt.tuning.hub_weights import (
    check_checkpoints,
    checkpoint_files,
    identical_to,
    pick_checkpoints,
    spec_of,
    variant_format,
    why_tried,
)
from tests.hubserver import FakeHub

QWEN = "Qwen/Qwen3-8B"
H200 = DeviceTarget(kind=DeviceKind.CUDA, compute_capability="9.0", name="NVIDIA H200")


@pytest.fixture(scope="module")
def shortlist(tmp_path_factory):
    with FakeHub() as hub:
        return build_shortlist(QWEN, device=H200, cache_dir=tmp_path_factory.mktemp("c"),
                               endpoint=hub.endpoint, engine_order=engine_order_for(H200, 8))


def _request(**model) -> OptimizeRequest:
    authorize = model.pop("authorize", [])
    return OptimizeRequest(model=ModelTarget(hub_id=QWEN, **model), authorize=authorize)


def test_without_authorization_nothing_is_picked_and_the_note_says_how(shortlist):
    picked, why = pick_checkpoints(_request(), shortlist, "vllm")
    assert picked == []
    assert "Qwen/Qwen3-8B-AWQ" in why and "model.try_checkpoints" in why
    assert "authorize: [download]" in why


def test_pre_authorized_the_best_ones_the_engine_serves(shortlist):
    picked, why = pick_checkpoints(_request(authorize=["download"]), shortlist, "vllm")
    assert why is None
    # The shortlist's order, less what vLLM does not load (the GGUF: its adapter loads HF
    # directories), cut at max_checkpoints.
    assert [c.repo_id for c in picked] == ["Qwen/Qwen3-8B-AWQ",
                                           "RedHatAI/Qwen3-8B-quantized.w4a16"]
    three, _ = pick_checkpoints(_request(authorize=["download"], max_checkpoints=3),
                                shortlist, "vllm")
    assert len(three) == 3
    gguf, _ = pick_checkpoints(_request(authorize=["download"]), shortlist, "llamacpp")
    assert [spec_of(c) for c in gguf] == ["Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q4_K_M.gguf"]


def test_listed_ones_are_tried_without_pre_authorization_each_engine_its_own(shortlist):
    req = _request(try_checkpoints=["quantfan/Qwen3-8B-GPTQ-Int4",
                                    "Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q4_K_M.gguf"])
    vllm, _ = pick_checkpoints(req, shortlist, "vllm")
    assert [c.repo_id for c in vllm] == ["quantfan/Qwen3-8B-GPTQ-Int4"]
    llama, _ = pick_checkpoints(req, shortlist, "llamacpp")
    assert [c.gguf_file for c in llama] == ["Qwen3-8B-Q4_K_M.gguf"]
    # They still ask the download gate: the request says the gate will be met.
    assert req.unauthorized_gates() == ["download"]


def test_a_checkpoint_not_verified_by_the_shortlist_is_refused_by_name(shortlist):
    for bad in ("lazyuploader/Qwen3-8B-AWQ",  # rejected by the shortlist (its reason listed)
                "Qwen/Qwen3-8B-GGUF:Qwen3-8B-Q8_0.gguf", "nobody/else"):
        with pytest.raises(InputError, match=r"not a verified candidate of the shortlist"
                                             r".*its candidates: Qwen/Qwen3-8B-AWQ"):
            check_checkpoints(_request(try_checkpoints=[bad]), shortlist)


def test_files_a_checkpoint_needs():
    files = [HubFile(path=p, size_bytes=1, blob_id="x") for p in (
        "config.json", "model.safetensors", "tokenizer.json", "original/consolidated.pth",
        "m-Q4_0.gguf", "big-Q4_K_M-00001-of-00002.gguf", "big-Q4_K_M-00002-of-00002.gguf",
        "big-Q8_0-00001-of-00002.gguf")]

    class C:  # the two fields checkpoint_files reads
        def __init__(self, gguf_file):
            self.gguf_file = gguf_file

    assert [f.path for f in checkpoint_files(C("m-Q4_0.gguf"), files)] == ["m-Q4_0.gguf"]
    assert [f.path for f in checkpoint_files(C("big-Q4_K_M-00001-of-00002.gguf"), files)] == [
        "big-Q4_K_M-00001-of-00002.gguf", "big-Q4_K_M-00002-of-00002.gguf"]
    assert [f.path for f in checkpoint_files(C(None), files)] == [
        "config.json", "model.safetensors", "tokenizer.json"]


def test_identity_by_the_hubs_lfs_hash():
    f = HubFile(path="a.gguf", size_bytes=1, blob_id="x", lfs_sha256="ab" * 32)
    assert identical_to([f], "sha256:" + "ab" * 32)
    assert not identical_to([f], "sha256:" + "cd" * 32)
    assert not identical_to([f.model_copy(update={"lfs_sha256": None})], "sha256:" + "ab" * 32)
    assert not identical_to([f, f], "sha256:" + "ab" * 32)  # a directory's digest is a tree's


def test_format_and_reason(shortlist):
    awq = next(c for c in shortlist.candidates if c.repo_id == "Qwen/Qwen3-8B-AWQ")
    gguf = next(c for c in shortlist.candidates if c.gguf_file)
    assert variant_format(awq) == ("awq", 4)
    assert variant_format(gguf) == ("Q4_K_M", 4.89)  # llama.cpp's bits per weight
    why = why_tried(awq)
    assert "Qwen/Qwen3-8B-AWQ at " + awq.commit_sha[:12] in why and "official" in why


def test_the_reference_is_the_highest_precision_downloaded_checkpoint_that_fits():
    from infopt.engines.rules import WeightVariant
    from infopt.tuning.hub_weights import reference_weights

    q8 = WeightVariant("Q8_0", "/hub/q8.gguf", 8.5, source="org/m-GGUF")
    q6 = WeightVariant("Q6_K", "/hub/q6.gguf", 6.56, source="org/m-GGUF")
    made = WeightVariant("Q8_0", "/cache/q8-made-here.gguf", 8.5)  # from the served file
    q4 = WeightVariant("Q4_0", "/hub/q4.gguf", 4.34, source="org/m-GGUF")
    every = (q4, made, q6, q8)
    assert reference_weights(4.78, every, lambda p: True) is q8
    assert reference_weights(4.78, every, lambda p: p != q8.path) is q6  # Q8_0 does not fit
    assert reference_weights(4.78, (q4, made), lambda p: True) is None  # nothing better
    assert reference_weights(None, every, lambda p: True) is None  # served bits unknown


def test_an_hf_checkpoints_reference_is_raised_to_a_higher_precision_hf_download():
    """Issue 32, item 8: an FP8 or 4-bit HF folder has bits to exceed too (it had none, so its
    reference was never raised): a downloaded 16-bit or FP8 HF checkpoint of the same model
    that fits becomes the reference."""
    import json

    from infopt.engines.rules import WeightVariant
    from infopt.model.classify import classify_config
    from infopt.specs.model import ModelFormat, ModelProfile
    from infopt.tuning.hub_weights import reference_weights, served_precision
    from tests.fixture_data import MODEL_CONFIGS

    def profile(name: str) -> ModelProfile:
        cfg = json.loads((MODEL_CONFIGS / f"{name}.json").read_text())
        return ModelProfile(path=f"/m/{name}", format=ModelFormat.HF, file_bytes=1,
                            inspection=classify_config(cfg, model=name), source="test")

    fp8 = profile("Qwen__Qwen3-30B-A3B-FP8")
    fmt, bits = served_precision(fp8)
    assert bits == 8.0 and "8" in fmt
    assert served_precision(profile("Qwen__Qwen3-30B-A3B")) == ("bfloat16", 16.0)
    bf16 = WeightVariant("bf16", "/hub/Qwen3-30B-A3B", 16.0, source="Qwen/Qwen3-30B-A3B")
    awq = WeightVariant("awq", "/hub/Qwen3-30B-A3B-AWQ", 4.0, source="org/Qwen3-30B-A3B-AWQ")
    assert reference_weights(bits, (awq, bf16), lambda p: True) is bf16
    assert reference_weights(bits, (awq, bf16), lambda p: p != bf16.path) is None  # no fit
    assert reference_weights(4.0, (awq,), lambda p: True) is None  # not more bits


def test_only_a_higher_precision_shortlisted_checkpoint_may_change_the_reference(shortlist):
    """Issue 49: the weights gates wait beside the control and the baseline unless an answer
    could change their quality reference (a download of more bits per weight)."""
    from infopt.tuning.hub_weights import may_raise_reference

    awq = next(c for c in shortlist.candidates if c.repo_id == "Qwen/Qwen3-8B-AWQ")
    gguf = next(c for c in shortlist.candidates if c.gguf_file)  # Q4_K_M, 4.89 bits
    assert may_raise_reference(4.5, [awq, gguf])  # the Q4_K_M has more bits than 4.5
    assert not may_raise_reference(4.89, [awq, gguf])  # equal is not more
    assert not may_raise_reference(16.0, [awq, gguf])  # a bf16 served: nothing exceeds it
    assert not may_raise_reference(None, [awq, gguf])  # served bits unknown: never raised
    assert not may_raise_reference(4.5, [])  # nothing shortlisted


def test_the_unquantized_base_is_asked_for_as_the_reference_when_served_at_8_bits_or_less(
        shortlist):
    from infopt.tuning.hub_weights import reference_checkpoint, why_reference

    h200 = 141 * 10**9
    base, why = reference_checkpoint(shortlist, "vllm", 4.0, h200)
    assert why is None and base is not None
    assert base.repo_id == QWEN and base.commit_sha == shortlist.base_commit_sha
    assert base.weight_bits == 16  # more than any served checkpoint it is asked for
    assert "asked for as the quality reference" in why_reference(base, "awq")
    assert reference_checkpoint(shortlist, "vllm", 8.0, h200)[0] is not None  # FP8, INT8
    # A 16-bit served checkpoint is its own reference; nothing to ask.
    assert reference_checkpoint(shortlist, "vllm", 16.0, h200) == (None, None)
    assert reference_checkpoint(shortlist, "vllm", None, h200) == (None, None)
    assert reference_checkpoint(None, "vllm", 4.0, h200) == (None, None)


def test_a_base_that_fits_no_layout_or_the_engine_cannot_load_is_not_asked_and_says_why(
        shortlist):
    from infopt.tuning.hub_weights import reference_checkpoint

    small, why = reference_checkpoint(shortlist, "vllm", 4.0, 8 * 2**30)
    assert small is None and "GiB of weights" in why and "8.0 GiB on any layout" in why
    gguf, why = reference_checkpoint(shortlist, "llamacpp", 4.0, 141 * 10**9)
    assert gguf is None and "llamacpp serves GGUF checkpoints, not HF" in why
