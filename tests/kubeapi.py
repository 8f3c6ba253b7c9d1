"""A small fake Kubernetes API server over real HTTP on 127.0.0.1, for tests of the
prefect-kubernetes worker (no kube-apiserver can be installed here: shared/notes/prefect.md).

It speaks the wire format the real `kubernetes` / `kubernetes_asyncio` clients read: discovery
(/version, /api, /apis, /api/v1, /apis/batch/v1), namespaces, pods (get, list, logs), events,
secrets and batch/v1 jobs: create (generateName -> a name, 409 on a duplicate, 404 in a missing
namespace), get, list with label and field selectors, merge patch, replace, delete (with the
Job's pods unless orphaned), `Status` bodies for errors, bearer-token auth, and a one-shot watch
(`?watch=true`: the matching objects as JSON lines, then the stream closes).

A stand-in job controller makes each created Job's pod at once, already finished: the pod is
Succeeded (Failed with `pod_succeeds=False`) with its container terminated, events are recorded,
and the Job's status on the next read says succeeded=1 (failed=1) with a Complete (Failed)
condition. The create response itself has the empty status a real API server returns.

`created` holds every object a client created, as stored (kind, apiVersion, name filled in);
`requests` holds (method, path, query) of every request."""

from __future__ import annotations

import base64
import copy
import json
import re
import secrets
import threading
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from tests.localserver import LocalServer

# (group, version, plural) -> (kind, namespaced). The core group is "".
RESOURCES = {
    ("", "v1", "namespaces"): ("Namespace", False),
    ("", "v1", "pods"): ("Pod", True),
    ("", "v1", "events"): ("Event", True),
    ("", "v1", "secrets"): ("Secret", True),
    ("batch", "v1", "jobs"): ("Job", True),
}
# Characters the API server uses for generateName suffixes (no vowels, no look-alikes).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_PATH = re.compile(
    r"^/(?:api/(?P<cv>v1)|apis/(?P<group>[^/]+)/(?P<gv>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+)(?=/))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>status|log))?$")


class ApiError(Exception):
    """An error answered as a Kubernetes `Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": message, "reason": reason, "details": details or {},
                     "code": code}
        self.code = code


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _suffix() -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


def _merge(target: dict, patch: dict) -> dict:
    """JSON merge patch (RFC 7386); strategic merge patches are read the same way, which is
    right for the maps the worker patches (metadata, labels, ownerReferences as a whole)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _encode_secret(obj: dict) -> dict:
    """The API server stores a Secret's stringData base64-encoded in data, and drops it."""
    plain = obj.pop("stringData", None) or {}
    obj["data"] = {**(obj.get("data") or {}),
                   **{k: base64.b64encode(v.encode()).decode() for k, v in plain.items()}}
    return obj


