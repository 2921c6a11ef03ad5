"""The HTTP face of the fake: the Kubernetes REST API, discovery, and /_fake/ admin.

Routes:
  /version, /api, /apis, /api/v1, /apis/<group>[/<version>]   discovery (legacy, not aggregated)
  /openapi/v2 (protobuf or JSON), /openapi/v3[/<group-version>] the schemas (openapi.py)
  /api/v1/... and /apis/<group>/<version>/...                  resources, namespaced or cluster-wide:
      [namespaces/<ns>/]<plural>[/<name>[/<subresource>]]
      get, list (limit/continue, label and field selectors), watch (bookmarks, 410 Gone),
      create (dryRun), update, patch (merge, strategic treated as merge, json-patch),
      delete (propagationPolicy, preconditions, gracePeriodSeconds), deletecollection,
      pods/log, pods/eviction, <resource>/status, pods/exec and pods/portforward (streams.py)
  /_fake/...                                                   the admin API (see the package docstring)

kubectl's `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` gets meta.k8s.io/v1
Tables (tables.py) for get, list and watch.
"""

from __future__ import annotations

import copy
import functools
import json
import selectors
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from tests.fakes.http import LoopbackServer
from tests.fakes.kube import crd, discovery, openapi, streams
from tests.fakes.kube.common import (
    ApiError,
    fields_match,
    labels_match,
    now_ns,
    parse_label_selector,
    parse_rfc3339_ns,
    rfc3339,
    status_body,
)
from tests.fakes.kube.faults import FaultRule
from tests.fakes.kube.resources import VISIBILITY_GROUP, Resource
from tests.fakes.kube.store import Gone

if TYPE_CHECKING:
    from tests.fakes.kube.cluster import FakeKube

TABLE_ACCEPT = "as=Table"


class ApiServer(LoopbackServer):
    """The loopback server, able to refuse or stall connections on purpose."""

    def __init__(self, kube: FakeKube):
        handler = type("Handler", (Handler,), {"kube": kube})
        super().__init__(handler)
        self.port = self.server_address[1]
        self._lock = threading.Lock()
        self._refuse_until = 0.0
        self._stall_until = 0.0
        self._closed = False
        self._conns: set[socket.socket] = set()

    # --- connection faults --------------------------------------------------------------------
    def refuse(self, seconds: float) -> None:
        with self._lock:
            self._refuse_until = time.monotonic() + seconds
            self.socket.close()
            for conn in list(self._conns):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stall(self, seconds: float) -> None:
        with self._lock:
            self._stall_until = time.monotonic() + seconds

    def restore(self) -> None:
        with self._lock:
            self._refuse_until = self._stall_until = 0.0

    def wait_while_stalled(self) -> None:
        while time.monotonic() < self._stall_until and not self._closed:
            time.sleep(0.05)

    def _reopen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(self.request_queue_size)
        self.socket = sock

    # --- the accept loop ----------------------------------------------------------------------
    def serve(self) -> None:
        while not self._closed:
            with self._lock:
                refusing = time.monotonic() < self._refuse_until
                if not refusing and self.socket.fileno() == -1:
                    self._reopen()
                stalled = time.monotonic() < self._stall_until
            if refusing or stalled:
                time.sleep(0.05)
                continue
            try:
                # A selector, not select.select: that refuses a descriptor past 1024, and a
                # test process that has opened many files (streaming's shared memory) gets one.
                with selectors.DefaultSelector() as selector:
                    selector.register(self.socket, selectors.EVENT_READ)
                    ready = selector.select(0.1)
            except (OSError, ValueError):  # the socket was closed under us (refuse): reopened above
                time.sleep(0.05)
                continue
            if ready:
                self._handle_request_noblock()

    def process_request(self, request, client_address) -> None:
        with self._lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            for conn in list(self._conns):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.server_close()


class LostResponse(Exception):
    """Raised to drop the connection instead of answering."""


