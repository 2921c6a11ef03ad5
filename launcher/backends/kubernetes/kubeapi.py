"""A thin, dict-based layer over the official kubernetes client.

Objects travel as plain dicts (the API's JSON), never as client models: the
status rules and the fake API server in tests speak the same shapes, and large
lists are not turned into thousands of model objects. The `kubernetes` package
is imported here, and this module is imported only when a Kubernetes profile
is used.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from launcher.backends.kubernetes.profiles import ClusterProfile
from launcher.errors import InputError, LauncherError

REQUEST_TIMEOUT = (5, 60)
WATCH_SECONDS = 60
RETRY_STATUSES = {429, 500, 502, 503, 504}
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0)
MERGE_PATCH = "application/merge-patch+json"

_KINDS: dict[str, tuple[str, str]] = {
    # kind -> (api attribute, method suffix)
    "Pod": ("core", "pod"),
    "Service": ("core", "service"),
    "ConfigMap": ("core", "config_map"),
    "Secret": ("core", "secret"),
    "Event": ("core", "event"),
    "Job": ("batch", "job"),
}
# Custom resources: kind -> (group, version, plural), served by CustomObjectsApi.
_CUSTOM: dict[str, tuple[str, str, str]] = {
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
}


def status_of(e: ApiException) -> int:
    return int(getattr(e, "status", 0) or 0)


def message_of(e: ApiException) -> str:
    try:
        return json.loads(e.body).get("message") or str(e.reason)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(e, "reason", "") or e)


class KubeApi:
    def __init__(self, profile: ClusterProfile):
        self.profile = profile
        self.namespace = profile.namespace
        self.client = _api_client(profile)
        self.core = kubernetes.client.CoreV1Api(self.client)
        self.batch = kubernetes.client.BatchV1Api(self.client)
        self.custom = kubernetes.client.CustomObjectsApi(self.client)

    def close(self) -> None:
        self.client.close()

    # --- plumbing -------------------------------------------------------------------------
    def _method(self, verb: str, kind: str) -> Callable[..., Any]:
        if kind in _CUSTOM:
            return self._custom_method(verb, *_CUSTOM[kind])
        api, suffix = _KINDS[kind]
        return getattr(getattr(self, api), f"{verb}_namespaced_{suffix}")

    def _custom_method(self, verb: str, group: str, version: str, plural: str) -> Callable[..., Any]:
        """The built-in kinds' call shapes (name, namespace, ...) over CustomObjectsApi's."""
        fn = getattr(self.custom, f"{verb}_namespaced_custom_object")
        if verb in ("list", "create", "delete_collection"):
            def call(namespace, *args, **kwargs):
                return fn(group, version, namespace, plural, *args, **kwargs)
        else:
            def call(name, namespace, *args, **kwargs):
                return fn(group, version, namespace, plural, name, *args, **kwargs)
        call.__doc__ = fn.__doc__  # the watch reads the return type from it
        return call

    def _call(self, fn: Callable[..., Any], *args: Any, retry_connect: bool = True, **kwargs: Any) -> Any:
        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        for delay in (*RETRY_DELAYS, None):
            try:
                return fn(*args, **kwargs)
            except ApiException as e:
                if status_of(e) not in RETRY_STATUSES or delay is None:
                    raise self._translate(e) from None
            except (urllib3.exceptions.HTTPError, OSError) as e:
                if not retry_connect or delay is None:
                    raise LauncherError(f"cannot reach the API server of cluster {self.profile.name}: "
                                        f"{type(e).__name__}: {e}") from None
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _translate(self, e: ApiException) -> Exception:
        code = status_of(e)
        if code in (401, 403):
            return LauncherError(f"cluster {self.profile.name}: not allowed: {message_of(e)}",
                                 hint=f"check your kubeconfig context and your rights in namespace {self.namespace}")
        return e  # callers handle 404/409/410 themselves

    def _json(self, resp: Any) -> Any:
        try:
            return json.loads(resp.data)
        finally:
            resp.release_conn()

    # --- verbs ----------------------------------------------------------------------------
    def get(self, kind: str, name: str) -> dict | None:
        try:
            return self._json(self._call(self._method("read", kind), name, self.namespace, _preload_content=False))
        except ApiException as e:
            if status_of(e) == 404:
                return None
            raise

    def list(self, kind: str, *, labels: str | None = None, fields: str | None = None) -> tuple[list[dict], str]:
        """Items and the list's resourceVersion (where a watch resumes)."""
        kwargs: dict[str, Any] = {"_preload_content": False}
        if labels:
            kwargs["label_selector"] = labels
        if fields:
            kwargs["field_selector"] = fields
        body = self._json(self._call(self._method("list", kind), self.namespace, **kwargs))
        return body.get("items") or [], (body.get("metadata") or {}).get("resourceVersion", "")

    def create(self, kind: str, body: dict) -> dict:
        # A lost connection may hide a create that happened: never repeat it blindly.
        return self._json(self._call(self._method("create", kind), self.namespace, body,
                                     retry_connect=False, _preload_content=False))

    def patch(self, kind: str, name: str, patch: dict) -> dict:
        return self._json(self._call(self._method("patch", kind), name, self.namespace, patch,
                                     _content_type=MERGE_PATCH, _preload_content=False))

    def replace(self, kind: str, name: str, body: dict) -> dict:
        return self._json(self._call(self._method("replace", kind), name, self.namespace, body,
                                     _preload_content=False))

    def delete(self, kind: str, name: str, *, propagation: str = "Background", uid: str | None = None) -> bool:
        """Delete one object; False if it was already gone."""
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self._json(self._call(self._method("delete", kind), name, self.namespace, body=body,
                                  _preload_content=False))
            return True
        except ApiException as e:
            if status_of(e) == 404:
                return False
            raise

    def delete_collection(self, kind: str, labels: str) -> None:
        self._json(self._call(self._method("delete_collection", kind), self.namespace, label_selector=labels,
                              body={"propagationPolicy": "Background"}, _preload_content=False))

    def watch(self, kind: str, *, labels: str, resource_version: str, stopper: WatchHandle,
              timeout: int = WATCH_SECONDS) -> Iterator[dict]:
        """Raw watch events ({type, object}) from resource_version; raises ApiException(410)
        when that version is too old (the caller lists again)."""
        w = kubernetes.watch.Watch()
        stopper.attach(w)
        try:
            yield from w.stream(self._method("list", kind), self.namespace, label_selector=labels,
                                resource_version=resource_version, timeout_seconds=timeout,
                                allow_watch_bookmarks=True, deserialize=False,
                                _request_timeout=(REQUEST_TIMEOUT[0], timeout + 15))
        finally:
            stopper.attach(None)

    def pod_log(self, pod: str, **kwargs: Any) -> Any:
        """A streaming log response (urllib3); follow/timestamps/since_seconds/previous/tail_lines."""
        return self._call(self.core.read_namespaced_pod_log, pod, self.namespace, container="main",
                          _preload_content=False, _request_timeout=(REQUEST_TIMEOUT[0], 3900), **kwargs)


