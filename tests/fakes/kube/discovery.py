"""Discovery documents, as kubectl and client-go read them: /version, /api, /apis,
/api/v1 and /apis/<group>[/<version>] (the legacy, non-aggregated form; clients that ask
for aggregated discovery fall back to it when the answer is plain application/json).
The OpenAPI documents are openapi.py's."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.resources import Registry, Resource

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-fake",
    "gitCommit": "fake",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def answer(registry: Registry, parts: list[str]) -> tuple[int, Any] | None:
    """(status, body) for a discovery path, or None when the path is not one."""
    if parts == ["version"]:
        return 200, VERSION
    if parts == ["api"]:
        return 200, {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }
    if parts == ["api", "v1"]:
        return 200, resource_list("v1", registry.in_group("", "v1"))
    if parts == ["apis"]:
        return 200, {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [group(g, vs) for g, vs in registry.groups().items()],
        }
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in registry.groups():
        return 200, {"kind": "APIGroup", "apiVersion": "v1", **group(parts[1], registry.groups()[parts[1]])}
    if len(parts) == 3 and parts[0] == "apis" and registry.in_group(parts[1], parts[2]):
        return 200, resource_list(f"{parts[1]}/{parts[2]}", registry.in_group(parts[1], parts[2]))
    return None


def group(name: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def resource_list(group_version: str, resources: list[Resource]) -> dict:
    out: list[dict] = []
    for r in resources:
        entry = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        out.append(entry)
        for sub in r.subresources:
            verbs = {
                "log": ["get"],
                "status": ["get", "patch", "update"],
                "exec": ["create", "get"],
                "portforward": ["create", "get"],
                "pendingworkloads": ["get"],
            }[sub]
            kind = {
                "log": "Pod",
                "exec": "PodExecOptions",
                "portforward": "PodPortForwardOptions",
                "pendingworkloads": "PendingWorkloadsSummary",
            }.get(sub, r.kind)
            out.append(
                {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                }
            )
        if r.kind == "Pod":
            out.append(
                {
                    "name": "pods/eviction",
                    "singularName": "",
                    "namespaced": True,
                    "group": "policy",
                    "version": "v1",
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out}