def _split_selector(text: str) -> list[str]:
    """Split on commas outside `in (a,b)` parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def label_match(labels: dict, selector: str) -> bool:
    """Equality (=, ==, !=), set (in, notin) and existence (k, !k) label selectors."""
    for term in _split_selector(selector):
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term):
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (op == "in") != (key in labels and labels[key] in vals):
                return False
        elif "!=" in term:
            key, val = term.split("!=", 1)
            if labels.get(key.strip()) == val.strip():
                return False
        elif "=" in term:
            key, val = re.split(r"==?", term, maxsplit=1)
            if labels.get(key.strip()) != val.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def field_match(obj: dict, selector: str) -> bool:
    """Field selectors on dotted paths (metadata.name, involvedObject.name, status.phase)."""
    for term in _split_selector(selector):
        neg = "!=" in term
        path, val = re.split(r"!=|==?", term, maxsplit=1)
        cur = obj
        for part in path.strip().split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if (str(cur if cur is not None else "") == val.strip()) == neg:
            return False
    return True


class FakeKube(LocalServer):
    """The fake API server. Use as a context manager; `url` is its address."""

    def __init__(self, token: str | None = "fake-token", pod_succeeds: bool = True,
                 pod_log: str = "fake pod {name}: completed\n"):
        self.token = token
        self.pod_succeeds = pod_succeeds
        self.pod_log = pod_log
        self.created: list[dict] = []
        self.requests: list[tuple[str, str, str]] = []
        self._store: dict[tuple[str, str, str], dict] = {}  # (plural, namespace, name) -> obj
        self._rv = 0
        self._lock = threading.RLock()
        for ns in ("default", "kube-system"):
            self._put("namespaces", "", self._stamp({"metadata": {"name": ns}}, "", "v1",
                                                    "namespaces", ""))
        self._serve(_handler(self))
        self.url = f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig whose current context is this server (plain HTTP, bearer token)."""
        user = {"token": self.token} if self.token else {}
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
               "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
               "users": [{"name": "fake", "user": user}],
               "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake",
                                                         "namespace": "default"}}]}
        path.write_text(json.dumps(cfg, indent=2))  # JSON is YAML: the loaders read it
        return path

    def objects(self, plural: str, namespace: str | None = None) -> list[dict]:
        """Stored objects of a resource (copies), optionally in one namespace."""
        with self._lock:
            return [copy.deepcopy(o) for (p, ns, _), o in self._store.items()
                    if p == plural and namespace in (None, ns)]

    def created_of(self, kind: str) -> list[dict]:
        return [o for o in self.created if o.get("kind") == kind]

    # --- storage -----------------------------------------------------------------------

    def _put(self, plural: str, ns: str, obj: dict) -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._store[(plural, ns, obj["metadata"]["name"])] = obj
        return obj

    def _stamp(self, obj: dict, group: str, version: str, plural: str, ns: str) -> dict:
        """What the API server fills in on create."""
        kind = RESOURCES[(group, version, plural)][0]
        obj["kind"] = kind
        obj["apiVersion"] = f"{group}/{version}" if group else version
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", f"{kind} is invalid: metadata.name: Required "
                               "value: name or generateName is required")
            meta["name"] = meta["generateName"] + _suffix()
        if ns:
            meta["namespace"] = ns
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        obj.setdefault("status", {})  # clients expect an object, never null
        return obj

    def _get(self, plural: str, ns: str, name: str, group: str) -> dict:
        obj = self._store.get((plural, ns, name))
        if obj is None:
            what = f"{plural}.{group}" if group else plural
            raise ApiError(404, "NotFound", f'{what} "{name}" not found',
                           {"name": name, "group": group, "kind": plural})
        return obj

    def create(self, group: str, version: str, plural: str, ns: str, body: dict) -> dict:
        with self._lock:
            if ns:
                self._get("namespaces", "", ns, "")
            obj = self._stamp(copy.deepcopy(body), group, version, plural, ns)
            name = obj["metadata"]["name"]
            if (plural, ns, name) in self._store:
                what = f"{plural}.{group}" if group else plural
                raise ApiError(409, "AlreadyExists", f'{what} "{name}" already exists',
                               {"name": name, "group": group, "kind": plural})
            if plural == "jobs":
                self._default_job(obj)
            if plural == "secrets":
                _encode_secret(obj)
            self._put(plural, ns, obj)
            self.created.append(copy.deepcopy(obj))
            answer = copy.deepcopy(obj)
            if plural == "jobs":
                self._run_job(obj)
            return answer

    def delete(self, plural: str, ns: str, name: str, group: str, policy: str | None) -> dict:
        with self._lock:
            obj = self._get(plural, ns, name, group)
            del self._store[(plural, ns, name)]
            uid = obj["metadata"]["uid"]
            if policy in ("Foreground", "Background"):  # dependents go too; Orphan keeps them
                for key, dep in list(self._store.items()):
                    if any(r.get("uid") == uid for r in dep["metadata"].get("ownerReferences",
                                                                             [])):
                        del self._store[key]
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "group": group, "kind": plural, "uid": uid}}

    # --- the stand-in job controller and kubelet ------------------------------------------

    @staticmethod
    def _default_job(job: dict) -> None:
        """The selector and pod labels the API server adds to a Job on create."""
        meta, uid = job["metadata"], job["metadata"]["uid"]
        selector = {"batch.kubernetes.io/controller-uid": uid}
        spec = job.setdefault("spec", {})
        spec.setdefault("selector", {"matchLabels": selector})
        tmpl_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        tmpl_meta["labels"] = {**tmpl_meta.get("labels", {}), **selector,
                               "controller-uid": uid, "job-name": meta["name"],
                               "batch.kubernetes.io/job-name": meta["name"]}

    def _run_job(self, job: dict) -> None:
        """Start and finish the Job's one pod; the Job's status shows it from the next read."""
        meta, ns, uid = job["metadata"], job["metadata"]["namespace"], job["metadata"]["uid"]
        tmpl = job["spec"]["template"]
        labels = tmpl["metadata"]["labels"]
        ok = self.pod_succeeds
        spec = copy.deepcopy(tmpl.get("spec", {}))
        spec["nodeName"] = "fake-gpu-node"
        pod = self._stamp({"metadata": {
            "generateName": f"{meta['name']}-", "labels": dict(labels),
            "annotations": dict(tmpl["metadata"].get("annotations", {})),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                 "uid": uid, "controller": True,
                                 "blockOwnerDeletion": True}]},
            "spec": spec}, "", "v1", "pods", ns)
        pod["status"] = self._pod_status(spec, ok)
        self._put("pods", ns, pod)
        for obj, reason, msg in (
                (job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}"),
                (pod, "Scheduled", "Successfully assigned to fake-gpu-node"),
                (pod, "Started", "Started container"),
                (job, "Completed", "Job completed") if ok else
                (job, "BackoffLimitExceeded", "Job has reached the specified backoff limit")):
            self._event(obj, reason, msg, "Warning" if reason == "BackoffLimitExceeded"
                        else "Normal")
        now = _now()
        done = "Complete" if ok else "Failed"
        job["status"] = {"startTime": now, "ready": 0, "active": 0, "terminating": 0,
                         "succeeded" if ok else "failed": 1,
                         "conditions": [{"type": "SuccessCriteriaMet" if ok else "FailureTarget",
                                         "status": "True", "lastProbeTime": now,
                                         "lastTransitionTime": now},
                                        {"type": done, "status": "True", "lastProbeTime": now,
                                         "lastTransitionTime": now}]}
        if ok:
            job["status"]["completionTime"] = now
        self._put("jobs", ns, job)

    def _pod_status(self, spec: dict, ok: bool) -> dict:
        now = _now()
        code = 0 if ok else 1
        return {"phase": "Succeeded" if ok else "Failed", "startTime": now, "hostIP": "10.0.0.2",
                "podIP": "10.1.0.7", "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{
                    "name": c.get("name", "container"), "image": c.get("image", ""),
                    "imageID": "", "ready": False, "restartCount": 0, "started": False,
                    "state": {"terminated": {"exitCode": code, "startedAt": now,
                                             "finishedAt": now,
                                             "reason": "Completed" if ok else "Error"}}}
                    for c in spec.get("containers", [])]}

    def _event(self, obj: dict, reason: str, message: str, type_: str) -> None:
        meta = obj["metadata"]
        ev = self._stamp({"metadata": {"generateName": f"{meta['name']}."},
                          "involvedObject": {"kind": obj["kind"], "name": meta["name"],
                                             "namespace": meta["namespace"],
                                             "uid": meta["uid"],
                                             "apiVersion": obj["apiVersion"]},
                          "reason": reason, "message": message, "type": type_, "count": 1,
                          "firstTimestamp": _now(), "lastTimestamp": _now(),
                          "source": {"component": "fake-kube"}},
                         "", "v1", "events", meta["namespace"])
        self._put("events", meta["namespace"], ev)