class WatchHandle:
    """Lets another thread end a blocking watch at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watch: Any = None
        self.stopped = False

    def attach(self, w: Any) -> None:
        with self._lock:
            self._watch = w
            if w is not None and self.stopped:
                w.stop()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            if self._watch is not None:
                self._watch.stop()


def _api_client(profile: ClusterProfile) -> Any:
    from kubernetes.config.config_exception import ConfigException

    config_file = os.path.expanduser(profile.kubeconfig) if profile.kubeconfig else os.environ.get("KUBECONFIG")
    if not config_file and not os.path.exists(os.path.expanduser("~/.kube/config")):
        try:
            kubernetes.config.load_incluster_config()
            return kubernetes.client.ApiClient()
        except ConfigException:
            raise InputError(f"cluster {profile.name}: no kubeconfig found (set kubeconfig in the profile "
                             "or KUBECONFIG)") from None
    try:
        return kubernetes.config.new_client_from_config(
            config_file=config_file or os.path.expanduser("~/.kube/config"), context=profile.context)
    except ConfigException as e:
        raise InputError(f"cluster {profile.name}: cannot load the kubeconfig: {e}") from None
    except FileNotFoundError as e:
        raise InputError(f"cluster {profile.name}: kubeconfig not found: {e.filename}") from None
