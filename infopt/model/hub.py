"""Read a model repository from the Hugging Face Hub (or a mirror) without downloading weights.

Thin I/O over the real `huggingface_hub` client: `HfApi(endpoint=..., token=...)` for model info,
file trees and model search, `hf_hub_download` for the small JSON files (into a cache directory
the caller passes, never the checkout), `HfApi.parse_safetensors_file_metadata` for safetensors
headers (HTTP Range requests), and the client's own session, URL builder, headers and error
mapping for the Range read of GGUF headers (the client has no GGUF helper). Everything is read
at one commit: the revision the caller names is resolved to its sha first and pinned.

The endpoint defaults to $HF_ENDPOINT, else https://huggingface.co; the token is whatever the
caller passes (`resolve_token()` reads $HF_TOKEN). With no token none is sent: a login saved on
the machine is not used implicitly. Client errors become `InputError`s that say what to do.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from huggingface_hub import HfApi, RepoFile, get_session, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    SafetensorsParsingError,
)
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

from infopt.specs.base import InputError
from infopt.specs.checkpoint import (
    GatingMode,
    GgufFileFacts,
    HubFile,
    HubModelFacts,
    SafetensorsSummary,
)
from infopt.specs.inspection import ModelInspection

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0
# safetensors dtype -> bytes per stored element (safetensors/src/tensor.rs Dtype::size).
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
                "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
                "I64": 8, "U64": 8, "F64": 8}
_SMALL_FILES = ("config.json", "hf_quant_config.json", "tokenizer_config.json",
                "generation_config.json", "chat_template.jinja", "chat_template.json")
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
T = TypeVar("T")


class HubAccessError(InputError):
    """The repository exists, but the token given (or none) may not read its files."""


def default_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def resolve_token(environ: dict[str, str] | None = None) -> str | None:
    """$HF_TOKEN, or None when unset or empty."""
    token = (environ if environ is not None else os.environ).get("HF_TOKEN", "").strip()
    return token or None


def default_cache_dir() -> Path:
    """Where small hub files are cached: $XDG_CACHE_HOME/infopt/hub (outside any checkout)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "infopt" / "hub"


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level failures of whichever HTTP stack this huggingface_hub uses
    (httpx2 in 2.x, httpx in 1.x, requests before); OfflineModeIsEnabled is a ConnectionError."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"),
                         ("requests", "ConnectionError"), ("requests", "Timeout")):
        try:
            errors.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


_TRANSPORT_ERRORS = _transport_errors()


def _unreachable(endpoint: str, exc: BaseException) -> InputError:
    cause = exc.__cause__ or exc
    return InputError(
        f"cannot reach the Hugging Face Hub at {endpoint} ({type(cause).__name__}: {cause}). "
        "Check the network, point HF_ENDPOINT (or --endpoint) at a reachable mirror, or pass a "
        "local model path instead of ORG/NAME.")


@contextmanager
def _hub_errors(repo_id: str, endpoint: str, revision: str | None,
                token: str | None) -> Iterator[None]:
    """Turn the client's exceptions into InputErrors that say what to change."""
    page = f"{endpoint}/{repo_id}"
    try:
        yield
    except GatedRepoError as exc:  # before RepositoryNotFoundError: it is a subclass
        if token is None:
            raise HubAccessError(
                f"{repo_id} is gated on {endpoint}: its files need an account that accepted the "
                f"license. Accept it at {page}, then set HF_TOKEN (or save an InfoptCredentials "
                "block) with a token of that account.") from exc
        raise HubAccessError(
            f"the token given has not been granted access to {repo_id} on {endpoint}. Accept "
            f"the license at {page} with the token's account (manual gating waits for the "
            "authors' review), or use a token of an account that has access.") from exc
    except RevisionNotFoundError as exc:
        raise InputError(
            f"revision '{revision}' does not exist in {repo_id} on {endpoint}. Pass a branch, "
            f"tag or full commit sha listed at {page}/commits/main.") from exc
    except RepositoryNotFoundError as exc:
        private = "" if token else " If it is private, set HF_TOKEN with a token that can read it."
        raise InputError(
            f"{repo_id} does not exist on {endpoint}. Check the spelling (ORG/NAME, as in the "
            f"URL {page}).{private}") from exc
    except RemoteEntryNotFoundError as exc:
        raise InputError(f"{repo_id}@{revision or 'main'} on {endpoint} lists a file it does not "
                         f"serve ({exc}); retry, or pin another revision.") from exc
    except LocalEntryNotFoundError as exc:  # hf_hub_download: HEAD failed, nothing cached
        raise _unreachable(endpoint, exc) from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            raise InputError(
                f"{endpoint} rejected the token (401: invalid credentials). Check HF_TOKEN or "
                "the InfoptCredentials block, or unset it for public models.") from exc
        raise InputError(
            f"{endpoint} answered HTTP {status} for {repo_id} ({exc.server_message or exc}). "
            "The hub may be down: retry later, or point HF_ENDPOINT (or --endpoint) at a "
            "mirror.") from exc
    except _TRANSPORT_ERRORS as exc:
        raise _unreachable(endpoint, exc) from exc


