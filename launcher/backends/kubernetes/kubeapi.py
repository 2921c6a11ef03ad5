"""A thin, dict-based layer over the official kubernetes client, and its one exception boundary.

Objects travel as plain dicts (the API's JSON), never as client models: the
status rules and the fake API server in tests speak the same shapes, and large
lists are not turned into thousands of model objects. Requests go through the
client's ApiClient (kubeconfig, auth, TLS) by path, so no generated API class
(and none of the hundreds of models they load: a second of start-up) is
imported. The `kubernetes` package is imported here, and this module is
imported only when a Kubernetes profile is used.

Errors
------
Every failure of the client (an API status, a refused or dropped connection, a
timeout, TLS, a kubeconfig that is missing or wrong) leaves this module as a
`KubeError` (a LauncherError), mapped in one place (`_mapped`), in the manner of
httpx's map_exceptions. Its message names the cluster profile and what was being
done, in one line and never with response headers; its exit code is 2 when the
input is at fault (a kubeconfig, credentials, a manifest the server rejects) and
1 when the server or the network is. Callers branch on `status` (404, 409, 410).

Retries
-------
5xx and connection failures are retried a bounded number of times with jittered
exponential backoff (`RequestRetry`); a 4xx never is, except 429, which is the
server asking for exactly that. A failure that may have committed a create (a
dropped answer, a read timeout, 500/502/504) is retried only when the object
carries a creation token (the `launcher.dev/submission` label): an AlreadyExists
answer to the retry is ours when the stored object carries the same token, and
the create succeeded. Patches guarded by a resourceVersion and deletes are safe
to repeat: a repeat that finds its work done answers 409 or 404.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from launcher import debug
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.errors import (  # noqa: F401 - KubeError is this module's error
    INPUT_STATUSES,
    MAYBE_DONE_STATUSES,
    UNDONE_STATUSES,
    KubeError,
    KubeUnreachable,
)
from launcher.backends.kubernetes.profiles import ClusterProfile
from launcher.backends.kubernetes.reach import LIST_CONNECT_TIMEOUT, kubeconfig_path, read_kubeconfig
from launcher.errors import READ_TIMEOUT, TLS, UNREACHABLE, connection_failure
from launcher.pod.backoff import delay, jittered

WATCH_SECONDS = 60
LOG_READ_TIMEOUT = 3900  # the API server cuts a followed log after an hour
MERGE_PATCH = "application/merge-patch+json"
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
"""The Accept of a list that wants its items' metadata alone (the server may answer whole items)."""


@dataclass(frozen=True)
class ListPage:
    items: list[dict]
    resource_version: str
    token: str | None
    """The continue token of the next page; None on the last."""
    remaining: int | None
    """How many items the pages after this one hold (metadata.remainingItemCount), where told."""


KINDS: dict[str, tuple[str, str]] = {
    # kind -> (API path prefix, plural)
    "Pod": ("/api/v1", "pods"),
    "Service": ("/api/v1", "services"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Secret": ("/api/v1", "secrets"),
    "Event": ("/api/v1", "events"),
    "Job": ("/apis/batch/v1", "jobs"),
    "JobSet": ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets"),
    "Node": ("/api/v1", "nodes"),
    # Kueue's, at the version the cluster serves (kueue.use_served_version sets it per client).
    "Workload": ("/apis/kueue.x-k8s.io/v1beta1", "workloads"),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta1", "localqueues"),
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta1", "clusterqueues"),
    "PendingWorkloads": ("/apis/visibility.kueue.x-k8s.io/v1beta1", "localqueues"),  # .../<queue>/pendingworkloads
}
CLUSTER_SCOPED = {"Node", "ClusterQueue"}


def status_of(e: BaseException) -> int:
    return int(getattr(e, "status", 0) or 0)


@dataclass(frozen=True)
class RequestRetry:
    """How long one try may take, and how often and how patiently a retryable failure is
    tried again."""

    tries: int = 5
    connection_tries: int = 5
    """Tries when the connection itself fails (refused, timed out): a cluster that is down."""
    base_seconds: float = 0.2
    max_seconds: float = 2.0
    connect_timeout: float = 2.0
    read_timeout: float = 60.0

    def delay(self, retry: int) -> float:
        """The jittered wait before retry number `retry` (0-based): `base_seconds`, doubling
        each time up to `max_seconds` (launcher.pod.backoff, the one backoff)."""
        return jittered(delay(retry + 1, self.base_seconds, self.max_seconds))


T = TypeVar("T")
CONFLICT_TRIES = 3


def retry_on_conflict(write: Callable[[], T], *, tries: int = CONFLICT_TRIES) -> T:
    """`write()` again while it answers 409 Conflict (someone wrote the object first), at
    most `tries` times, as client-go's RetryOnConflict: each try must re-read what it
    writes (a compare-and-swap on its resourceVersion). Returns what the successful try
    returned; raises the last conflict when every try had one."""
    left = tries
    while True:
        try:
            return write()
        except KubeError as e:
            left -= 1
            if e.status != 409 or left <= 0:
                raise


DEFAULT_RETRY = RequestRetry()
# One look across every profile (`get runs`): an unreachable cluster must not hold up the
# answer, so its connection failure is not tried again; a 5xx gets one quick second try.
QUICK_RETRY = RequestRetry(
    tries=2,
    connection_tries=1,
    base_seconds=0.1,
    max_seconds=0.1,
    connect_timeout=LIST_CONNECT_TIMEOUT,
    read_timeout=5.0,
)


def _api_message(e: ApiException) -> tuple[str, str]:
    """(message, reason) from the Status body; never the headers str(e) would print."""
    try:
        body = json.loads(e.body or "")  # no body: a ValueError, the fallback below
        message, reason = str(body.get("message") or e.reason or ""), str(body.get("reason") or "")
    except (TypeError, ValueError, AttributeError):
        message, reason = str(getattr(e, "reason", "") or "no message"), ""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip()), reason


