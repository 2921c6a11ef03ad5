"""meta.k8s.io/v1 Tables: the server-side printing kubectl asks for. Columns follow the
real API server's printers (pods, jobs, services, ...) and, for JobSets, the CRD's
additionalPrinterColumns. Each row carries the object's metadata (PartialObjectMetadata),
from which kubectl adds NAMESPACE with -A."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.common import age, parse_rfc3339_ns
from tests.fakes.kube.resources import Resource

Column = tuple[str, str, int]  # name, type, priority (1: only with -o wide)

COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        ("Name", "string", 0),
        ("Ready", "string", 0),
        ("Status", "string", 0),
        ("Restarts", "string", 0),
        ("Age", "string", 0),
        ("IP", "string", 1),
        ("Node", "string", 1),
    ],
    "Job": [
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Completions", "string", 0),
        ("Duration", "string", 0),
        ("Age", "string", 0),
    ],
    "JobSet": [
        ("Name", "string", 0),
        ("TerminalState", "string", 0),
        ("Restarts", "string", 0),
        ("Completed", "string", 0),
        ("Suspended", "string", 0),
        ("Age", "string", 0),
    ],
    "Service": [
        ("Name", "string", 0),
        ("Type", "string", 0),
        ("Cluster-IP", "string", 0),
        ("External-IP", "string", 0),
        ("Port(s)", "string", 0),
        ("Age", "string", 0),
    ],
    "ConfigMap": [("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
    "Secret": [("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
    "Event": [
        ("Last Seen", "string", 0),
        ("Type", "string", 0),
        ("Reason", "string", 0),
        ("Object", "string", 0),
        ("Message", "string", 0),
    ],
    "Namespace": [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
    "Node": [
        ("Name", "string", 0),
        ("Status", "string", 0),
        ("Roles", "string", 0),
        ("Age", "string", 0),
        ("Version", "string", 0),
    ],
}


def table(res: Resource, items: list[dict], meta: dict, *, headers: bool = True) -> dict:
    printer = printer_columns(res) if res.kind not in COLUMNS and res.crd else None
    cols = (
        COLUMNS[res.kind]
        if printer is None
        else [("Name", "string", 0)] + [(c["name"], c["type"], c.get("priority", 0)) for c in printer]
    )
    row = (lambda o: cells(res.kind, o)) if printer is None else (lambda o: crd_cells(printer, o))
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [
            {"name": n, "type": t, "format": "name" if n == "Name" else "", "description": n, "priority": p}
            for n, t, p in cols
        ]
        if headers
        else [],
        "rows": [{"cells": row(o), "object": partial(o)} for o in items],
    }


def printer_columns(res: Resource) -> list[dict]:
    """A CRD version's additionalPrinterColumns; without any, Age, as the API server does."""
    from tests.fakes.kube.crd import version_of

    return version_of(res.crd, res.version).get("additionalPrinterColumns") or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]


def crd_cells(columns: list[dict], o: dict) -> list[Any]:
    """The API server's custom-resource printer: each column's JSONPath (simple paths and
    [?(@.field=='value')] filters), dates as ages, a missing value as null."""
    out: list[Any] = [o["metadata"]["name"]]
    for c in columns:
        value = json_path(o, c["jsonPath"])
        if value is not None and c["type"] == "date":
            value = age(value)
        elif value is not None and c["type"] == "integer":
            value = int(value)
        elif value is not None and c["type"] == "string":
            value = str(value)
        out.append(value)
    return out


def json_path(obj: Any, path: str) -> Any:
    import re

    node = obj
    for step in re.findall(r"\.?([^.\[]+)|\[\?\(@\.(\w+)=='([^']*)'\)\]", path):
        key, field, want = step
        if key:
            node = node.get(key) if isinstance(node, dict) else None
        else:
            node = (
                next((x for x in node if isinstance(x, dict) and x.get(field) == want), None)
                if isinstance(node, list)
                else None
            )
        if node is None:
            return None
    return node


def one(res: Resource, obj: dict) -> dict:
    return table(res, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")})


def partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def cells(kind: str, o: dict) -> list[Any]:
    meta, spec, status = o["metadata"], o.get("spec") or {}, o.get("status") or {}
    created = age(meta.get("creationTimestamp"))
    if kind == "Pod":
        statuses = status.get("containerStatuses") or []
        ready = sum(1 for c in statuses if c.get("ready"))
        return [
            meta["name"],
            f"{ready}/{len(spec.get('containers') or [])}",
            pod_status(o),
            str(sum(c.get("restartCount", 0) for c in statuses)),
            created,
            status.get("podIP", "<none>"),
            spec.get("nodeName", "<none>"),
        ]
    if kind == "Job":
        return [
            meta["name"],
            job_status(o),
            f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}",
            _duration(status),
            created,
        ]
    if kind == "JobSet":
        completed = next((c["status"] for c in status.get("conditions") or [] if c["type"] == "Completed"), "")
        return [
            meta["name"],
            status.get("terminalState", ""),
            str(status.get("restarts", 0)),
            completed,
            str(spec.get("suspend", False)).lower(),
            created,
        ]
    if kind == "Service":
        ports = ",".join(f"{p['port']}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
        return [meta["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"), "<none>", ports, created]
    if kind == "ConfigMap":
        return [meta["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), created]
    if kind == "Secret":
        return [meta["name"], o.get("type", "Opaque"), len(o.get("data") or {}), created]
    if kind == "Event":
        inv = o.get("involvedObject") or {}
        return [
            age(o.get("lastTimestamp")),
            o.get("type", ""),
            o.get("reason", ""),
            f"{inv.get('kind', '').lower()}/{inv.get('name', '')}",
            o.get("message", ""),
        ]
    if kind == "Namespace":
        return [meta["name"], status.get("phase", "Active"), created]
    if kind == "Node":
        return [meta["name"], "Ready", "<none>", created, status.get("nodeInfo", {}).get("kubeletVersion", "")]
    return [meta["name"], created]


def pod_status(pod: dict) -> str:
    """The STATUS column as kubectl's printer computes it."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase", "Pending")
    inits = status.get("initContainerStatuses") or []
    initializing = False
    for i, cs in enumerate(inits):
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        initializing = True
        if term:
            reason = "Init:" + (term.get("reason") or f"ExitCode:{term.get('exitCode')}")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(pod['spec'].get('initContainers') or [])}"
        break
    if not initializing:
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated"):
                term = state["terminated"]
                reason = term.get("reason") or f"ExitCode:{term.get('exitCode')}"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def job_status(job: dict) -> str:
    conds = {c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
    for name in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if name in conds:
            return {"FailureTarget": "FailureTarget", "SuccessCriteriaMet": "SuccessCriteriaMet"}.get(name, name)
    return "Running"


def _duration(status: dict) -> str:
    if not status.get("startTime"):
        return ""
    end = status.get("completionTime")
    start_ns = parse_rfc3339_ns(status["startTime"])
    import time

    end_ns = parse_rfc3339_ns(end) if end else time.time_ns()
    secs = max(0, (end_ns - start_ns) // 1_000_000_000)
    return f"{secs}s" if secs < 120 else f"{secs // 60}m"
