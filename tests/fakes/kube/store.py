"""Storage: objects by (kind, namespace, name), one resourceVersion counter, a bounded
event history for watches, and deletion with owner-reference garbage collection.

Every write bumps the counter and appends (rv, kind, namespace, type, object) to the
history. The history keeps the newest `history_limit` events; a watch or a continued
list from a version older than what was dropped gets 410 Gone, as etcd compaction gives
on a real server. `compact()` drops the whole history at once (tests call it).

Admission (defaulting and validation of the API's own writes) is a hook per kind:
`admit[kind](obj, old)` may change obj or raise ApiError. Controllers write through
`update`, which skips admission, as a controller's status writes skip most of it.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from tests.fakes.kube.common import (
    ApiError,
    fields_match,
    labels_match,
    merge_patch,
    not_found,
    parse_label_selector,
    rand_suffix,
    rfc3339,
)
from tests.fakes.kube.resources import Registry

Key = tuple[str, str, str]
Event = tuple[int, str, str, str, dict]  # rv, kind, namespace, type, object


class Gone(ApiError):
    def __init__(self, message: str):
        super().__init__(410, "Expired", message)


class Store:
    def __init__(self, registry: Registry, *, history_limit: int = 10_000, orphan_delay: float = 0.2):
        self.registry = registry
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[Key, dict] = {}
        self.of_kind: dict[str, dict[tuple[str, str], dict]] = {}
        """The same objects by kind, then (namespace, name): a list reads its kind alone."""
        self.rv = 100
        self.history: deque[Event] = deque()
        self.history_limit = history_limit
        self.compacted_rv = 0  # events at or below this version are gone
        self.orphan_delay = orphan_delay
        self.admit: dict[str, Callable[[dict, dict | None], None]] = {}
        self.finalizing: Callable[[dict], bool] = lambda pod: False
        """True for a pod whose containers must stop before it goes (the kubelet says)."""
        self._pending: list[tuple[float, str, Key, str]] = []  # due, policy, key, uid

    # --- versions and history ---------------------------------------------------------------
    def _bump(self, kind: str, ns: str, type_: str, obj: dict) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, kind, ns, type_, copy.deepcopy(obj)))
        while len(self.history) > self.history_limit:
            self.compacted_rv = self.history.popleft()[0]
        self.changed.notify_all()

    def compact(self) -> None:
        """Forget every event so far: any watch from an earlier version gets 410 Gone."""
        with self.lock:
            self.history.clear()
            self.compacted_rv = self.rv

    def check_version(self, rv: int, what: str = "resource version") -> None:
        if rv and rv < self.compacted_rv:
            raise Gone(f"too old {what}: {rv} ({self.compacted_rv + 1})")

    def events_after(
        self, rv: int, kind: str, ns: str | None, reqs: list[tuple], fields: str | None
    ) -> list[tuple[str, dict]]:
        """Events of one kind after version rv (the caller holds the lock)."""
        self.check_version(rv)
        return [
            (t, o)
            for (erv, k, n, t, o) in self.history
            if erv > rv
            and k == kind
            and (ns is None or n == ns)
            and labels_match(o["metadata"].get("labels") or {}, reqs)
            and fields_match(o, fields)
        ]

    # --- reads ------------------------------------------------------------------------------
    def _res(self, kind: str):
        return self.registry.by_kind[kind]

    def get(self, kind: str, ns: str, name: str) -> dict:
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise not_found(self._res(kind).qualified, name)
            return copy.deepcopy(obj)

    def list(
        self, kind: str, ns: str | None, labels: str | None = None, fields: str | None = None
    ) -> tuple[list[dict], str]:
        """Items of one kind (ns None: every namespace), sorted by namespace and name."""
        items, rv, _, _ = self.list_page(kind, ns, labels, fields)
        return items, rv

    def list_page(
        self,
        kind: str,
        ns: str | None,
        labels: str | None = None,
        fields: str | None = None,
        *,
        limit: int = 0,
        token: str | None = None,
    ) -> tuple[list[dict], str, str, int]:
        """One page of a list: items, resourceVersion, continue token ('' on the last page),
        and how many items remain after it (metadata.remainingItemCount). As on a real
        server, every page of one list shows the objects as they were at its first page's
        resourceVersion, which each page answers with and its token carries: a continued
        list sees neither objects created since nor changes made since, and an object
        deleted since is still on it. A token older than the history kept is 410 Gone."""
        reqs = parse_label_selector(labels)
        after: tuple[str, str] | None = None
        with self.lock:
            list_rv = self.rv
            if token:
                try:
                    state = json.loads(base64.urlsafe_b64decode(token.encode()))
                    list_rv, after = int(state["rv"]), (state["ns"], state["name"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "BadRequest", "continue key is not valid") from None
                if list_rv < self.compacted_rv:
                    raise Gone(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
            objects = self._as_of(kind, ns, list_rv)
            matched = [
                objects[key]
                for key in sorted(
                    key
                    for key, o in objects.items()
                    if (after is None or key > after)
                    and labels_match(o["metadata"].get("labels") or {}, reqs)
                    and fields_match(o, fields)
                )
            ]
            page = matched[:limit] if limit else matched
            rest = len(matched) - len(page)
            nxt = ""
            if rest:
                last = page[-1]["metadata"]
                nxt = base64.urlsafe_b64encode(
                    json.dumps({"rv": list_rv, "ns": last.get("namespace", ""), "name": last["name"]}).encode()
                ).decode()
            return [copy.deepcopy(o) for o in page], str(list_rv), nxt, rest

    def _as_of(self, kind: str, ns: str | None, rv: int) -> dict[tuple[str, str], dict]:
        """The objects of one kind (ns None: every namespace) by (namespace, name), as they
        were at version `rv`: the current ones, with every change made since undone from the
        history (the caller holds the lock and has checked rv against the compaction)."""
        objects = {key: o for key, o in self.of_kind.get(kind, {}).items() if ns is None or key[0] == ns}
        if rv >= self.rv:
            return objects
        later: dict[tuple[str, str], str] = {}  # each key changed since rv: the first change's type
        before: dict[tuple[str, str], tuple[str, dict]] = {}  # its last event at or before rv
        for erv, k, n, type_, obj in reversed(self.history):
            if k != kind or (ns is not None and n != ns):
                continue
            key = (n, obj["metadata"]["name"])
            if erv > rv:
                later[key] = type_
            elif key in later and key not in before:
                before[key] = (type_, obj)
        for key, first in later.items():
            if key in before:
                type_, obj = before[key]
                if type_ == "DELETED":
                    objects.pop(key, None)
                else:
                    objects[key] = obj
            elif first == "ADDED":
                objects.pop(key, None)  # created since
            else:
                raise Gone(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter."
                )
        return objects

    # --- writes -----------------------------------------------------------------------------
    def create(self, kind: str, ns: str, body: dict, *, admit: bool = True) -> dict:
        with self.lock:
            obj = copy.deepcopy(body)
            res = self._res(kind)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + rand_suffix()
            if not meta.get("name"):
                raise ApiError(
                    422,
                    "Invalid",
                    f'{kind} "" is invalid: metadata.name: Required value: name or generateName is required',
                )
            if res.namespaced:
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(), generation=1)
            obj["apiVersion"] = res.api_version
            obj["kind"] = kind
            if admit and kind in self.admit:
                self.admit[kind](obj, None)
            key = (kind, ns, meta["name"])
            if key in self.objects:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{res.qualified} "{meta["name"]}" already exists',
                    {"name": meta["name"], "kind": res.plural},
                )
            if ns and kind != "Namespace" and ("Namespace", "", ns) not in self.objects:
                self.ensure_namespace(ns)
            self.objects[key] = obj
            self.of_kind.setdefault(kind, {})[(ns, meta["name"])] = obj
            self._bump(kind, ns, "ADDED", obj)
            return copy.deepcopy(obj)

    def ensure_namespace(self, ns: str) -> None:
        """Namespaces spring into being on first use (a real server would answer 404)."""
        if ("Namespace", "", ns) not in self.objects:
            self.create(
                "Namespace",
                "",
                {"metadata": {"name": ns}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}},
                admit=False,
            )

    def update(self, kind: str, ns: str, name: str, fn: Callable[[dict], Any]) -> dict:
        """Apply fn(obj) to the stored object and publish the change (controllers' writes)."""
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise not_found(self._res(kind).qualified, name)
            fn(obj)
            self._bump(kind, ns, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def publish(self, kind: str, ns: str, obj: dict) -> None:
        """Publish a change a controller made in place to a stored object."""
        with self.lock:
            self._bump(kind, ns, "MODIFIED", obj)

    def _check_rv(self, kind: str, name: str, obj: dict, body: dict) -> None:
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want and want != obj["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {self._res(kind).qualified} "{name}": '
                "the object has been modified; please apply your changes to the latest version",
            )

    def _write(self, kind: str, ns: str, name: str, old: dict, new: dict, *, status_only: bool) -> dict:
        """A client's update or patch: the main resource ignores status and the status
        subresource ignores everything else, as for any kind with a status subresource."""
        res = self._res(kind)
        if status_only:
            new = {**copy.deepcopy(old), "status": copy.deepcopy(new.get("status"))}
        elif "status" in res.subresources:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        meta = new.setdefault("metadata", {})
        for k in ("uid", "creationTimestamp", "name", "deletionTimestamp"):
            if k in old["metadata"]:
                meta[k] = old["metadata"][k]
        generation = old["metadata"].get("generation", 1)
        meta["generation"] = generation + (0 if status_only or new.get("spec") == old.get("spec") else 1)
        if res.namespaced:
            meta["namespace"] = ns
        new["kind"], new["apiVersion"] = kind, res.api_version
        if not status_only and kind in self.admit:
            self.admit[kind](new, old)
        self.objects[(kind, ns, name)] = new
        self.of_kind.setdefault(kind, {})[(ns, name)] = new
        self._bump(kind, ns, "MODIFIED", new)
        return copy.deepcopy(new)

    def patch(self, kind: str, ns: str, name: str, patch: dict, *, status_only: bool = False) -> dict:
        """A JSON merge patch (strategic merge patch is treated as one)."""
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise not_found(self._res(kind).qualified, name)
            self._check_rv(kind, name, obj, patch)
            return self._write(kind, ns, name, obj, merge_patch(obj, patch), status_only=status_only)

    def replace(self, kind: str, ns: str, name: str, body: dict, *, status_only: bool = False) -> dict:
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise not_found(self._res(kind).qualified, name)
            self._check_rv(kind, name, obj, body)
            return self._write(kind, ns, name, obj, copy.deepcopy(body), status_only=status_only)

    # --- deletion and garbage collection -----------------------------------------------------
    def delete(self, kind: str, ns: str, name: str, options: dict | None = None) -> dict:
        options = options or {}
        with self.lock:
            obj = self.objects.get((kind, ns, name))
            if obj is None:
                raise not_found(self._res(kind).qualified, name)
            meta = obj["metadata"]
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: {meta['resourceVersion']}",
                )
            # batch/v1 Jobs keep the legacy default: a delete without a policy orphans the pods.
            policy = options.get("propagationPolicy") or ("Orphan" if kind == "Job" else "Background")
            if policy not in ("Orphan", "Background", "Foreground"):
                raise ApiError(400, "BadRequest", f"propagationPolicy: Unsupported value: {policy!r}")
            if kind == "Pod" and self.finalizing(obj):
                grace = options.get("gracePeriodSeconds")
                if not meta.get("deletionTimestamp") or grace == 0:
                    meta["deletionTimestamp"] = rfc3339()
                    meta["deletionGracePeriodSeconds"] = int(
                        grace if grace is not None else obj["spec"].get("terminationGracePeriodSeconds", 30)
                    )
                    self._bump(kind, ns, "MODIFIED", obj)
                return copy.deepcopy(obj)
            if policy in ("Orphan", "Foreground") and self._dependents(meta["uid"], ns):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = rfc3339()
                    meta["finalizers"] = ["orphan" if policy == "Orphan" else "foregroundDeletion"]
                    self._bump(kind, ns, "MODIFIED", obj)
                    delay = self.orphan_delay if policy == "Orphan" else 0.0
                    self._pending.append((time.monotonic() + delay, policy, (kind, ns, name), meta["uid"]))
                    if policy == "Foreground":
                        self._collect(meta["uid"], ns)
                return copy.deepcopy(obj)
            self._remove(kind, ns, name)
            self._collect(meta["uid"], ns)
            return copy.deepcopy(obj)

    def remove(self, kind: str, ns: str, name: str) -> None:
        """Drop an object for good (the kubelet's last word on a terminated pod)."""
        with self.lock:
            if (kind, ns, name) in self.objects:
                self._remove(kind, ns, name)

    def _remove(self, kind: str, ns: str, name: str) -> None:
        obj = self.objects.pop((kind, ns, name))
        self.of_kind[kind].pop((ns, name), None)
        self._bump(kind, ns, "DELETED", obj)

    def _dependents(self, uid: str, ns: str) -> list[Key]:
        return [
            k
            for k, o in self.objects.items()
            if k[1] == ns and any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
        ]

    def _collect(self, uid: str, ns: str) -> None:
        for kind, _, name in self._dependents(uid, ns):
            if (kind, ns, name) in self.objects:
                self.delete(kind, ns, name, {"propagationPolicy": "Background"})

    def finish_pending_deletes(self) -> None:
        """The garbage collector's second half: strip orphans' owner references, and remove
        foreground-deleted owners once their dependents are gone."""
        with self.lock:
            now = time.monotonic()
            keep = []
            for item in self._pending:
                due, policy, (kind, ns, name), uid = item
                obj = self.objects.get((kind, ns, name))
                if obj is None or obj["metadata"]["uid"] != uid:
                    continue
                if due > now or (policy == "Foreground" and self._dependents(uid, ns)):
                    keep.append(item)
                    continue
                if policy == "Orphan":
                    for dkind, _, dname in self._dependents(uid, ns):
                        self.update(dkind, ns, dname, lambda o, uid=uid: _strip_owner(o, uid))
                self._remove(kind, ns, name)
            self._pending = keep


def _strip_owner(obj: dict, uid: str) -> None:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
    if refs:
        obj["metadata"]["ownerReferences"] = refs
    else:
        obj["metadata"].pop("ownerReferences", None)


def record_event(
    store: Store, involved: dict, type_: str, reason: str, message: str, component: str = "fake-kube"
) -> None:
    """A core/v1 Event about an object. A repeat of (object, reason, message) raises the
    count and lastTimestamp of the one event, at most once a second, as the event
    correlator of a kubelet or scheduler that keeps retrying does."""
    with store.lock:
        meta = involved["metadata"]
        ns = meta.get("namespace") or "default"
        for (kind, _, _name), o in store.objects.items():
            if (
                kind == "Event"
                and o["involvedObject"].get("uid") == meta["uid"]
                and o["reason"] == reason
                and o["message"] == message
            ):
                now = rfc3339()
                if o["lastTimestamp"] != now:
                    o["count"] = o.get("count", 1) + 1
                    o["lastTimestamp"] = now
                    store.publish("Event", ns, o)
                return
        store.create(
            "Event",
            ns,
            {
                "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}"},
                "involvedObject": {
                    "kind": involved["kind"],
                    "name": meta["name"],
                    "namespace": ns,
                    "uid": meta["uid"],
                    "apiVersion": involved.get("apiVersion", "v1"),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": rfc3339(),
                "lastTimestamp": rfc3339(),
                "source": {"component": component},
            },
            admit=False,
        )
