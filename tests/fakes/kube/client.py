"""Talking to a fake run as a program: `RemoteFaults` has the methods of `Faults`
(inject, clear, list_rules, set, refuse_connections, stall_connections) over /_fake/,
and `RemoteKube` the helpers tests call on a FakeKube (faults, count, evict, fault_node, fault_pod, compact,
requests, get, list, pods). Stdlib HTTP only, so it works while the kubernetes client is
the thing under test. Its reads go through the API and are recorded like any client's.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from tests.fakes.kube.faults import FaultRule
from tests.fakes.kube.resources import Registry


def _call(url: str, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": "application/json"} if data else {}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


class RemoteFaults:
    def __init__(self, url: str):
        self.url = url

    def inject(
        self,
        verb: str | None = None,
        resource: str | None = None,
        *,
        status: int | None = None,
        times: int = 1,
        lose_response: bool = False,
        delay: float = 0.0,
        name: str | None = None,
        message: str | None = None,
        after_commit: bool = False,
    ) -> FaultRule:
        FaultRule(
            verb=verb,
            resource=resource,
            status=status,
            lose_response=lose_response,
            delay=delay,
            after_commit=after_commit,
        )  # validate here, for a clear error
        body = {
            "verb": verb,
            "resource": resource,
            "status": status,
            "times": times,
            "lose_response": lose_response,
            "delay": delay,
            "name": name,
            "message": message,
            "after_commit": after_commit,
        }
        return FaultRule(**_call(self.url, "POST", "/_fake/faults", body))

    def clear(self) -> None:
        _call(self.url, "DELETE", "/_fake/faults")

    def list_rules(self) -> list[FaultRule]:
        return [FaultRule(**r) for r in _call(self.url, "GET", "/_fake/faults")["rules"]]

    def knobs(self) -> dict:
        return _call(self.url, "GET", "/_fake/faults")["knobs"]

    def set(self, **values: Any) -> None:
        if "bad_images" in values:
            values["bad_images"] = sorted(values["bad_images"])
        _call(self.url, "PATCH", "/_fake/faults", values)

    def refuse_connections(self, seconds: float) -> None:
        _call(self.url, "POST", "/_fake/connections", {"refuse": seconds})

    def stall_connections(self, seconds: float) -> None:
        _call(self.url, "POST", "/_fake/connections", {"stall": seconds})


class RemoteKube:
    """The helpers of a FakeKube, for the program at `url`."""

    def __init__(self, url: str):
        self.url = url
        self.faults = RemoteFaults(url)

    @property
    def requests(self) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in _call(self.url, "GET", "/_fake/requests")]

    @property
    def lists(self) -> list[dict]:
        """Each list request: kind, labelSelector, limit, continue (bool), metadataOnly."""
        return _call(self.url, "GET", "/_fake/lists")

    def count(self, method: str | None = None, kind: str | None = None, verb: str | None = None) -> int:
        return sum(
            1
            for m, k, v in self.requests
            if (method is None or m == method) and (kind is None or k == kind) and (verb is None or v == verb)
        )

    def evict(self, pod_name: str, ns: str = "default", reason: str = "PreemptionByScheduler") -> None:
        _call(self.url, "POST", "/_fake/evict", {"name": pod_name, "namespace": ns, "reason": reason})

    def fault_node(self, name: str, kind: str = "xid", *, taint: bool = False) -> None:
        _call(self.url, "POST", "/_fake/node-faults", {"node": name, "kind": kind, "taint": taint})

    def fault_pod(
        self, kind: str, *, pod: str | None = None, rank: int | None = None, after: float = 0.0, times: int = 1
    ) -> None:
        """FakeKube.fault_pod: hang, slow or oom for the next `times` containers of matching pods."""
        body = {"kind": kind, "pod": pod, "rank": rank, "after": after, "times": times}
        _call(self.url, "POST", "/_fake/pod-faults", body)

    def compact(self) -> None:
        _call(self.url, "POST", "/_fake/compact", {})

    def get(self, kind: str, ns: str, name: str) -> dict:
        return _call(self.url, "GET", f"{_collection(kind, ns)}/{name}")

    def list(self, kind: str, ns: str | None, labels: str | None = None) -> tuple[list[dict], str]:
        query = "?labelSelector=" + urllib.parse.quote(labels) if labels else ""
        body = _call(self.url, "GET", _collection(kind, ns) + query)
        return body["items"], body["metadata"]["resourceVersion"]

    def pods(self, ns: str = "default", labels: str | None = None) -> list[dict]:
        return self.list("Pod", ns, labels)[0]

    def healthy(self, timeout: float = 1.0) -> bool:
        try:
            return _call(self.url, "GET", "/_fake/healthz", timeout=timeout) == "ok"
        except OSError:
            return False


def _collection(kind: str, ns: str | None) -> str:
    res = Registry(jobset=True, kueue=True).by_kind[kind]
    base = f"/apis/{res.group}/{res.version}" if res.group else "/api/v1"
    return f"{base}/namespaces/{ns}/{res.plural}" if res.namespaced and ns else f"{base}/{res.plural}"