def _connection_error(e: BaseException) -> tuple[str, str, bool]:
    """(what happened, reason, was the request maybe sent) for a urllib3/socket failure:
    in launcher.errors' words; only a failure before the request went out was not sent."""
    what, reason = connection_failure(e)
    return what, reason, reason not in UNREACHABLE | {TLS}


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


class KubeApi:
    def __init__(self, profile: ClusterProfile, *, retry: RequestRetry = DEFAULT_RETRY):
        self.profile = profile
        self.namespace = profile.namespace
        self.retry = retry
        self.request_timeout = profile.request_timeout
        """Seconds one request may take, its retries included (kubectl's --request-timeout)."""
        self.kinds = dict(KINDS)
        """Kind -> (path prefix, plural) for this cluster: a CRD's served version may differ."""
        self.served: dict[str, dict | None] = {}
        """Discovery answers by group version, asked once per client (discover_once)."""
        self.client = _api_client(profile)
        self.server = self.client.configuration.host

    def close(self) -> None:
        self.client.close()

    # --- the exception boundary -----------------------------------------------------------
    @contextmanager
    def _mapped(self, doing: str, *, read_timeout: float | None = None) -> Iterator[None]:
        """Turn whatever the client raises into a KubeError that says, in one line, which
        cluster, what we were doing, and what went wrong. `read_timeout`: how long the
        server was given to answer, named when it did not."""
        where = f"cluster {self.profile.name}"
        try:
            yield
        except KubeError:
            raise
        except ApiException as e:
            code = status_of(e)
            if code == 0:  # the client's REST layer wraps a TLS failure as a status-0 ApiException
                lines = str(e.reason or "").splitlines() or ["ConnectionError"]
                tls = lines[0] == "SSLError"
                what = f"TLS failed: {lines[-1]}" if tls else "; ".join(lines)
                raise KubeError(
                    f"{where}: cannot {doing}: {what} ({self.server})",
                    reason="TLS" if tls else lines[0],
                    exit_code=2 if tls else 1,
                    hint="check the certificate-authority in the kubeconfig" if tls else None,
                ) from None
            message, reason = _api_message(e)
            hint = None
            if code in (401, 403):
                hint = f"check your kubeconfig context and your rights in namespace {self.namespace}"
            label = f"{code} {reason or e.reason or ''}".strip()
            said = f": {message}" if message and message not in (reason, e.reason) else ""
            raise KubeError(
                f"{where}: cannot {doing}: {label}{said}",
                status=code,
                reason=reason,
                hint=hint,
                retryable=code in UNDONE_STATUSES | MAYBE_DONE_STATUSES,
                maybe_done=code in MAYBE_DONE_STATUSES,
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            what, reason, maybe_done = _connection_error(e)
            hint = "check the certificate-authority in the kubeconfig" if reason == TLS else None
            if reason == READ_TIMEOUT and read_timeout is not None:
                what = f"the server did not answer within {read_timeout:.3g} s"
                hint = (
                    f"the server takes connections but does not answer; the profile's request_timeout "
                    f"({self.request_timeout:g} s) is how long a request may take"
                )
            # A connection that never got an answer is a cluster away (ClusterUnreachable).
            error = KubeUnreachable if reason in UNREACHABLE else KubeError
            raise error(
                f"{where}: cannot {doing}: {what} ({self.server})",
                reason=reason,
                retryable=True,
                maybe_done=maybe_done,
                exit_code=2 if reason == TLS else 1,
                hint=hint,
            ) from None

    def _call(
        self,
        doing: str,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        token: str | None = None,
        policy: RequestRetry | None = None,
        stream_timeout: float | None = None,
        accept: str = "application/json, */*",
    ) -> Any:
        """One request inside the boundary, retried as the policy allows, all within the
        profile's request_timeout; the urllib3 response, unread. A write that may have
        happened is repeated only with a creation token (see the module docstring).
        `stream_timeout`: a stream's (a watch, a followed log): once its headers came (within
        the deadline), each read of its body may wait this long, since a quiet stream is
        not a stalled server; the caller reconnects when it ends."""
        policy = policy or self.retry
        deadline = time.monotonic() + self.request_timeout
        retry = 0
        while True:
            left = max(deadline - time.monotonic(), 0.001)
            read_timeout = min(policy.read_timeout, left)
            try:
                with self._mapped(doing, read_timeout=read_timeout):
                    resp = self._send(
                        method,
                        path,
                        query,
                        body,
                        content_type,
                        (min(policy.connect_timeout, left), read_timeout),
                        accept,
                    )
                    # The body's reads: a stream's own timeout, else the request's (not what is left of it).
                    _rearm(resp, stream_timeout or min(policy.read_timeout, self.request_timeout))
                    return resp
            except KubeError as e:
                if e.status == 409 and retry > 0 and method == "POST" and token is not None:
                    existing = self._own_object(path, body, token)
                    if existing is not None:
                        return existing  # our earlier try had created it; its answer was lost
                if not e.retryable or (method == "POST" and e.maybe_done and token is None):
                    raise
                tries = policy.tries if e.status else policy.connection_tries
                pause = policy.delay(retry)
                if retry + 1 >= tries or time.monotonic() + pause >= deadline:
                    if retry > 0:
                        e.message += f" (tried {retry + 1} times)"
                    raise
            time.sleep(pause)
            retry += 1

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: tuple[float, float],
        accept: str = "application/json, */*",
    ) -> Any:
        """Through the official client's ApiClient (kubeconfig, auth, TLS) by path: the
        generated per-group API classes would load hundreds of models we never use."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        method, url, headers, body, post = self.client.param_serialize(
            method, path, query_params=params or None, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        resp = self.client.call_api(method, url, headers, body, post, _request_timeout=timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response

    def _own_object(self, path: str, body: dict, token: str) -> Any:
        """After AlreadyExists on a retried create: the stored object, if it carries our token."""
        name = (body.get("metadata") or {}).get("name", "")
        try:
            resp = self._send(
                "GET",
                f"{path}/{quote(name, safe='')}",
                None,
                None,
                "",
                (self.retry.connect_timeout, min(self.retry.read_timeout, self.request_timeout)),
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            return None
        data = resp.data
        resp.release_conn()
        existing = json.loads(data)
        return _Stored(existing) if (existing["metadata"].get("labels") or {}).get(keys.SUBMISSION) == token else None

    def _path(
        self, kind: str, name: str | None = None, sub: str | None = None, *, every_namespace: bool = False
    ) -> str:
        prefix, plural = self.kinds[kind]
        if kind in CLUSTER_SCOPED or every_namespace:
            path = f"{prefix}/{plural}"
        else:
            path = f"{prefix}/namespaces/{quote(self.namespace, safe='')}/{plural}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        return f"{path}/{sub}" if sub else path

    @staticmethod
    def _json(resp: Any) -> Any:
        try:
            return json.loads(resp.data)
        finally:
            resp.release_conn()

    # --- verbs ----------------------------------------------------------------------------
    def discover(self, group_version: str) -> dict | None:
        """The API resource list of a group version (`jobset.x-k8s.io/v1alpha2`), None if not served."""
        try:
            return self._json(self._call(f"discover {group_version}", "GET", f"/apis/{group_version}"))
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def discover_once(self, group_version: str) -> dict | None:
        """discover(), remembered for this client: one look per command is enough."""
        if group_version not in self.served:
            self.served[group_version] = self.discover(group_version)
        return self.served[group_version]

    def get(self, kind: str, name: str, sub: str | None = None) -> dict | None:
        try:
            return self._json(self._call(f"read {kind} {name}", "GET", self._path(kind, name, sub)))
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def list(
        self,
        kind: str,
        *,
        labels: str | None = None,
        fields: str | None = None,
        policy: RequestRetry | None = None,
        every_namespace: bool = False,
    ) -> tuple[list[dict], str]:
        """Items and the list's resourceVersion (where a watch resumes). Of the profile's
        namespace, unless `every_namespace` (or the kind has none, as Node)."""
        body = self._json(
            self._call(
                f"list {kind}s",
                "GET",
                self._path(kind, every_namespace=every_namespace),
                policy=policy,
                query={"labelSelector": labels, "fieldSelector": fields},
            )
        )
        return body.get("items") or [], (body.get("metadata") or {}).get("resourceVersion", "")

    def list_page(
        self,
        kind: str,
        *,
        labels: str | None = None,
        limit: int,
        token: str | None = None,
        metadata_only: bool = False,
        policy: RequestRetry | None = None,
    ) -> ListPage:
        """One page of a list: at most `limit` items after the page whose continue `token`
        this is (None: the first), in the API server's order (by name). Every page of one
        list shows the objects as they were at its first page's resourceVersion; a token
        too old for that is a KubeError 410. `metadata_only` asks for each item's metadata
        alone (PartialObjectMetadataList, what `kubectl get` asks for): a listing that
        chooses its rows by name, labels and creation time reads a few hundred bytes an item."""
        body = self._json(
            self._call(
                f"list {kind}s",
                "GET",
                self._path(kind),
                policy=policy,
                query={"labelSelector": labels, "limit": limit, "continue": token},
                accept=METADATA_ONLY if metadata_only else "application/json, */*",
            )
        )
        meta = body.get("metadata") or {}
        return ListPage(
            body.get("items") or [],
            meta.get("resourceVersion", ""),
            meta.get("continue") or None,
            meta.get("remainingItemCount"),
        )

    def create(self, kind: str, body: dict) -> dict:
        """Create; idempotent when the body carries a creation token (keys.SUBMISSION)."""
        meta = body.get("metadata") or {}
        token = (meta.get("labels") or {}).get(keys.SUBMISSION)
        return self._json(
            self._call(f"create {kind} {meta.get('name', '')}", "POST", self._path(kind), body=body, token=token)
        )

    def patch(self, kind: str, name: str, patch: dict) -> dict:
        # A merge patch is idempotent, and one guarded by a resourceVersion fails with 409 if repeated.
        return self._json(
            self._call(f"update {kind} {name}", "PATCH", self._path(kind, name), body=patch, content_type=MERGE_PATCH)
        )

    def replace(self, kind: str, name: str, body: dict) -> dict:
        return self._json(self._call(f"replace {kind} {name}", "PUT", self._path(kind, name), body=body))

    def delete(self, kind: str, name: str, *, propagation: str = "Background", uid: str | None = None) -> bool:
        """Delete one object; False if it was already gone (a retried delete that had worked included)."""
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._json(self._call(f"delete {kind} {name}", "DELETE", self._path(kind, name), body=body))
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def delete_collection(self, kind: str, labels: str) -> None:
        self._json(
            self._call(
                f"delete {kind}s",
                "DELETE",
                self._path(kind),
                query={"labelSelector": labels},
                body={"propagationPolicy": "Background"},
            )
        )

    def watch(
        self, kind: str, *, labels: str, resource_version: str, stopper: WatchHandle, timeout: int = WATCH_SECONDS
    ) -> Iterator[dict]:
        """Watch events ({type, object}) after resource_version, bookmarks included. An ERROR
        event raises KubeError with its status: 410 (Expired/Gone) means the version is too
        old and the caller lists again. Ends when the server closes the watch."""
        doing = f"watch {kind}s"
        resp = self._call(
            doing,
            "GET",
            self._path(kind),
            stream_timeout=timeout + 15,
            query={
                "labelSelector": labels,
                "resourceVersion": resource_version,
                "watch": True,
                "timeoutSeconds": timeout,
                "allowWatchBookmarks": True,
            },
        )
        stopper.attach(resp)
        try:
            with self._mapped(doing):
                for line in iter_resp_lines(resp):
                    if stopper.stopped:
                        return
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        raise KubeError(
                            f"cluster {self.profile.name}: {doing}: a garbled event",
                            reason="ConnectionBroken",
                            retryable=True,
                        ) from None
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        code = int(status.get("code") or 500)
                        raise KubeError(
                            f"cluster {self.profile.name}: {doing}: {code} {status.get('reason', '')}: "
                            f"{status.get('message', '')}",
                            status=code,
                            reason=str(status.get("reason") or ""),
                            retryable=code >= 500,
                        )
                    yield event
        except KubeError:
            if stopper.stopped:
                return  # we cut the stream ourselves
            raise
        finally:
            stopper.attach(None)
            resp.release_conn()

    # --- WebSocket subresources (podexec.py relays them) ---------------------------------------
    @contextmanager
    def _mapped_stream(self, doing: str) -> Iterator[None]:
        """The boundary for the stream client, which wraps every failure as a status-0
        ApiException whose reason is the text of the WebSocket library's exception."""
        try:
            with self._mapped(doing):
                try:
                    yield
                except ApiException as e:
                    if status_of(e) != 0:
                        raise
                    raise _stream_failure(e) from None
        except KubeError as e:
            if e.status is None and e.reason == "StreamFailed":
                raise KubeError(f"cluster {self.profile.name}: cannot {doing}: {e}", reason=e.reason) from None
            raise

    def _stream_request(self, path: str, params: builtins.list[tuple[str, str]]) -> tuple[str, dict]:
        """The URL and headers (auth) of a WebSocket request, serialized by the ApiClient as
        _send's are: kubernetes.stream's wrapper needs a generated API class (0.7 s to import)."""
        _, url, headers, _, _ = self.client.param_serialize(
            "GET", path, query_params=params, header_params={}, auth_settings=["BearerToken"]
        )
        return url, headers

    def exec_stream(self, pod: str, argv: builtins.list[str], *, tty: bool) -> Any:
        """pods/exec of argv in the pod's main container, stdin, stdout and stderr attached: the
        official client's open WSClient (v5.channel.k8s.io, else v4), binary."""
        from kubernetes.stream import ws_client

        params = [("command", a) for a in argv] + [
            ("container", keys.CONTAINER),
            ("stdin", "true"),
            ("stdout", "true"),
            ("stderr", _query_value(not tty)),
            ("tty", _query_value(tty)),
        ]
        url, headers = self._stream_request(self._path("Pod", pod, "exec"), params)
        with self._mapped_stream(f"exec in pod {pod}"):
            return ws_client.websocket_call(
                self.client.configuration, "GET", url, headers=headers, _preload_content=False, binary=True
            )

    def portforward(self, pod: str, port: int) -> Any:
        """pods/portforward of one port: the client's PortForward (its socket(port) is the
        remote end of one TCP connection)."""
        from kubernetes.stream import ws_client

        url, headers = self._stream_request(self._path("Pod", pod, "portforward"), [("ports", str(port))])
        with self._mapped_stream(f"forward port {port} of pod {pod}"):
            return ws_client.portforward_call(self.client.configuration, "GET", url, headers=headers)

    def pod_log(self, pod: str, **params: Any) -> Any:
        """A streaming log response (urllib3), unread; params are the API's query
        parameters (follow, timestamps, sinceSeconds, previous, tailLines)."""
        return self._call(
            f"read the log of pod {pod}",
            "GET",
            self._path("Pod", pod, "log"),
            query={"container": keys.CONTAINER, **params},
            stream_timeout=LOG_READ_TIMEOUT if params.get("follow") else None,
        )


