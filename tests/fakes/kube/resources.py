"""The resources the fake serves: kind, plural, group/version, scope, short names and verbs.

One table drives URL routing, discovery (/api, /apis, resource lists) and list kinds, so
a resource added here is reachable by the `kubernetes` client and by kubectl alike.
"""

from __future__ import annotations

import functools
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
    crd: str | None = None
    """The vendored CRD file (crds/) whose schema this version follows, for custom resources."""
    storage: bool = True
    """False for a version served by converting from the stored one (Kueue's v1beta1), and for
    a group answered by its own handler (Kueue's visibility API)."""

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
    Resource(
        "Pod",
        "pods",
        "",
        "v1",
        short_names=("po",),
        subresources=("log", "status", "exec", "portforward"),
        categories=("all",),
    ),
    Resource("Service", "services", "", "v1", short_names=("svc",), subresources=("status",), categories=("all",)),
    Resource("ConfigMap", "configmaps", "", "v1", short_names=("cm",)),
    Resource("Secret", "secrets", "", "v1"),
    Resource("Event", "events", "", "v1", short_names=("ev",)),
    Resource(
        "Namespace",
        "namespaces",
        "",
        "v1",
        namespaced=False,
        short_names=("ns",),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        subresources=("status",),
    ),
    Resource("Node", "nodes", "", "v1", namespaced=False, short_names=("no",), subresources=("status",)),
    Resource("Job", "jobs", "batch", "v1", subresources=("status",), categories=("all",)),
]
JOBSET = Resource(
    "JobSet", "jobsets", "jobset.x-k8s.io", "v1alpha2", subresources=("status",), crd="jobset.x-k8s.io_jobsets.yaml"
)
KUEUE_GROUP = "kueue.x-k8s.io"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
KUEUE_CRDS = ("resourceflavors", "clusterqueues", "localqueues", "workloads", "workloadpriorityclasses", "topologies")
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # the stored (and preferred) version first


@functools.lru_cache(maxsize=1)
def kueue_resources() -> tuple[Resource, ...]:
    """Kueue's kinds as its vendored CRDs name and scope them, in both served versions, and
    the visibility API's pending-workload views."""
    from tests.fakes.kube.crd import load

    out = []
    for plural in KUEUE_CRDS:
        filename = f"{KUEUE_GROUP}_{plural}.yaml"
        crd = load(filename)
        names = crd["spec"]["names"]
        served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
        for version in KUEUE_VERSIONS:
            if version in served:
                out.append(
                    Resource(
                        names["kind"],
                        names["plural"],
                        KUEUE_GROUP,
                        version,
                        namespaced=crd["spec"]["scope"] == "Namespaced",
                        short_names=tuple(names.get("shortNames") or ()),
                        subresources=tuple(served[version].get("subresources") or ()),
                        categories=tuple(names.get("categories") or ()),
                        crd=filename,
                        storage=served[version].get("storage", False),
                    )
                )
    for version in KUEUE_VERSIONS:
        out += [
            Resource(
                "ClusterQueue",
                "clusterqueues",
                VISIBILITY_GROUP,
                version,
                namespaced=False,
                verbs=("get",),
                subresources=("pendingworkloads",),
                storage=False,
            ),
            Resource(
                "LocalQueue",
                "localqueues",
                VISIBILITY_GROUP,
                version,
                verbs=("get",),
                subresources=("pendingworkloads",),
                storage=False,
            ),
        ]
    return tuple(out)


class Registry:
    """The resources of one fake cluster (JobSet and Kueue only when their controllers run)."""

    def __init__(self, *, jobset: bool = False, kueue: bool = False):
        self.jobset_served = jobset
        self.kueue_served = kueue
        self.resources = CORE + ([JOBSET] if jobset else []) + (list(kueue_resources()) if kueue else [])
        self.by_kind = {r.kind: r for r in self.resources if r.storage}
        self._by_path = {(r.group, r.version, r.plural): r for r in self.resources}

    @property
    def flags(self) -> tuple[bool, bool]:
        """(jobset, kueue): what a Registry(jobset=, kueue=) is built from (a cache key)."""
        return self.jobset_served, self.kueue_served

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
