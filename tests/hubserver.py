"""A local fake of the Hugging Face Hub, speaking its wire format over real HTTP on 127.0.0.1.

Tests point the real `huggingface_hub` client at it (`HfApi(endpoint=hub.endpoint)`), so the code
under test runs the same requests, headers and error mapping it runs against huggingface.co.
What it serves comes from `tests/fixtures/hub/<org>__<name>/`: `repo.json` (the model-info fields)
plus the repository's small files verbatim; weight files are virtual: their safetensors/GGUF
headers are generated from the repo's own config.json (shapes and dtypes as each quantizer writes
them) and the rest of the bytes read as zeros, so a Range request gets a real header; a test that
downloads a checkpoint and serves it passes `real_files`, whose bytes (and sha256) are real.

Routes, as huggingface_hub 2.x calls them (hf_api.py, file_download.py, utils/_http.py):
  GET  /api/models?search=&filter=&author=&limit=   list_models; `Link: <...>; rel="next"` pages
  GET  /api/models/{repo}[/revision/{rev}]          model_info (?blobs=true, ?expand=/expand[]=)
  GET  /api/models/{repo}/tree/{rev}[/{path}]       list_repo_tree (?recursive=, paged by cursor)
  HEAD|GET /{repo}/resolve/{rev}/{path}             hf_hub_download and Range reads. Git files: 200
       with ETag (blob oid), X-Repo-Commit. LFS files: 302 to a CDN origin (http://localhost:PORT,
       a different origin, as cdn-lfs/xet bridges are) with X-Linked-Etag/X-Linked-Size.
  HEAD|GET /lfs-cdn/{sha256}                        the "CDN": Range -> 206 + Content-Range.
Errors carry the hub's X-Error-Code / X-Error-Message headers and {"error": ...} bodies:
RepoNotFound (401 anonymous, 404 with a token), RevisionNotFound, EntryNotFound (404), GatedRepo
(401 anonymous, 403 token not granted), and 401 "Invalid credentials in Authorization header".
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.localserver import LocalServer

FIXTURES = Path(__file__).parent / "fixtures" / "hub"
DRAFTERS = Path(__file__).parent / "fixtures" / "hub_drafters"  # the drafter search's repos

# Tokens the fake knows: token -> repos (gated ones) it has been granted. Any other token is
# rejected as the real hub rejects an unknown one.
TOKENS: dict[str, set[str]] = {
    "hf_fake_granted": {"meta-llama/Llama-3.1-8B-Instruct"},
    "hf_fake_not_granted": set(),
}

_DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U32": 4, "I64": 8, "U8": 1, "I8": 1,
                "F8_E4M3": 1}


def _oid(*parts: str) -> str:
    return hashlib.sha1("/".join(parts).encode()).hexdigest()


def _sha256(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


# --- weight layouts ------------------------------------------------------------------------------

def _linear_tensors(prefix: str, out: int, inp: int, scheme: dict) -> list[tuple[str, str, list]]:
    """Tensors one nn.Linear becomes under each quantizer's on-disk layout."""
    kind, g = scheme["kind"], scheme.get("group_size", 128)
    if kind == "awq":  # AutoAWQ GEMM: packs 8 int4 along the output dim
        return [(f"{prefix}.qweight", "I32", [inp, out // 8]),
                (f"{prefix}.qzeros", "I32", [inp // g, out // 8]),
                (f"{prefix}.scales", "F16", [inp // g, out])]
    if kind == "gptq":  # AutoGPTQ/GPTQModel: packs 8 int4 along the input dim
        return [(f"{prefix}.qweight", "I32", [inp // 8, out]),
                (f"{prefix}.qzeros", "I32", [inp // g, out // 8]),
                (f"{prefix}.scales", "F16", [inp // g, out]),
                (f"{prefix}.g_idx", "I32", [inp])]
    if kind == "fp8-block":  # Qwen FP8: e4m3 weights, fp32 scale per 128x128 block
        return [(f"{prefix}.weight", "F8_E4M3", [out, inp]),
                (f"{prefix}.weight_scale_inv", "F32", [math.ceil(out / 128), math.ceil(inp / 128)])]
    if kind == "ct-w4a16":  # compressed-tensors pack-quantized
        return [(f"{prefix}.weight_packed", "I32", [out, inp // 8]),
                (f"{prefix}.weight_scale", "BF16", [out, inp // g]),
                (f"{prefix}.weight_shape", "I64", [2])]
    if kind == "nvfp4":  # ModelOpt NVFP4: two e2m1 per byte, e4m3 scale per 16, fp32 globals
        return [(f"{prefix}.weight", "U8", [out, inp // 2]),
                (f"{prefix}.weight_scale", "F8_E4M3", [out, inp // 16]),
                (f"{prefix}.weight_scale_2", "F32", []), (f"{prefix}.input_scale", "F32", [])]
    if kind == "bnb-nf4":  # bitsandbytes 4-bit, double quant: packed bytes + quant state
        return [(f"{prefix}.weight", "U8", [out * inp // 2, 1]),
                (f"{prefix}.weight.absmax", "U8", [out * inp // 64]),
                (f"{prefix}.weight.nested_absmax", "F32", [out * inp // 64 // 256]),
                (f"{prefix}.weight.nested_quant_map", "F32", [256]),
                (f"{prefix}.weight.quant_map", "F32", [16]),
                (f"{prefix}.weight.quant_state.bitsandbytes__nf4", "U8", [115])]
    if kind == "mlx":  # mlx affine: 8 int4 per uint32, scales and biases per group of 64
        return [(f"{prefix}.weight", "U32", [out, inp * scheme["bits"] // 32]),
                (f"{prefix}.scales", "BF16", [out, inp // g]),
                (f"{prefix}.biases", "BF16", [out, inp // g])]
    return [(f"{prefix}.weight", scheme.get("dtype", "BF16"), [out, inp])]


def weight_layout(config: dict, scheme: dict) -> list[tuple[str, str, list]]:
    """(name, safetensors dtype, shape) of every tensor of a dense Llama/Qwen-style decoder."""
    h, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or h // heads
    mtype, kind = config["model_type"], scheme["kind"]
    other = "F16" if kind in ("awq", "gptq") else "BF16"
    # mlx quantizes the embedding and head too; the others keep them 16-bit.
    edge = scheme if kind == "mlx" else {"kind": "plain", "dtype": other}
    tensors = _linear_tensors("model.embed_tokens", vocab, h, edge)
    linears = (("self_attn.q_proj", heads * hd, h), ("self_attn.k_proj", kv * hd, h),
               ("self_attn.v_proj", kv * hd, h), ("self_attn.o_proj", h, heads * hd),
               ("mlp.gate_proj", inter, h), ("mlp.up_proj", inter, h), ("mlp.down_proj", h, inter))
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        for name, out, inp in linears:
            tensors += _linear_tensors(f"{p}.{name}", out, inp, scheme)
            if mtype == "qwen2" and name[-6:] in ("q_proj", "k_proj", "v_proj"):  # qkv biases
                tensors.append((f"{p}.{name}.bias", other, [out]))
        if mtype == "qwen3":
            tensors += [(f"{p}.self_attn.q_norm.weight", other, [hd]),
                        (f"{p}.self_attn.k_norm.weight", other, [hd])]
        tensors += [(f"{p}.input_layernorm.weight", other, [h]),
                    (f"{p}.post_attention_layernorm.weight", other, [h])]
    tensors.append(("model.norm.weight", other, [h]))
    if not config.get("tie_word_embeddings"):
        tensors += _linear_tensors("lm_head", vocab, h, edge)
    return tensors


def safetensors_files(config: dict, scheme: dict, shards: int) -> dict[str, bytes | int]:
    """{filename: header bytes (8-byte length + JSON) or, for the index, the JSON}, plus sizes."""
    tensors = weight_layout(config, scheme)
    sizes = [_DTYPE_BYTES[d] * math.prod(s) for _, d, s in tensors]
    total = sum(sizes)
    names = ["model.safetensors"] if shards == 1 else [
        f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    groups: list[list[int]] = [[] for _ in names]
    acc = 0
    for idx, size in enumerate(sizes):  # fill shards in order, by bytes, as save_pretrained does
        groups[min(int(acc * shards / total), shards - 1)].append(idx)
        acc += size
    out: dict = {}
    weight_map = {}
    for name, members in zip(names, groups, strict=False):
        header: dict = {"__metadata__": {"format": scheme.get("metadata_format", "pt")}}
        offset = 0
        for idx in members:
            tname, dtype, shape = tensors[idx]
            header[tname] = {"dtype": dtype, "shape": shape,
                             "data_offsets": [offset, offset + sizes[idx]]}
            weight_map[tname] = name
            offset += sizes[idx]
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8-byte alignment
        out[name] = (len(raw).to_bytes(8, "little") + raw, 8 + len(raw) + offset)
    if shards > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        out["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    return out


def gguf_header(meta: dict, file_type: int) -> bytes:
    """A real GGUF header (no tensor data) written by the `gguf` package, as llama.cpp writes."""
    import gguf

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.gguf"
        w = gguf.GGUFWriter(str(path), meta["architecture"])
        # In convert_hf_to_gguf.py order: general.*, hyperparameters, file type, tokenizer.
        # Real vocabularies are ~150k strings; a short one keeps the fixture header small.
        for add, value in (("type", "model"), ("name", meta["name"]),
                           *((k, meta[k]) for k in ("context_length", "embedding_length",
                                                    "block_count", "head_count", "head_count_kv")),
                           ("file_type", file_type), ("quantization_version", 2),
                           ("tokenizer_model", "gpt2"),
                           ("token_list", [f"tok{i}" for i in range(512)]),
                           ("chat_template", meta.get("chat_template", "{{ messages }}"))):
            getattr(w, f"add_{add}")(value)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        return path.read_bytes()


# --- repositories --------------------------------------------------------------------------------

@dataclass
class RepoFile:
    path: str
    size: int
    oid: str  # git blob id
    content: bytes  # whole content (git files) or just the leading header (virtual LFS files)
    lfs_sha256: str | None = None
    source: Path | None = None  # a real local file served instead (FakeHub(real_files=...))

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end] of the file: virtual ones read as zeros past their header."""
        if self.source is not None:
            with self.source.open("rb") as fh:
                fh.seek(start)
                return fh.read(end + 1 - start)
        body = self.content[start:end + 1]
        return body + b"\0" * (end + 1 - start - len(body))


def real_file(path: str, source: Path) -> RepoFile:
    """A repository file whose bytes are a real local file (a GGUF an engine can load)."""
    h = hashlib.sha256()
    with source.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return RepoFile(path, source.stat().st_size, _oid(h.hexdigest()), b"", h.hexdigest(),
                    source)


@dataclass
class Repo:
    info: dict
    files: dict[str, RepoFile] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.info["id"]

    def resolve(self, rev: str) -> str | None:
        """Commit sha for a branch/tag name or a full/short sha this repo has."""
        refs = self.info.get("refs", {"main": self.info["sha"]})
        if rev in refs:
            return refs[rev]
        commits = set(refs.values()) | set(self.info.get("older_commits", []))
        hits = [c for c in commits if len(rev) >= 7 and c.startswith(rev)]
        return hits[0] if len(hits) == 1 else None


def load_repos(root: Path = FIXTURES) -> dict[str, Repo]:
    repos = {}
    for d in sorted(p for p in root.iterdir() if (p / "repo.json").exists()):
        info = json.loads((d / "repo.json").read_text())
        repo = Repo(info=info)
        rid = info["id"]
        for f in sorted(d.rglob("*")):
            if f.is_file() and f.name != "repo.json":
                rel = f.relative_to(d).as_posix()
                data = f.read_bytes()
                repo.files[rel] = RepoFile(rel, len(data), _oid(rid, rel, "blob"), data)
        for rel, spec in info.get("lfs_files", {}).items():  # big files nobody reads
            # {"size", "sha256"} pins the LFS oid (identical tokenizer.json across repos).
            size, sha = (spec, None) if isinstance(spec, int) else (spec["size"], spec["sha256"])
            sha = sha or _sha256(rid, rel)
            repo.files[rel] = RepoFile(rel, size, _oid(sha), b"", sha)
        if weights := info.get("weights"):
            config = json.loads((d / "config.json").read_text())
            layout = safetensors_files(config, weights["scheme"], weights["shards"])
            for name, val in layout.items():  # (header, size) for shards, bytes for the index
                content, size = val if isinstance(val, tuple) else (val, len(val))
                lfs = _sha256(rid, name) if isinstance(val, tuple) else None
                repo.files[name] = RepoFile(name, size, _oid(rid, name), content, lfs)
        for name, spec in info.get("gguf_files", {}).items():
            header = gguf_header(info["gguf_meta"], spec["file_type"])
            repo.files[name] = RepoFile(name, spec["size"], _oid(rid, name), header,
                                        _sha256(rid, name))
        repos[rid] = repo
    return repos


def _param_summary(repo: Repo) -> dict | None:
    """The hub's `safetensors` field: element counts per dtype, read from the headers."""
    params: dict[str, int] = {}
    for f in repo.files.values():
        if f.path.endswith(".safetensors"):
            n = int.from_bytes(f.read(0, 7), "little")  # real files: from their source
            for key, t in json.loads(f.read(8, 7 + n)).items():
                if key != "__metadata__":
                    params[t["dtype"]] = params.get(t["dtype"], 0) + math.prod(t["shape"])
    return {"parameters": params, "total": sum(params.values())} if params else None


def model_info_json(repo: Repo, sha: str, blobs: bool, expand: list[str]) -> dict:
    i = repo.info
    config = {}
    if "config.json" in repo.files:
        full = json.loads(repo.files["config.json"].content)
        config = {k: full[k] for k in ("architectures", "model_type") if k in full}
        if "quantization_config" in full:
            q = full["quantization_config"]
            config["quantization_config"] = {k: q[k] for k in ("quant_method", "bits") if k in q}
    siblings = []
    for f in sorted(repo.files.values(), key=lambda f: f.path):
        s: dict = {"rfilename": f.path}
        if blobs:
            s |= {"blobId": f.oid, "size": f.size}
            if f.lfs_sha256:
                s["lfs"] = {"sha256": f.lfs_sha256, "size": f.size, "pointerSize": 135}
        siblings.append(s)
    data = {
        "_id": _oid(repo.id)[:24], "id": repo.id, "modelId": repo.id, "author": i["author"],
        "sha": sha, "lastModified": i["lastModified"], "createdAt": i["createdAt"],
        "private": False, "disabled": False, "gated": i.get("gated", False),
        "downloads": i.get("downloads", 0), "likes": i.get("likes", 0),
        "library_name": i.get("library_name"), "pipeline_tag": i.get("pipeline_tag"),
        "tags": i["tags"], "cardData": i.get("cardData"), "config": config or None,
        "siblings": siblings, "spaces": [], "safetensors": _param_summary(repo),
        "usedStorage": sum(f.size for f in repo.files.values()),
    }
    if "gguf_meta" in i:
        m = i["gguf_meta"]
        data["gguf"] = {"total": m["total"], "architecture": m["architecture"],
                        "context_length": m["context_length"],
                        "chat_template": m.get("chat_template"), "eos_token": m.get("eos_token")}
    data = {k: v for k, v in data.items() if v is not None}
    if expand:  # the hub returns only the expanded properties (plus the id)
        data = {k: v for k, v in data.items() if k in expand or k in ("_id", "id")}
    return data


class FakeHub(LocalServer):
    """`with FakeHub() as hub:` serves the fixtures on a free loopback port until exit."""

    def __init__(self, root: Path = FIXTURES, page_size: int = 1000,
                 allow_downloads: bool = False,
                 real_files: dict[str, dict[str, Path]] | None = None,
                 extra_roots: tuple[Path, ...] = ()):
        # extra_roots: more fixture folders served beside root (e.g. DRAFTERS).
        self.repos = {rid: r for d in (root, *extra_roots) for rid, r in load_repos(d).items()}
        # repo id -> {path in the repo: a local file}: real weights in place of virtual ones,
        # for tests that download a checkpoint and serve it.
        for rid, files in (real_files or {}).items():
            for rel, src in files.items():
                self.repos[rid].files[rel] = real_file(rel, Path(src))
        self.allow_downloads = allow_downloads
        self.page_size = page_size
        self.requests: list[dict] = []  # method, path, query, range, authorization
        self._lock = threading.Lock()
        self._serve(_make_handler(self))
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.cdn = f"http://localhost:{self.port}"  # another origin: auth must not follow

    def log(self, **entry) -> None:
        with self._lock:
            self.requests.append(entry)

    def requests_to(self, pattern: str, since: int = 0) -> list[dict]:
        """Logged requests whose path matches `pattern`, from entry `since` on."""
        with self._lock:
            return [r for r in self.requests[since:] if re.search(pattern, r["path"])]


def _make_handler(hub: FakeHub):  # noqa: C901 - one router, kept together for reading
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body in two writes: no 40 ms ACK wait

        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        # -- plumbing --
        def _send(self, status: int, body: bytes = b"", headers: dict | None = None,
                  content_type: str = "application/json; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, obj, headers: dict | None = None) -> None:
            self._send(status, json.dumps(obj).encode(), headers)

        def _error(self, status: int, code: str | None, message: str,
                   headers: dict | None = None) -> None:
            h = {"X-Error-Message": message} | (headers or {})
            if code:
                h["X-Error-Code"] = code
            self._json(status, {"error": message}, h)

        def _token(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            return auth[7:] if auth.lower().startswith("bearer ") else None

        def _auth_ok(self) -> bool:
            """False (after answering 401) when a token is sent that the hub does not know."""
            token = self._token()
            if token is not None and token not in TOKENS:
                self._error(401, None, "Invalid credentials in Authorization header")
                return False
            return True

        def _repo(self, rid: str) -> Repo | None:
            repo = hub.repos.get(rid)
            if repo is None:  # anonymous callers get 401, as private repos are hidden that way
                self._error(404 if self._token() else 401, "RepoNotFound", "Repository not found")
            return repo

        def _gate(self, repo: Repo) -> bool:
            if not repo.info.get("gated"):
                return True
            token = self._token()
            if token is None:
                self._error(401, "GatedRepo", f"Access to model {repo.id} is restricted. You must "
                            "have access to it and be authenticated to access it. Please log in.")
                return False
            if repo.id not in TOKENS[token]:
                self._error(403, "GatedRepo", f"Access to model {repo.id} is restricted and you "
                            f"are not in the authorized list. Visit https://huggingface.co/"
                            f"{repo.id} to ask for access.")
                return False
            return True

        def _rev(self, repo: Repo, rev: str) -> str | None:
            sha = repo.resolve(unquote(rev))
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(rev)}")
            return sha

        # -- routes --
        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            q = parse_qs(url.query)
            path = unquote(url.path)
            hub.log(method=self.command, path=path, query=q, range=self.headers.get("Range"),
                    authorization=self.headers.get("Authorization"))
            if not self._auth_ok():
                return
            if m := re.fullmatch(r"/lfs-cdn/([0-9a-f]{64})", path):
                return self._cdn(m[1])
            if path == "/api/models":
                return self._list(q)
            if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", url.path):
                return self._info(unquote(m[1]), m[2] or "main", q)
            if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", url.path):
                return self._tree(unquote(m[1]), m[2], unquote(m[3] or "").strip("/"), q)
            if m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", url.path):
                return self._resolve(unquote(m[1]), m[2], unquote(m[3]))
            self._error(404, None, "Not found")

        def _list(self, q: dict) -> None:
            filters = q.get("filter", []) + q.get("filter[]", [])
            search = (q.get("search") or [""])[0].lower()
            author = (q.get("author") or [None])[0]
            hits = [r for r in hub.repos.values()
                    if all(f in r.info["tags"] for f in filters)
                    and search in r.id.lower() and (author is None or r.info["author"] == author)]
            hits.sort(key=lambda r: (-r.info.get("downloads", 0), r.id))
            items = [{"_id": _oid(r.id)[:24], "id": r.id, "modelId": r.id,
                      "likes": r.info.get("likes", 0), "downloads": r.info.get("downloads", 0),
                      "private": False, "tags": r.info["tags"],
                      "pipeline_tag": r.info.get("pipeline_tag"),
                      "library_name": r.info.get("library_name"),
                      "createdAt": r.info["createdAt"]} for r in hits]
            self._paged(items, q, "/api/models")

        def _paged(self, items: list, q: dict, path: str) -> None:
            """One page from ?cursor=; a `Link: <...>; rel="next"` header when more remain."""
            limit = int((q.get("limit") or [len(items)])[0])
            start, size = int((q.get("cursor") or ["0"])[0]), min(limit, hub.page_size)
            headers = {}
            if start + size < min(len(items), limit):
                nxt = [(k, v) for k, vs in q.items() if k != "cursor" for v in vs]
                nxt.append(("cursor", str(start + size)))
                qs = "&".join(f"{quote(k)}={quote(v)}" for k, v in nxt)
                headers["Link"] = f'<{hub.endpoint}{path}?{qs}>; rel="next"'
            self._json(200, items[start:start + size], headers)

        def _info(self, rid: str, rev: str, q: dict) -> None:
            if not (repo := self._repo(rid)) or not (sha := self._rev(repo, rev)):
                return
            blobs = (q.get("blobs") or ["false"])[0].lower() == "true"
            expand = q.get("expand", []) + q.get("expand[]", [])
            self._json(200, model_info_json(repo, sha, blobs, expand))

        def _tree(self, rid: str, rev: str, sub: str, q: dict) -> None:
            if not (repo := self._repo(rid)) or not (sha := self._rev(repo, rev)):
                return
            recursive = (q.get("recursive") or ["false"])[0].lower() == "true"
            entries, dirs = [], set()
            base = f"{sub}/" if sub else ""
            for f in sorted(repo.files.values(), key=lambda f: f.path):
                if not f.path.startswith(base):
                    continue
                rest = f.path[len(base):]
                parts = rest.split("/")
                for depth in range(1, len(parts)):  # directory entries on the way down
                    d = base + "/".join(parts[:depth])
                    if d not in dirs and (recursive or depth == 1):
                        dirs.add(d)
                        entries.append({"type": "directory", "oid": _oid(rid, d, "tree"),
                                        "size": 0, "path": d})
                if len(parts) > 1 and not recursive:
                    continue
                e = {"type": "file", "oid": f.oid, "size": f.size, "path": f.path}
                if f.lfs_sha256:
                    e["lfs"] = {"oid": f.lfs_sha256, "size": f.size, "pointerSize": 135}
                entries.append(e)
            if sub and not entries:
                return self._error(404, "EntryNotFound", f"{sub} does not exist on {sha}")
            self._paged(entries, q, urlsplit(self.path).path)

        def _resolve(self, rid: str, rev: str, rel: str) -> None:
            if not (repo := self._repo(rid)) or not (sha := self._rev(repo, rev)):
                return
            if not self._gate(repo):
                return
            f = repo.files.get(rel)
            if f is None:
                return self._error(404, "EntryNotFound", "Entry not found",
                                   {"X-Repo-Commit": sha})
            common = {"X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
            if f.lfs_sha256:
                location = f"{hub.cdn}/lfs-cdn/{f.lfs_sha256}?X-Amz-Signature=fake"
                return self._send(302, b"", common | {
                    "Location": location, "ETag": f'"{f.oid}"',
                    "X-Linked-Etag": f'"{f.lfs_sha256}"', "X-Linked-Size": str(f.size)})
            self._send(200, f.content, common | {"ETag": f'"{f.oid}"'},
                       content_type="application/octet-stream")

        def _stream_whole(self, f, sha256: str) -> None:
            self.send_response(200)
            for k, v in {"Content-Length": str(f.size), "ETag": f'"{sha256}"',
                         "Content-Type": "application/octet-stream"}.items():
                self.send_header(k, v)
            self.end_headers()
            for start in range(0, f.size, 1 << 20):
                self.wfile.write(f.read(start, min(start + (1 << 20), f.size) - 1))

        def _cdn(self, sha256: str) -> None:
            found = [f for r in hub.repos.values() for f in r.files.values()
                     if f.lfs_sha256 == sha256]
            if not found:
                return self._send(404, b"NoSuchKey", content_type="text/plain")
            f = found[0]
            rng = self.headers.get("Range")
            if rng is None:
                # Weight bodies are virtual (their real header, then zeros): only a hub made
                # with allow_downloads=True (the download gate's tests) serves one whole, so
                # metadata-only code that fetched weights would fail loudly.
                if not hub.allow_downloads:
                    return self._send(403, b"byte ranges only", content_type="text/plain")
                return self._stream_whole(f, sha256)
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            start = int(m[1])
            end = min(int(m[2]) if m[2] else f.size - 1, f.size - 1)
            if start >= f.size:
                return self._send(416, b"", {"Content-Range": f"bytes */{f.size}"})
            body = f.read(start, end)
            self._send(206, body, {"Content-Range": f"bytes {start}-{end}/{f.size}",
                                   "ETag": f'"{sha256}"', "Accept-Ranges": "bytes"},
                       content_type="application/octet-stream")

    return Handler
