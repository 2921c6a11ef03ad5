"""The resources the fake serves: kind, plural, group/version, scope, short names and verbs.

One table drives URL routing, discovery (/api, /apis, resource lists) and list kinds, so
a resource added here is reachable by the `kubernetes` client and by kubectl alike.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    kind: str
    plural: str
    group: str  # "" is the core group
    version: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified(self) -> str:
        """How error messages name it: `pods`, `jobs.batch`, `jobsets.jobset.x-k8s.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


CORE = [
    Resource("Pod", "pods", "", "v1", short_names=("po",), subresources=("log", "status", "exec", "portforward"),
             categories=("all",)),
    Resource("Service", "services", "", "v1", short_names=("svc",), subresources=("status",), categories=("all",)),
    Resource("ConfigMap", "configmaps", "", "v1", short_names=("cm",)),
    Resource("Secret", "secrets", "", "v1"),
    Resource("Event", "events", "", "v1", short_names=("ev",)),
    Resource("Namespace", "namespaces", "", "v1", namespaced=False, short_names=("ns",),
             verbs=("create", "delete", "get", "list", "patch", "update", "watch"), subresources=("status",)),
    Resource("Node", "nodes", "", "v1", namespaced=False, short_names=("no",), subresources=("status",)),
    Resource("Job", "jobs", "batch", "v1", subresources=("status",), categories=("all",)),
]
JOBSET = Resource("JobSet", "jobsets", "jobset.x-k8s.io", "v1alpha2", subresources=("status",))


class Registry:
    """The resources of one fake cluster (JobSet only when its controller runs)."""

    def __init__(self, *, jobset: bool = False):
        self.jobset_served = jobset
        self.resources = CORE + ([JOBSET] if jobset else [])
        self.by_kind = {r.kind: r for r in self.resources}
        self._by_path = {(r.group, r.version, r.plural): r for r in self.resources}

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        return self._by_path.get((group, version, plural))

    def groups(self) -> dict[str, list[str]]:
        """Non-core group -> its versions."""
        out: dict[str, list[str]] = {}
        for r in self.resources:
            if r.group and r.version not in out.setdefault(r.group, []):
                out[r.group].append(r.version)
        return out

    def in_group(self, group: str, version: str) -> list[Resource]:
        return [r for r in self.resources if r.group == group and r.version == version]
