"""The hub client layer against a local fake hub, through the real huggingface_hub client.

Every request here crosses real HTTP to `tests/hubserver.py` on 127.0.0.1: the routes, headers
and error codes are the hub's, so the client's own error mapping and redirects are exercised.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from infopt.model.hub import (
    default_endpoint,
    fetch_model_facts,
    gguf_nominal_bits,
    gguf_type_from_name,
    list_files,
    parse_gguf_kv,
    resolve_token,
    search_models,
    to_inspection,
)
from infopt.specs.base import InputError
from infopt.specs.checkpoint import GatingMode

try:  # tests/ is a package (tests/__init__.py) or, without one, on sys.path itself
    from tests.hubserver import FakeHub
except ImportError:  # pragma: no cover
    from hubserver import FakeHub
from tests.fixture_data import MODEL_CONFIGS

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen3-8B"


@pytest.fixture(scope="module")
def hub():
    with FakeHub() as h:
        yield h


@pytest.fixture()
def cache(tmp_path) -> Path:
    return tmp_path / "hub-cache"


def test_revision_pinned_to_commit_sha(hub, cache):
    repo, start = hub.repos[QWEN], len(hub.requests)
    facts = fetch_model_facts(QWEN, cache_dir=cache, endpoint=hub.endpoint)
    assert facts.commit_sha == repo.info["sha"] and len(facts.commit_sha) == 40
    assert facts.requested_revision is None
    # Every file was read at the sha, never at the moving branch name.
    reads = hub.requests_to(rf"^/{QWEN}/resolve/", since=start)
    assert reads and all(f"/resolve/{facts.commit_sha}/" in r["path"] for r in reads)
    tree = hub.requests_to(rf"^/api/models/{QWEN}/tree/", since=start)
    assert tree and all(facts.commit_sha in r["path"] for r in tree)
    # A short sha of an older commit resolves to that commit.
    old = repo.info["older_commits"][0]
    pinned = fetch_model_facts(QWEN, cache_dir=cache, endpoint=hub.endpoint, revision=old[:10],
                               read_weight_headers=False)
    assert pinned.commit_sha == old and pinned.requested_revision == old[:10]


def test_tree_listing_is_recursive_with_sizes_and_lfs(hub):
    sha = hub.repos[LLAMA].info["sha"]
    files = {f.path: f for f in list_files(LLAMA, revision=sha, endpoint=hub.endpoint)}
    assert "original/params.json" in files and "original" not in files  # folders dropped
    shard = files["model-00001-of-00004.safetensors"]
    assert shard.size_bytes > 3_000_000_000 and len(shard.lfs_sha256 or "") == 64
    assert files["config.json"].lfs_sha256 is None and files["config.json"].size_bytes == 929


def test_small_files_downloaded_to_the_given_cache(hub, cache):
    facts = fetch_model_facts(LLAMA, cache_dir=cache, endpoint=hub.endpoint,
                              token="hf_fake_granted", read_weight_headers=False)
    shared = json.loads((MODEL_CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    assert facts.config == shared
    assert facts.generation_config["eos_token_id"] == [128001, 128008, 128009]
    assert facts.chat_template_present and facts.chat_template_source == "tokenizer_config.json"
    assert "chat_template" not in facts.tokenizer_config
    assert facts.tokenizer_config["eos_token"] == "<|eot_id|>"
    cached = list(cache.rglob("config.json"))
    assert cached and all(cache in p.parents for p in cached)
    assert facts.hf_quant_config is None  # not in the repo: not requested
    assert not hub.requests_to(rf"^/{LLAMA}/resolve/.*/hf_quant_config.json")


def test_license_gating_and_lineage(hub, cache):
    facts = fetch_model_facts(LLAMA, cache_dir=cache, endpoint=hub.endpoint,
                              token="hf_fake_granted", read_weight_headers=False)
    assert facts.license == "llama3.1" and facts.gated is GatingMode.MANUAL
    assert facts.base_models == ["meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B"]
    awq = fetch_model_facts("Qwen/Qwen3-8B-AWQ", cache_dir=cache, endpoint=hub.endpoint,
                            read_weight_headers=False)
    assert awq.base_models == [QWEN] and awq.base_model_relation == "quantized"
    assert awq.gated is GatingMode.NONE and awq.license == "apache-2.0"


def test_chat_template_from_its_own_file_and_modelopt_sidecar(hub, cache):
    ct = fetch_model_facts("RedHatAI/Qwen3-8B-quantized.w4a16", cache_dir=cache,
                           endpoint=hub.endpoint, read_weight_headers=False)
    assert ct.chat_template_source == "chat_template.jinja" and "<|im_start|>" in ct.chat_template
    fp4 = fetch_model_facts("nvidia/Qwen3-8B-NVFP4", cache_dir=cache, endpoint=hub.endpoint,
                            read_weight_headers=False)
    assert fp4.hf_quant_config["quantization"]["quant_algo"] == "NVFP4"
    assert "quantization_config" not in fp4.config


def test_safetensors_metadata_by_range_requests_only(hub, cache):
    facts = fetch_model_facts(QWEN, cache_dir=cache, endpoint=hub.endpoint)
    s = facts.safetensors
    assert s.elements_by_dtype == {"BF16": 8_190_735_360}  # Qwen3-8B's published 8.19B
    assert s.total_bytes == 2 * 8_190_735_360 and len(s.files) == 5
    assert to_inspection(facts).params_total == 8_190_735_360  # config arithmetic agrees
    weight_gets = [r for r in hub.requests if r["method"] == "GET"
                   and (r["path"].endswith(".safetensors") or r["path"].startswith("/lfs-cdn/"))]
    assert weight_gets and all(r["range"] for r in weight_gets)
    # LFS files redirect to another origin: the token must not follow the redirect there.
    assert all(r["authorization"] is None for r in hub.requests_to(r"^/lfs-cdn/"))
    awq = fetch_model_facts("Qwen/Qwen3-8B-AWQ", cache_dir=cache, endpoint=hub.endpoint)
    assert set(awq.safetensors.elements_by_dtype) == {"I32", "F16"}
    assert any(n.endswith(".qweight") for n in awq.safetensors.tensor_names_sample)


def test_gguf_types_from_header_and_name(hub, cache):
    facts = fetch_model_facts("Qwen/Qwen3-8B-GGUF", cache_dir=cache, endpoint=hub.endpoint,
                              gguf_max_bits=4)
    assert facts.config is None and facts.safetensors is None
    by = {g.path: g for g in facts.gguf_files}
    q4 = by["Qwen3-8B-Q4_K_M.gguf"]
    assert (q4.file_type, q4.file_type_source) == ("Q4_K_M", "gguf header")
    assert (q4.architecture, q4.block_count, q4.embedding_length) == ("qwen3", 36, 4096)
    assert q4.size_bytes == 5_027_783_488 and q4.token_count == 512
    q8 = by["Qwen3-8B-Q8_0.gguf"]
    assert (q8.file_type, q8.file_type_source) == ("Q8_0", "file name")  # header not read
    assert facts.chat_template_source == "gguf metadata (hub summary)"
    with pytest.raises(InputError, match="GGUF-only"):
        to_inspection(facts)


def test_gated_repo_without_token(hub, cache):
    with pytest.raises(InputError) as err:
        fetch_model_facts(LLAMA, cache_dir=cache, endpoint=hub.endpoint)
    msg = str(err.value)
    assert "gated" in msg and f"{hub.endpoint}/{LLAMA}" in msg
    assert "HF_TOKEN" in msg and "InfoptCredentials" in msg


def test_gated_repo_token_not_granted(hub, cache):
    with pytest.raises(InputError, match="not been granted access"):
        fetch_model_facts(LLAMA, cache_dir=cache, endpoint=hub.endpoint,
                          token="hf_fake_not_granted")


def test_gated_repo_with_granted_token_sends_bearer(hub, cache):
    start = len(hub.requests)  # the log is shared by the module's tests
    facts = fetch_model_facts(LLAMA, cache_dir=cache, endpoint=hub.endpoint,
                              token="hf_fake_granted")
    assert facts.safetensors.elements_by_dtype == {"BF16": 8_030_261_248}  # Llama 3.1 8B
    resolves = hub.requests_to(rf"^/{LLAMA}/resolve/", since=start)
    assert resolves and all(r["authorization"] == "Bearer hf_fake_granted" for r in resolves)


def test_invalid_token(hub, cache):
    with pytest.raises(InputError, match="rejected the token.*HF_TOKEN"):
        fetch_model_facts(QWEN, cache_dir=cache, endpoint=hub.endpoint, token="hf_typo")


def test_unknown_repo_and_revision(hub, cache):
    with pytest.raises(InputError) as err:
        fetch_model_facts("Qwen/Qwen3-8B-Instrukt", cache_dir=cache, endpoint=hub.endpoint)
    assert f"does not exist on {hub.endpoint}" in str(err.value)
    assert "spelling" in str(err.value)
    with pytest.raises(InputError, match="revision 'v9' does not exist.*commits"):
        fetch_model_facts(QWEN, cache_dir=cache, endpoint=hub.endpoint, revision="v9")
    with pytest.raises(InputError, match="ORG/NAME"):
        fetch_model_facts("not a repo id", cache_dir=cache, endpoint=hub.endpoint)


def test_unreachable_endpoint_fails_fast(cache):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.raises(InputError) as err:
        fetch_model_facts(QWEN, cache_dir=cache, endpoint=endpoint, timeout_s=2)
    msg = str(err.value)
    assert endpoint in msg and "HF_ENDPOINT" in msg and "local model path" in msg


def test_a_hub_that_drops_connections_is_tried_once(cache):
    """No backoff loop: one connection, then the error (counted at the server, not timed)."""
    accepted: list[int] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def drop_all() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # closed: the test is over
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=drop_all, daemon=True).start()
    try:
        with pytest.raises(InputError, match="HF_ENDPOINT"):
            fetch_model_facts(QWEN, cache_dir=cache,
                              endpoint=f"http://127.0.0.1:{srv.getsockname()[1]}", timeout_s=2)
    finally:
        srv.close()
    assert len(accepted) == 1


def test_search_follows_pagination_links():
    with FakeHub(page_size=2) as small:
        ids = search_models(endpoint=small.endpoint, filter=f"base_model:quantized:{QWEN}")
        assert len(small.requests_to(r"^/api/models$")) > 2  # followed Link: rel="next"
    assert "Qwen/Qwen3-8B-AWQ" in ids and "nvidia/Qwen3-8B-NVFP4" in ids
    assert QWEN not in ids and len(ids) == len(set(ids)) == 12


def test_fake_hub_speaks_expand_and_blobs(hub):
    api = HfApi(endpoint=hub.endpoint, token=False)
    info = api.model_info(QWEN, expand=["gated", "sha", "cardData"])
    assert info.sha == hub.repos[QWEN].info["sha"] and info.gated is False
    assert info.siblings is None and info.card_data.license == "apache-2.0"
    full = api.model_info(QWEN, files_metadata=True)
    lfs = [s for s in full.siblings if s.lfs]
    assert lfs and all(s.size == s.lfs.size for s in lfs)
    assert full.safetensors.total == 8_190_735_360


def test_token_and_endpoint_defaults(monkeypatch):
    assert resolve_token({"HF_TOKEN": " hf_x "}) == "hf_x"
    assert resolve_token({"HF_TOKEN": ""}) is None and resolve_token({}) is None
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example/")
    assert default_endpoint() == "https://mirror.example"
    monkeypatch.delenv("HF_ENDPOINT")
    assert default_endpoint() == "https://huggingface.co"


def test_gguf_names_and_truncated_headers():
    assert gguf_type_from_name("Qwen3-8B-Q4_K_M.gguf") == "Q4_K_M"
    assert gguf_type_from_name("Meta-Llama-3.1-8B-Instruct.IQ4_XS.gguf") == "IQ4_XS"
    assert gguf_type_from_name("m-q5_k_m-00001-of-00002.gguf") == "Q5_K_M"
    assert gguf_type_from_name("model.gguf") is None
    assert [gguf_nominal_bits(t) for t in ("Q4_K_M", "IQ4_XS", "Q8_0", "BF16", "MXFP4_MOE")] == [
        4, 4, 8, 16, 4]

    def kv(key: str, vtype: int, payload: bytes) -> bytes:
        return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", vtype) + payload

    name = b"qwen3"
    body = (kv("general.architecture", 8, struct.pack("<Q", len(name)) + name)
            + kv("general.file_type", 4, struct.pack("<I", 15))
            + kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 4) + b"\0" * 16))
    whole = b"GGUF" + struct.pack("<IQQ", 3, 0, 3) + body
    values, complete = parse_gguf_kv(whole)
    assert complete and values["general.file_type"] == 15
    assert values["tokenizer.ggml.scores"] == {"array_length": 4}
    values, complete = parse_gguf_kv(whole[:-8])  # cut inside the last array
    assert not complete and values["general.architecture"] == "qwen3"