# --- HTTP -----------------------------------------------------------------------------------

_DISCOVERY = {
    "/version": {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fake",
                 "gitCommit": "0" * 40, "gitTreeState": "clean",
                 "buildDate": "2024-08-13T07:28:49Z", "goVersion": "go1.22.5", "compiler": "gc",
                 "platform": "linux/amd64"},
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
        "name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}}]},
}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _resource_list(group_version: str, group: str) -> dict:
    rows = [(p, k, n) for (g, _, p), (k, n) in RESOURCES.items() if g == group]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": [{"name": p, "singularName": k.lower(), "namespaced": n, "kind": k,
                           "verbs": _VERBS} for p, k, n in rows]
            + [{"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                "verbs": ["get"]}] * (group == "")}


def _handler(kube: FakeKube):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the clients expect
        disable_nagle_algorithm = True  # headers and body in two writes: no 40 ms ACK wait

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body, content_type: str = "application/json") -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n)) if n else None

        def _handle(self) -> None:
            method = self.command
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            with kube._lock:
                kube.requests.append((method, url.path, url.query))
            body = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
            try:
                if kube.token and self.headers.get("Authorization") != f"Bearer {kube.token}":
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                self._route(method, url.path.rstrip("/") or "/", query, body)
            except ApiError as e:
                self._send(e.code, e.body)

        def _route(self, method: str, path: str, query: dict, body) -> None:
            if method == "GET" and path in _DISCOVERY:
                return self._send(200, _DISCOVERY[path])
            if method == "GET" and path == "/api/v1":
                return self._send(200, _resource_list("v1", ""))
            if method == "GET" and path == "/apis/batch/v1":
                return self._send(200, _resource_list("batch/v1", "batch"))
            m = _PATH.match(path)
            group, version = (m.group("group") or "", m.group("gv") or m.group("cv")) if m \
                else ("", "")
            if not m or (group, version, m.group("plural")) not in RESOURCES:
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource")
            plural, name, sub = m.group("plural"), m.group("name"), m.group("sub")
            ns = m.group("ns") or ""
            namespaced = RESOURCES[(group, version, plural)][1]
            if namespaced and not ns and (name or method != "GET"):
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource")
            self._resource(method, group, version, plural, ns, name, sub, query, body)

        def _resource(self, method, group, version, plural, ns, name, sub, query, body):
            if name is None:
                if method == "POST":
                    return self._send(201, kube.create(group, version, plural, ns, body or {}))
                if method == "GET":
                    return self._list(group, version, plural, ns, query)
            elif method == "GET" and sub == "log":
                with kube._lock:
                    kube._get("pods", ns, name, "")
                text = kube.pod_log.format(name=name)
                if "tailLines" in query:
                    text = "".join(text.splitlines(True)[-int(query["tailLines"]):])
                return self._send(200, text, "text/plain")
            elif method == "GET":
                with kube._lock:
                    return self._send(200, copy.deepcopy(kube._get(plural, ns, name, group)))
            elif method == "DELETE":
                policy = query.get("propagationPolicy") or (body or {}).get("propagationPolicy")
                return self._send(200, kube.delete(plural, ns, name, group, policy))
            elif method in ("PATCH", "PUT"):
                return self._send(200, self._update(plural, ns, name, group, body, method))
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")

        def _update(self, plural, ns, name, group, body, method) -> dict:
            if not isinstance(body, dict):
                raise ApiError(415, "UnsupportedMediaType", "only merge patches are supported")
            with kube._lock:
                obj = kube._get(plural, ns, name, group)
                fixed = {k: obj[k] for k in ("kind", "apiVersion")}
                meta = {k: obj["metadata"][k] for k in ("name", "uid", "creationTimestamp")}
                if method == "PUT":
                    obj = {**copy.deepcopy(body), **fixed}
                    obj.setdefault("status", {})
                else:
                    obj = _merge(copy.deepcopy(obj), body)
                obj.setdefault("metadata", {}).update(meta)
                if ns:
                    obj["metadata"]["namespace"] = ns
                if plural == "secrets":
                    _encode_secret(obj)
                return copy.deepcopy(kube._put(plural, ns, obj))

        def _list(self, group, version, plural, ns, query) -> None:
            kind = RESOURCES[(group, version, plural)][0]
            with kube._lock:
                items = [copy.deepcopy(o) for (p, n, _), o in sorted(kube._store.items())
                         if p == plural and (not ns or n == ns)
                         and label_match(o["metadata"].get("labels", {}),
                                         query.get("labelSelector", ""))
                         and field_match(o, query.get("fieldSelector", ""))]
                rv = str(kube._rv)
            if query.get("watch", "").lower() in ("true", "1"):  # the client sends "True"
                return self._watch(items, query.get("resourceVersion"))
            self._send(200, {"kind": f"{kind}List",
                             "apiVersion": f"{group}/{version}" if group else version,
                             "metadata": {"resourceVersion": rv}, "items": items})

        def _watch(self, items: list[dict], since: str | None) -> None:
            """One-shot: an ADDED event per matching object newer than `since`, then close."""
            if since:
                items = [o for o in items if int(o["metadata"]["resourceVersion"]) > int(since)]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for obj in items:
                line = (json.dumps({"type": "ADDED", "object": obj}) + "\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

        # http.server dispatches on do_<METHOD>; one handler reads self.command.
        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

    return H