def _call(fn: Callable[[], T], repo_id: str, endpoint: str, revision: str | None,
          token: str | None) -> T:
    with _hub_errors(repo_id, endpoint, revision, token):
        return fn()


def _check_repo_id(repo_id: str) -> None:
    if not _REPO_ID.match(repo_id):
        raise InputError(f"'{repo_id}' is not a hub model id: pass ORG/NAME as it appears in the "
                         "model's hub URL, or a local path to a model file or directory.")


def list_files(repo_id: str, *, revision: str, endpoint: str | None = None,
               token: str | None = None) -> list[HubFile]:
    """Every file of the repository at `revision` (a commit sha for a pinned read), recursively."""
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token or False)

    def run() -> list[HubFile]:
        out = []
        for entry in api.list_repo_tree(repo_id, revision=revision, recursive=True):
            if isinstance(entry, RepoFile):  # RepoFolder entries carry no size
                out.append(HubFile(path=entry.path, size_bytes=entry.size, blob_id=entry.blob_id,
                                   lfs_sha256=entry.lfs.sha256 if entry.lfs else None))
        return out

    return _call(run, repo_id, endpoint, revision, token)


# --- GGUF headers --------------------------------------------------------------------------
# GGUF v2/v3 layout (ggml/docs/gguf.md): magic "GGUF", u32 version, u64 tensor count, u64 KV
# count, then KVs: u64-length key, u32 value type, value. Types 0..12 below; 8 is a u64-length
# string, 9 an array (u32 element type, u64 count, elements).
_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_NAME = re.compile(r"^(I?Q[1-8](?:_[A-Z0-9]+)*|TQ[12]_0|BF16|F16|F32|MXFP4(?:_MOE)?)$", re.I)
_GGUF_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def gguf_type_from_name(filename: str) -> str | None:
    """The llama.cpp quantization type written in a GGUF file name ("...-Q4_K_M.gguf")."""
    stem = _GGUF_SHARD.sub("", Path(filename).name).removesuffix(".gguf")
    hits = [t for t in re.split(r"[-.]", stem) if _GGUF_NAME.match(t)]
    return hits[-1].upper() if hits else None


def gguf_nominal_bits(type_name: str | None) -> int | None:
    """4 for Q4_K_M/IQ4_XS/MXFP4, 8 for Q8_0, 16 for F16/BF16: the bits the name promises."""
    if not type_name:
        return None
    t = type_name.upper()
    if m := re.match(r"^(?:I|T)?Q(\d)", t):
        return int(m[1])
    return {"BF16": 16, "F16": 16, "F32": 32}.get(t, 4 if t.startswith("MXFP4") else None)


