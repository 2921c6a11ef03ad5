"""Discovery documents, as kubectl and client-go read them: /version, /api, /apis,
/api/v1 and /apis/<group>[/<version>] (the legacy, non-aggregated form; clients that ask
for aggregated discovery fall back to it when the answer is plain application/json), and
a minimal /openapi/v3 (operations and their fieldValidation parameter, no schemas);
/openapi/v2 answers 404."""

from __future__ import annotations

from typing import Any

from tests.fakes.kube.common import status_body
from tests.fakes.kube.resources import Registry, Resource

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake", "gitCommit": "fake", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23", "compiler": "gc", "platform": "linux/amd64"}


def answer(registry: Registry, parts: list[str]) -> tuple[int, Any] | None:
    """(status, body) for a discovery path, or None when the path is not one."""
    if parts == ["version"]:
        return 200, VERSION
    if parts == ["openapi", "v3"]:
        return 200, {"paths": {_gv_path(g, v): {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash=fake"}
                               for g, v in _group_versions(registry)}}
    if len(parts) >= 4 and parts[:2] == ["openapi", "v3"]:
        gv = "/".join(parts[2:])
        for g, v in _group_versions(registry):
            if _gv_path(g, v) == gv:
                return 200, openapi_v3(registry.in_group(g, v))
    if parts and parts[0] == "openapi":
        return 404, status_body(404, "NotFound", "the fake serves no OpenAPI v2 document")
    if parts == ["api"]:
        return 200, {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if parts == ["api", "v1"]:
        return 200, resource_list("v1", registry.in_group("", "v1"))
    if parts == ["apis"]:
        return 200, {"kind": "APIGroupList", "apiVersion": "v1",
                     "groups": [group(g, vs) for g, vs in registry.groups().items()]}
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
        entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                 "verbs": list(r.verbs)}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        out.append(entry)
        for sub in r.subresources:
            verbs = {"log": ["get"], "status": ["get", "patch", "update"]}[sub]
            out.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                        "kind": "Pod" if sub == "log" else r.kind, "verbs": verbs})
        if r.kind == "Pod":
            out.append({"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy",
                        "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out}


def _group_versions(registry: Registry) -> list[tuple[str, str]]:
    return sorted({(r.group, r.version) for r in registry.resources})


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3(resources: list[Resource]) -> dict:
    """Just enough OpenAPI v3 for kubectl to see that each kind takes fieldValidation, so it
    leaves validation to the server (it has no schemas, so `kubectl explain` finds nothing)."""
    paths = {}
    for r in resources:
        base = "/" + _gv_path(r.group, r.version) + ("/namespaces/{namespace}" if r.namespaced else "")
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
        paths[f"{base}/{r.plural}"] = {"post": {"x-kubernetes-group-version-kind": gvk, "parameters": param}}
        paths[f"{base}/{r.plural}/{{name}}"] = {"patch": {"x-kubernetes-group-version-kind": gvk, "parameters": param},
                                                "put": {"x-kubernetes-group-version-kind": gvk, "parameters": param}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (fake)", "version": VERSION["gitVersion"]},
            "paths": paths, "components": {"schemas": {}}}