def _stream_failure(e: ApiException) -> Exception:
    """What a failed WebSocket open said: the API's Status for a refused handshake (whose
    text carries the response headers, never shown), else the connection's failure."""
    text = str(e.reason or "")
    if text.startswith("Handshake status "):
        head, _, body = text.partition(" -+-+- ")
        body = body.rpartition(" -+-+- ")[2]
        words = head.split()
        refused = ApiException(
            status=int(words[2]) if words[2:3] and words[2].isdigit() else 0, reason=" ".join(words[3:]) or None
        )
        refused.body = body or None
        return refused
    if "Errno" in text or "refused" in text.lower():
        return ConnectionRefusedError(text)
    return KubeError(text.splitlines()[0] if text else "the WebSocket failed", reason="StreamFailed")


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class _Stored:
    """An object read back in place of a create's lost answer, shaped like a response."""

    def __init__(self, obj: dict):
        self.data = json.dumps(obj).encode()

    def release_conn(self) -> None:
        return None


class WatchHandle:
    """Lets another thread end a blocking watch at once, by shutting its connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._resp: Any = None
        self.stopped = False

    def attach(self, resp: Any) -> None:
        with self._lock:
            self._resp = resp
            if resp is not None and self.stopped:
                _shutdown(resp)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            if self._resp is not None:
                _shutdown(self._resp)


def _rearm(resp: Any, seconds: float) -> None:
    """Give each later read of the response's body `seconds` (the socket's timeout, which
    urllib3 set to the headers' read timeout)."""
    connection = getattr(resp, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _shutdown(resp: Any) -> None:
    """Unblock a thread reading this response: shut its socket down (close alone does not)."""
    try:
        resp.shutdown()
    except (AttributeError, OSError):
        pass


def _api_client(profile: ClusterProfile) -> Any:
    """An ApiClient for the profile's kubeconfig and context. Every way a kubeconfig can be
    missing or wrong is an input error (exit 2) that names the profile and the file."""
    from kubernetes.config.config_exception import ConfigException

    where = f"cluster {profile.name}"
    path = kubeconfig_path(profile.kubeconfig)
    if path is None:
        try:
            configuration = kubernetes.client.Configuration()
            kubernetes.config.load_incluster_config(client_configuration=configuration)
            configuration.retries = False
            client = kubernetes.client.ApiClient(configuration)
        except ConfigException:
            raise KubeError(
                f"{where}: no kubeconfig found (set kubeconfig in the profile or KUBECONFIG)",
                exit_code=2,
                reason="Kubeconfig",
            ) from None
    else:
        if not os.path.exists(path):
            raise KubeError(f"{where}: kubeconfig not found: {path}", exit_code=2, reason="Kubeconfig")
        try:
            configuration = kubernetes.client.Configuration()
            _load_kubeconfig(path, profile.context, configuration)
            # Retries are ours (above); urllib3's own would repeat a refused connection at once, three times.
            configuration.retries = False
            client = kubernetes.client.ApiClient(configuration)
        except FileNotFoundError as e:
            raise KubeError(
                f"{where}: kubeconfig not found: {e.filename or path}", exit_code=2, reason="Kubeconfig"
            ) from None
        except (ConfigException, ValueError, TypeError, KeyError, AttributeError, OSError) as e:
            # ConfigException for a missing context or user; the others for a file that is not a kubeconfig.
            raise KubeError(
                f"{where}: cannot load the kubeconfig {path}: {_first_line(e)}", exit_code=2, reason="Kubeconfig"
            ) from None
        except Exception as e:  # noqa: BLE001 - yaml errors and the like: still the file's fault
            raise KubeError(
                f"{where}: cannot load the kubeconfig {path}: {type(e).__name__}: {_first_line(e)}",
                exit_code=2,
                reason="Kubeconfig",
            ) from None
    return client


def _load_kubeconfig(path: str, context: str | None, configuration: Any) -> None:
    """Set `configuration` from the kubeconfig at `path` as the client's load_kube_config
    does, from the copy the reachability check already read (reach.read_kubeconfig): the
    same merged structure, whose entries keep the file's path, so that relative
    certificate and exec paths resolve beside the file. A list of files (KUBECONFIG a:b)
    or a file that is not a plain mapping goes to the client's own loader."""
    from kubernetes.config.kube_config import ConfigNode, KubeConfigLoader

    config = read_kubeconfig(path) if os.pathsep not in path else None
    if config is None:
        debug.count(debug.KUBECONFIG_READ, path)
        kubernetes.config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
        return
    merged = ConfigNode(path, {**config, "clusters": [], "contexts": [], "users": []}, path)
    for item in ("clusters", "contexts", "users"):
        for entry in config.get(item, []) or []:
            if not any(known["name"] == entry["name"] for known in merged.value[item]):
                merged.value[item].append(ConfigNode(f"{path}/{entry}", entry, path))
    KubeConfigLoader(config_dict=merged, active_context=context, config_base_path=None).load_and_set(configuration)