def parse_gguf_kv(buf: bytes) -> tuple[dict[str, Any], bool]:
    """Key/values from the start of a GGUF file; arrays are reported as their length only.

    Returns (values, complete): complete is False when `buf` ended inside the KV section.
    """
    if buf[:4] != b"GGUF":
        raise ValueError("not a GGUF file (magic bytes differ)")
    version = struct.unpack_from("<I", buf, 4)[0]
    if version < 2:
        raise ValueError(f"GGUF version {version} is too old (v2+ supported)")
    n_kv = struct.unpack_from("<Q", buf, 16)[0]
    pos = 24
    out: dict[str, Any] = {}

    def read(fmt: str) -> Any:
        nonlocal pos
        value = struct.unpack_from(fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal pos
        n = read("<Q")
        if pos + n > len(buf):
            raise struct.error("truncated")
        s = buf[pos:pos + n].decode("utf-8", errors="replace")
        pos += n
        return s

    try:
        for _ in range(n_kv):
            key, vtype = string(), read("<I")
            if vtype == 8:
                out[key] = string()
            elif vtype == 9:
                etype, count = read("<I"), read("<Q")
                if etype == 8:
                    for _ in range(count):
                        string()
                else:
                    pos += count * struct.calcsize(_GGUF_SCALARS[etype])
                    if pos > len(buf):
                        raise struct.error("truncated")
                out[key] = {"array_length": count}
            else:
                out[key] = read(_GGUF_SCALARS[vtype])
    except struct.error:
        return out, False
    return out, True


def _gguf_file_type_name(value: Any) -> str | None:
    import gguf  # the file-type enum of llama.cpp (LLAMA_FTYPE_*), as gguf-py ships it

    try:
        return gguf.LlamaFileType(int(value)).name.removeprefix("MOSTLY_")
    except (ValueError, TypeError):
        return None


def read_gguf_header(repo_id: str, filename: str, *, revision: str, endpoint: str,
                     token: str | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """GGUF key/values read with Range requests (512 KiB, then 8 MiB if the type is further on)."""
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    values: dict[str, Any] = {}
    for nbytes in (512 * 1024, 8 * 1024 * 1024):
        headers = build_hf_headers(token=token or False) | {"range": f"bytes=0-{nbytes - 1}"}
        # The response is of the HTTP stack huggingface_hub uses (httpx2, httpx or requests:
        # see _transport_errors), so Any; the cast types the lambda mypy cannot infer.
        fetch = cast(Callable[[], Any],
                     lambda h=headers: get_session().get(url, headers=h, timeout=timeout_s))
        response = _call(fetch, repo_id, endpoint, revision, token)
        _call(partial(hf_raise_for_status, response), repo_id, endpoint, revision, token)
        try:
            values, complete = parse_gguf_kv(response.content)
        except ValueError as exc:
            raise InputError(f"{repo_id}/{filename} is not a readable GGUF file ({exc}).") from exc
        if complete or "general.file_type" in values or len(response.content) < nbytes:
            break
    return values


def _gguf_facts(repo_id: str, files: list[HubFile], *, revision: str, endpoint: str,
                token: str | None, timeout_s: float, max_bits: int | None) -> list[GgufFileFacts]:
    groups: dict[str, list[HubFile]] = {}
    for f in files:
        if f.path.endswith(".gguf"):
            groups.setdefault(_GGUF_SHARD.sub("", f.path), []).append(f)
    facts = []
    for shards in groups.values():
        shards.sort(key=lambda f: f.path)
        first = shards[0]
        name_type = gguf_type_from_name(first.path)
        fact = GgufFileFacts(path=first.path, size_bytes=sum(f.size_bytes for f in shards),
                             shards=len(shards), file_type=name_type,
                             file_type_source="file name")
        bits = gguf_nominal_bits(name_type)
        if max_bits is None or bits is None or bits <= max_bits:
            kv = read_gguf_header(repo_id, first.path, revision=revision, endpoint=endpoint,
                                  token=token, timeout_s=timeout_s)
            arch = kv.get("general.architecture")
            header_type = _gguf_file_type_name(kv.get("general.file_type"))
            tokens = kv.get("tokenizer.ggml.tokens")
            fact = fact.model_copy(update={
                "file_type": header_type or name_type,
                "file_type_source": "gguf header" if header_type else "file name",
                "architecture": arch,
                "block_count": kv.get(f"{arch}.block_count"),
                "embedding_length": kv.get(f"{arch}.embedding_length"),
                "context_length_tokens": kv.get(f"{arch}.context_length"),
                "token_count": tokens.get("array_length") if isinstance(tokens, dict) else None})
        facts.append(fact)
    return facts


# --- safetensors headers -------------------------------------------------------------------

def _safetensors_summary(api: HfApi, repo_id: str, files: list[HubFile], index: dict | None,
                         *, revision: str, timeout_s: float) -> SafetensorsSummary | None:
    if index is not None:
        names = sorted(set(index.get("weight_map", {}).values()))
    else:  # single file, or shards without an index (mlx, consolidated.safetensors)
        names = sorted(f.path for f in files if f.path.endswith(".safetensors")
                       and "/" not in f.path)
    if not names:
        return None
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        metas = list(pool.map(lambda n: api.parse_safetensors_file_metadata(
            repo_id, n, revision=revision, timeout=timeout_s), names))
    elements: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    count = 0
    for meta in metas:
        for info in meta.tensors.values():
            n = 1
            for dim in info.shape:
                n *= dim
            elements[info.dtype] = elements.get(info.dtype, 0) + n
            span = info.data_offsets[1] - info.data_offsets[0]
            nbytes[info.dtype] = nbytes.get(info.dtype, 0) + span
            count += 1
    return SafetensorsSummary(files=names, tensor_count=count, elements_by_dtype=elements,
                              bytes_by_dtype=nbytes, total_bytes=sum(nbytes.values()),
                              tensor_names_sample=list(metas[0].tensors)[:12])


# --- the whole read ------------------------------------------------------------------------

def _license(card: dict[str, Any], tags: list[str]) -> tuple[str | None, str | None]:
    lic = card.get("license")
    if isinstance(lic, list):
        lic = lic[0] if lic else None
    if lic == "other" and card.get("license_name"):
        return str(card["license_name"]), "model card metadata (license_name)"
    if lic:
        return str(lic), "model card metadata (license)"
    tagged = [t.split(":", 1)[1] for t in tags if t.startswith("license:")]
    return (tagged[0], "hub tag license:") if tagged else (None, None)


def _base_models(card: dict[str, Any], tags: list[str]) -> tuple[list[str], str | None]:
    declared = card.get("base_model") or []
    bases = [declared] if isinstance(declared, str) else list(declared)
    relation = card.get("base_model_relation")
    for tag in tags:  # the hub writes base_model:<relation>:<repo> for every declared base
        parts = tag.split(":")
        if parts[0] == "base_model" and len(parts) == 3:
            relation = relation or parts[1]
            if parts[2] not in bases:
                bases.append(parts[2])
    return bases, relation


def fetch_model_facts(repo_id: str, *, cache_dir: Path, revision: str | None = None,
                      endpoint: str | None = None, token: str | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S, read_weight_headers: bool = True,
                      gguf_max_bits: int | None = None) -> HubModelFacts:
    """Everything the later stages need about `repo_id`, read at one pinned commit.

    `gguf_max_bits`: read GGUF headers only for files whose name promises at most this many bits
    (None: all); the others keep the type their name gives.
    """
    _check_repo_id(repo_id)
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token or False)

    def call(fn: Callable[[], T]) -> T:
        return _call(fn, repo_id, endpoint, revision, token)

    info = call(lambda: api.model_info(repo_id, revision=revision, timeout=timeout_s))
    if not info.sha:
        raise InputError(f"{endpoint} returned no commit sha for {repo_id}: it does not behave "
                         "like a Hugging Face Hub; check HF_ENDPOINT / --endpoint.")
    sha = info.sha
    files = list_files(repo_id, revision=sha, endpoint=endpoint, token=token)
    paths = {f.path for f in files}
    card = info.card_data.to_dict() if info.card_data is not None else {}
    tags = list(info.tags or [])
    sources = [f"{endpoint}/api/models/{repo_id}/revision/{sha}",
               f"{endpoint}/api/models/{repo_id}/tree/{sha}"]
    notes: list[str] = []

    def small(name: str) -> Any:
        if name not in paths:
            return None
        path = call(lambda: hf_hub_download(repo_id, name, revision=sha, cache_dir=cache_dir,
                                            endpoint=endpoint, token=token or False,
                                            etag_timeout=timeout_s))
        sources.append(f"{endpoint}/{repo_id}/resolve/{sha}/{name}")
        text = Path(path).read_text(encoding="utf-8")
        if name.endswith(".jinja"):
            return text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{repo_id}/{name}@{sha[:12]} is not valid JSON ({exc}); pin "
                             "another revision or report it to the repository's authors.") from exc

    loaded = {name: small(name) for name in _SMALL_FILES}
    tok = loaded["tokenizer_config.json"]
    template, template_source = None, None
    if isinstance(tok, dict) and tok.get("chat_template"):
        template, template_source = tok["chat_template"], "tokenizer_config.json"
        tok = {k: v for k, v in tok.items() if k != "chat_template"}
    elif loaded["chat_template.jinja"]:  # newer transformers save it as its own file
        template, template_source = loaded["chat_template.jinja"], "chat_template.jinja"
    elif isinstance(loaded["chat_template.json"], dict):
        template = loaded["chat_template.json"].get("chat_template")
        template_source = "chat_template.json" if template else None

    safetensors = None
    if read_weight_headers:
        index = small("model.safetensors.index.json")
        try:
            safetensors = call(lambda: _safetensors_summary(api, repo_id, files, index,
                                                            revision=sha, timeout_s=timeout_s))
        except SafetensorsParsingError as exc:
            notes.append(f"safetensors headers unreadable: {exc}")
    gguf_files = (_gguf_facts(repo_id, files, revision=sha, endpoint=endpoint, token=token,
                              timeout_s=timeout_s, max_bits=gguf_max_bits)
                  if read_weight_headers else [])
    if template is None and info.gguf and info.gguf.get("chat_template"):
        template, template_source = info.gguf["chat_template"], "gguf metadata (hub summary)"

    lic, lic_source = _license(card, tags)
    bases, relation = _base_models(card, tags)
    gated = GatingMode(info.gated) if info.gated else GatingMode.NONE
    return HubModelFacts(
        repo_id=repo_id, endpoint=endpoint, requested_revision=revision, commit_sha=sha,
        author=info.author or repo_id.split("/")[0], license=lic, license_source=lic_source,
        gated=gated, tags=tags, base_models=bases, base_model_relation=relation,
        last_modified=info.last_modified.isoformat() if info.last_modified else None,
        files=files, config=loaded["config.json"], tokenizer_config=tok, chat_template=template,
        chat_template_source=template_source, generation_config=loaded["generation_config.json"],
        hf_quant_config=loaded["hf_quant_config.json"], safetensors=safetensors,
        gguf_files=gguf_files, hub_gguf_summary=info.gguf, sources=sources, notes=notes)


def search_models(*, endpoint: str | None = None, token: str | None = None,
                  filter: str | None = None, search: str | None = None,
                  author: str | None = None, limit: int = 100) -> list[str]:
    """Repository ids from the hub's model search (`list_models`), most downloaded first."""
    endpoint = (endpoint or default_endpoint()).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token or False)
    what = filter or search or author or "models"
    return _call(lambda: [m.id for m in api.list_models(filter=filter, search=search,
                                                        author=author, sort="downloads",
                                                        limit=limit)],
                 what, endpoint, None, token)


def to_inspection(facts: HubModelFacts) -> ModelInspection:
    """Component classification of a fetched model, with the hub facts filled in."""
    from infopt.model.classify import classify_config

    if facts.config is None:
        raise InputError(
            f"{facts.repo_id} has no config.json at {facts.commit_sha[:12]} (a GGUF-only "
            "repository?): inspect a downloaded GGUF file by path, or name the original "
            "Hugging Face model instead.")
    return classify_config(facts.config, hf_quant_config=facts.hf_quant_config,
                           model=facts.repo_id, revision=facts.commit_sha, license=facts.license,
                           gated=facts.gated is not GatingMode.NONE,
                           chat_template_present=facts.chat_template_present)