class Handler(BaseHTTPRequestHandler):
    kube: FakeKube
    protocol_version = "HTTP/1.1"
    # One write per response and no Nagle delay: otherwise each request waits ~40 ms for an ACK.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet
        return

    # --- plumbing -----------------------------------------------------------------------------
    def send_json(self, code: int, body: Any) -> None:
        self.send_bytes(code, "application/json", json.dumps(body).encode())

    def send_bytes(self, code: int, content_type: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def drop_connection(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def read_body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(400, "BadRequest", "the request body is not valid JSON") from None

    def do_GET(self) -> None:
        self.dispatch("GET")

    def do_POST(self) -> None:
        self.dispatch("POST")

    def do_PUT(self) -> None:
        self.dispatch("PUT")

    def do_PATCH(self) -> None:
        self.dispatch("PATCH")

    def do_DELETE(self) -> None:
        self.dispatch("DELETE")

    # --- routing ------------------------------------------------------------------------------
    def dispatch(self, method: str) -> None:
        self.server.wait_while_stalled()
        url = urlparse(self.path)
        q = {key: vals[-1] for key, vals in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        try:
            body = self.read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else None
            if parts and parts[0] == "_fake":
                from tests.fakes.kube.admin import handle_admin

                return handle_admin(self, method, parts[1:], body)
            if method == "GET" and parts[:1] == ["openapi"]:
                return self.send_bytes(*openapi.answer(self.kube.registry, parts, self.headers.get("Accept") or ""))
            answer = discovery.answer(self.kube.registry, parts) if method == "GET" else None
            if answer is not None:
                return self.send_json(*answer)
            route = self.route(parts)
            if route is None:
                return self.send_json(
                    404, status_body(404, "NotFound", "the server could not find the requested resource")
                )
            strict = crd.STRICT.set(q.get("fieldValidation") == "Strict")
            try:
                self.resource_request(method, q, body, *route)
            finally:
                crd.STRICT.reset(strict)
        except LostResponse:
            self.drop_connection()
        except ApiError as e:
            self.send_json(e.code, e.body())

    def route(self, parts: list[str]) -> tuple[Resource, str | None, str | None, str | None] | None:
        """(resource, namespace or None, name, subresource) of a resource URL."""
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        registry = self.kube.registry
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces" and registry.lookup(group, version, rest[2]):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        res = registry.lookup(group, version, rest[0])
        if res is None or (ns is not None and not res.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in res.subresources and not (res.kind == "Pod" and sub == "eviction"):
            return None
        if not res.namespaced:
            ns = ""
        return res, ns, name, sub

    def resource_request(
        self,
        method: str,
        q: dict[str, str],
        body: Any,
        res: Resource,
        ns: str | None,
        name: str | None,
        sub: str | None,
    ) -> None:
        k = self.kube
        watch = q.get("watch") in ("true", "1")
        if method == "GET":
            verb = "watch" if watch else ("get" if name else "list")
        else:
            verb = {
                "POST": "create",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection",
            }[method]
        if sub == "log":
            verb = "log"
        if sub in ("exec", "portforward"):
            if method not in ("GET", "POST"):
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            with k.lock:
                k.requests.append((method, res.kind, sub))
            return streams.serve(self, ns, name, sub, parse_qs(urlparse(self.path).query))
        if name is None and verb in ("update", "patch"):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        with k.lock:
            k.requests.append((method, res.kind, verb))
        selector = (parse_qs(urlparse(self.path).query).get("labelSelector") or [""])[0]
        rule = k.faults.take(verb, res.plural, name, selector)
        if rule is not None:
            if rule.delay:
                time.sleep(rule.delay)
            if rule.status is not None and not rule.after_commit:
                return self.fault_answer(rule, verb)
            if rule.lose_response and verb in ("watch", "log"):
                raise LostResponse()
        table = TABLE_ACCEPT in (self.headers.get("Accept") or "")
        store = k.store
        if verb == "log":
            return self.pod_log(ns, name, q)
        if res.group == VISIBILITY_GROUP:
            if verb != "get" or sub != "pendingworkloads" or k.kueue is None:
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            return self.answer(rule, 200, k.kueue.pending_workloads(res, ns, name, q))
        out = functools.partial(served_as, res)
        if body is not None and verb in ("create", "update", "patch") and not res.storage:
            body = stored_as(res, body, whole=verb != "patch")
        if verb == "watch":
            return self.watch(res, ns, q, table)
        if verb == "get":
            obj = out(store.get(res.kind, ns, name))
            return self.answer(rule, 200, self.tables.one(res, obj) if table else obj)
        if verb == "list":
            as_metadata = METADATA_LIST in (self.headers.get("Accept") or "")
            with k.lock:
                k.lists.append(
                    {
                        "kind": res.kind,
                        "labelSelector": q.get("labelSelector"),
                        "limit": int(q["limit"]) if q.get("limit") else None,
                        "continue": bool(q.get("continue")),
                        "metadataOnly": as_metadata,
                    }
                )
            items, rv, token, rest = store.list_page(
                res.kind,
                ns,
                q.get("labelSelector"),
                q.get("fieldSelector"),
                limit=int(q.get("limit") or 0),
                token=q.get("continue"),
            )
            if q.get("resourceVersion") and q.get("resourceVersionMatch") == "Exact":
                store.check_version(int(q["resourceVersion"]))
            meta: dict[str, Any] = {"resourceVersion": rv}
            if token:
                meta.update({"continue": token, "remainingItemCount": rest})
            items = [out(o) for o in items]
            if table:
                return self.answer(rule, 200, self.tables.table(res, items, meta))
            if as_metadata:  # what a real server answers to as=PartialObjectMetadataList
                return self.answer(
                    rule,
                    200,
                    {
                        "kind": "PartialObjectMetadataList",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": meta,
                        "items": [
                            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
                            for o in items
                        ],
                    },
                )
            return self.answer(
                rule, 200, {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": items}
            )
        if body is None and verb in ("create", "update", "patch"):
            raise ApiError(400, "BadRequest", "the request body is empty")
        if verb == "create":
            if res.kind == "Pod" and sub == "eviction":
                k.kubelet.evict(ns, name, "EvictionByEvictionAPI", "Eviction API: evicting")
                k.store.delete("Pod", ns, name, {})
                return self.answer(
                    rule, 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                )
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the request body must be an object")
            want_ns = (body.get("metadata") or {}).get("namespace")
            if res.namespaced and want_ns and want_ns != ns:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            if q.get("dryRun") == "All":
                return self.answer(rule, 201, out(self.dry_run_create(res, ns, body)))
            return self.answer(rule, 201, out(store.create(res.kind, ns, body)))
        if verb == "update":
            return self.answer(rule, 200, out(store.replace(res.kind, ns, name, body, status_only=sub == "status")))
        if verb == "patch":
            ctype = self.headers.get("Content-Type", "")
            if "apply-patch" in ctype:
                raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported by the fake")
            if "json-patch" in ctype:
                body = stored_as(res, json_patch(out(store.get(res.kind, ns, name)), body), whole=True)
                return self.answer(rule, 200, out(store.replace(res.kind, ns, name, body, status_only=sub == "status")))
            return self.answer(rule, 200, out(store.patch(res.kind, ns, name, body, status_only=sub == "status")))
        opts = dict(body or {})
        for key in ("propagationPolicy", "gracePeriodSeconds"):
            if q.get(key):
                opts[key] = int(q[key]) if key == "gracePeriodSeconds" else q[key]
        if verb == "delete":
            return self.answer(rule, 200, out(store.delete(res.kind, ns, name, opts)))
        items, rv = store.list(res.kind, ns, q.get("labelSelector"), q.get("fieldSelector"))
        for it in items:
            try:
                store.delete(res.kind, it["metadata"].get("namespace", ""), it["metadata"]["name"], opts)
            except ApiError:
                pass
        return self.answer(
            rule,
            200,
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.api_version,
                "metadata": {"resourceVersion": rv},
                "items": [out(o) for o in items],
            },
        )

    def answer(self, rule: FaultRule | None, code: int, body: Any) -> None:
        if rule is not None and rule.lose_response:
            raise LostResponse()
        if rule is not None and rule.after_commit:
            return self.send_json(rule.status, status_body(rule.status, None, rule.message))
        self.send_json(code, body)

    def fault_answer(self, rule: FaultRule, verb: str) -> None:
        if verb == "watch" and rule.status == 410:
            self.start_stream("application/json")
            err = status_body(410, "Expired", rule.message or f"too old resource version: 1 ({self.kube.rv})")
            self.chunk((json.dumps({"type": "ERROR", "object": err}) + "\n").encode())
            return self.end_stream()
        self.send_json(rule.status, status_body(rule.status, None, rule.message))

    def dry_run_create(self, res: Resource, ns: str, body: dict) -> dict:
        """Admission without persisting, as dryRun=All does."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("name", meta.get("generateName", "") + "dryrun")
        meta.update(namespace=ns, uid="00000000-0000-0000-0000-000000000000", creationTimestamp=rfc3339())
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        admit = self.kube.store.admit.get(res.kind)
        if admit:
            admit(obj, None)
        return obj

    @property
    def tables(self):
        from tests.fakes.kube import tables

        return tables

    # --- watch --------------------------------------------------------------------------------
    def watch(self, res: Resource, ns: str | None, q: dict[str, str], table: bool) -> None:
        k, store = self.kube, self.kube.store
        reqs = parse_label_selector(q.get("labelSelector"))
        fields = q.get("fieldSelector")
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1") and not table
        initial_events = q.get("sendInitialEvents") in ("true", "1")
        rv_text = q.get("resourceVersion") or ""
        self.start_stream("application/json")
        first = True

        def send(type_: str, obj: dict) -> None:
            nonlocal first
            if type_ not in ("ERROR", "BOOKMARK"):
                obj = served_as(res, obj)
            if table and type_ != "ERROR":
                obj = self.tables.table(
                    res, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion")}, headers=first
                )
                first = False
            self.chunk((json.dumps({"type": type_, "object": obj}) + "\n").encode())

        def bookmark(rv: int, end_of_initial: bool = False) -> None:
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if end_of_initial:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            send("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta})

        try:
            with store.lock:
                try:
                    if rv_text in ("", "0") or initial_events:
                        pending = [
                            ("ADDED", copy.deepcopy(o))
                            for (kk, n, _), o in sorted(store.objects.items())
                            if kk == res.kind
                            and (ns is None or n == ns)
                            and labels_match(o["metadata"].get("labels") or {}, reqs)
                            and fields_match(o, fields)
                        ]
                        pos = store.rv
                    else:
                        pos = int(rv_text)
                        store.check_version(pos)
                        pending = []
                except Gone as e:
                    send("ERROR", e.body())
                    return self.end_stream()
            for type_, obj in pending:
                send(type_, obj)
            if initial_events and bookmarks:
                bookmark(pos, end_of_initial=True)
            quiet_since = time.monotonic()
            while not k._stop.is_set():
                with store.lock:
                    try:
                        out = store.events_after(pos, res.kind, ns, reqs, fields)
                    except Gone as e:
                        out = None
                        gone = e
                    if out is None:
                        send("ERROR", gone.body())
                        break
                    pos = store.rv
                    if not out:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            if bookmarks:
                                bookmark(pos)
                            break
                        if bookmarks and time.monotonic() - quiet_since >= k.bookmark_seconds:
                            bookmark(pos)
                            quiet_since = time.monotonic()
                        store.changed.wait(min(left, 0.25))
                        continue
                for type_, obj in out:
                    send(type_, obj)
                quiet_since = time.monotonic()
            self.end_stream()
        except (BrokenPipeError, ConnectionResetError):
            return

    # --- pods/log -----------------------------------------------------------------------------
    def pod_log(self, ns: str, name: str, q: dict[str, str]) -> None:
        k = self.kube
        with k.lock:
            pod = k.objects.get(("Pod", ns, name))
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found')
            names = [c["name"] for g in ("initContainers", "containers") for c in pod["spec"].get(g) or []]
            container = q.get("container")
            if container is None:
                if len(pod["spec"]["containers"]) > 1:
                    raise ApiError(
                        400,
                        "BadRequest",
                        f"a container name must be specified for pod {name}, choose "
                        f"one of: [{' '.join(c['name'] for c in pod['spec']['containers'])}]",
                    )
                container = pod["spec"]["containers"][0]["name"]
            if container not in names:
                raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
            c = k.kubelet.container(pod, container)
            previous = q.get("previous") in ("true", "1")
            if previous and (c is None or c.previous is None):
                raise ApiError(
                    400, "BadRequest", f'previous terminated container "{container}" in pod "{name}" not found'
                )
            if c is None or c.proc is None:
                group = (
                    "initContainerStatuses"
                    if container not in [x["name"] for x in pod["spec"]["containers"]]
                    else "containerStatuses"
                )
                state = next(
                    (cs.get("state") or {} for cs in pod["status"].get(group) or [] if cs.get("name") == container), {}
                )
                waiting = state.get("waiting") or {}
                reason = waiting.get("reason") or (
                    "PodInitializing" if pod["spec"].get("initContainers") else "ContainerCreating"
                )
                raise ApiError(
                    400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: {reason}'
                )
            follow = q.get("follow") in ("true", "1")
            stamps = q.get("timestamps") in ("true", "1")
            floor = None
            if q.get("sinceSeconds"):
                floor = now_ns() - int(q["sinceSeconds"]) * 1_000_000_000
            elif q.get("sinceTime"):
                try:
                    floor = parse_rfc3339_ns(q["sinceTime"])
                except ValueError as e:
                    raise ApiError(400, "BadRequest", str(e)) from None
            tail = int(q["tailLines"]) if q.get("tailLines") else None
            limit_bytes = int(q["limitBytes"]) if q.get("limitBytes") else None
            drop_after = k.faults.take_log_drop(follow)
            if previous:
                follow = False
            lines = list(c.previous if previous else c.lines)
            pos = len(lines)
        if floor is not None:
            lines = [ln for ln in lines if ln[0] >= floor]
        if tail is not None:
            lines = lines[-tail:] if tail else []
        self.start_stream("text/plain")
        sent = sent_bytes = 0
        try:
            batch = lines
            while True:
                for stamp, text in batch:
                    if drop_after is not None and sent >= drop_after:
                        # Close mid-stream without the final chunk: a dropped connection.
                        return self.drop_connection()
                    prefix = f"{rfc3339(stamp, nano=True)} " if stamps else ""
                    if stamps and k.faults.take_garbled_stamp():
                        prefix = "2024-13-01T00:00:00Z "
                    data = f"{prefix}{text}\n".encode()
                    if limit_bytes is not None and sent_bytes + len(data) > limit_bytes:
                        self.chunk(data[: limit_bytes - sent_bytes])
                        return self.end_stream()
                    self.chunk(data)
                    sent += 1
                    sent_bytes += len(data)
                if not follow:
                    break
                with k.lock:
                    while (
                        len(c.lines) <= pos and not c.done and not k._stop.is_set() and ("Pod", ns, name) in k.objects
                    ):
                        k.changed.wait(0.5)
                    batch = c.lines[pos:]
                    pos = len(c.lines)
                    if not batch and (c.done or ("Pod", ns, name) not in k.objects or k._stop.is_set()):
                        break
            self.end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            return


METADATA_LIST = "as=PartialObjectMetadataList"
"""In a list's Accept header: the items' metadata alone (kubectl and metadata informers ask so)."""


def served_as(res: Resource, obj: dict) -> dict:
    """A stored object as the version the request named (Kueue's v1beta1 is converted)."""
    if res.storage or not res.crd:
        return obj
    from tests.fakes.kube import kueue_api

    return kueue_api.convert(obj, res.kind, res.version)


def stored_as(res: Resource, body: Any, *, whole: bool) -> Any:
    """A request body in a served, non-stored version, as the stored version: a whole object
    is first decoded with its own version's schema (defaults, pruning), a patch is not."""
    if res.storage or not res.crd or not isinstance(body, dict):
        return body
    from tests.fakes.kube import kueue_api

    if whole:
        kueue_api.decode(res, body)
    return kueue_api.convert(body, res.kind, kueue_api.STORAGE)


def json_patch(obj: dict, ops: list[dict]) -> dict:
    """RFC 6902 add, remove, replace and test."""
    doc = copy.deepcopy(obj)
    for op in ops:
        path = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = doc
        for p in path[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = path[-1] if path else ""
        try:
            if op["op"] == "test":
                have = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if have != op["value"]:
                    raise ApiError(422, "Invalid", f"the server rejected our request: test failed at {op['path']}")
            elif op["op"] == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif isinstance(parent, list):
                if op["op"] == "add":
                    parent.insert(len(parent) if last == "-" else int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                if op["op"] == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", f"the server rejected our request: {op['path']} is missing")
                parent[last] = op["value"]
        except (KeyError, IndexError, ValueError):
            raise ApiError(422, "Invalid", f"the server rejected our request: cannot apply {op}") from None
    return doc
