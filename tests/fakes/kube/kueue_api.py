"""Kueue's API as the fake serves it (kueue.x-k8s.io, after kubernetes-sigs/kueue v0.19.2):
the vendored CRDs' schemas applied on admission, and the conversion between the stored
version (v1beta2, Kueue's storage version) and v1beta1, both served. The conversion
follows apis/kueue/v1beta1/*_conversion.go for the fields that differ:

  ClusterQueue  spec.cohort (v1beta1)               <-> spec.cohortName (v1beta2)
  LocalQueue    status.flavorUsage                  <-> status.flavorsUsage
  Workload      spec.priorityClassName + priorityClassSource <-> spec.priorityClassRef
                status.accumulatedPastExexcutionTimeSeconds (sic) <-> ...ExecutionTimeSeconds
                admission.podSetAssignments[].topologyAssignment.domains <-> .slices
                (pkg/util/tas: one compact slice with prefix/suffix/universal values)

Fields only one version has are dropped on the way to the other, as Kueue's converters do.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes.kube import crd
from tests.fakes.kube.resources import KUEUE_GROUP, Resource

STORAGE = "v1beta2"
WORKLOAD_PRIORITY_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_SOURCE = "scheduling.k8s.io/priorityclass"


def schema(res: Resource) -> dict:
    return crd.schema_of(res.crd, res.version)


def admit(res: Resource):
    """The admission of a Kueue kind: the CRD schema's defaults, pruning and validation."""

    def check(obj: dict, old: dict | None) -> None:
        s = schema(res)
        crd.decode(obj, s, kind=res.kind, group=KUEUE_GROUP)
        crd.validate(obj, s, kind=res.kind, group=KUEUE_GROUP)

    return check


def decode(res: Resource, body: dict) -> None:
    """What the server does to a whole object sent in a non-stored version before
    converting it: that version's defaults and pruning."""
    crd.decode(body, schema(res), kind=res.kind, group=KUEUE_GROUP)


def convert(obj: Any, kind: str, to_version: str) -> Any:
    """A (possibly partial, as a merge patch) object of `kind` in the other version."""
    if not isinstance(obj, dict):
        return obj
    out = copy.deepcopy(obj)
    if "apiVersion" in out:
        out["apiVersion"] = f"{KUEUE_GROUP}/{to_version}"
    up = to_version == STORAGE
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else None
    status = out.get("status") if isinstance(out.get("status"), dict) else None
    if kind == "ClusterQueue":
        if spec is not None:
            _rename(spec, "cohort", "cohortName", up)
            for gone in ("admissionChecks",) if up else ("concurrentAdmissionPolicy",):
                spec.pop(gone, None)
        if status is not None and up:
            status.pop("pendingWorkloadsStatus", None)
    elif kind == "LocalQueue":
        if status is not None:
            _rename(status, "flavorUsage", "flavorsUsage", up)
            if up:
                status.pop("flavors", None)
    elif kind == "Workload":
        if spec is not None:
            _convert_priority(spec, up)
            if not up:
                spec.pop("preemptionGates", None)
                for ps in spec.get("podSets") or []:
                    (ps.get("topologyRequest") or {}).pop("podsetSliceRequiredTopologyConstraints", None)
        if status is not None:
            _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds", up)
            if not up:
                status.pop("preemptionGates", None)
            admission = status.get("admission")
            for psa in (admission or {}).get("podSetAssignments") or []:
                ta = psa.get("topologyAssignment")
                if isinstance(ta, dict):
                    psa["topologyAssignment"] = slices_from(ta) if up else domains_from(ta)
    return out


def _rename(node: dict, old: str, new: str, up: bool) -> None:
    src, dst = (old, new) if up else (new, old)
    if src in node:
        node[dst] = node.pop(src)


def _convert_priority(spec: dict, up: bool) -> None:
    if up:
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        if name and source == WORKLOAD_PRIORITY_SOURCE:
            spec["priorityClassRef"] = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": name}
        elif name and source == POD_PRIORITY_SOURCE:
            spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}
        return
    ref = spec.pop("priorityClassRef", None)
    if isinstance(ref, dict) and ref.get("name"):
        if (ref.get("group"), ref.get("kind")) == (KUEUE_GROUP, "WorkloadPriorityClass"):
            spec.update(priorityClassSource=WORKLOAD_PRIORITY_SOURCE, priorityClassName=ref["name"])
        elif (ref.get("group"), ref.get("kind")) == ("scheduling.k8s.io", "PriorityClass"):
            spec.update(priorityClassSource=POD_PRIORITY_SOURCE, priorityClassName=ref["name"])


# --- topology assignments: v1beta1 domains <-> v1beta2 slices -----------------------------------
def slices_from(ta: dict) -> dict:
    """v1beta1 {levels, domains: [{values, count}]} as v1beta2's single compact slice."""
    levels, domains = ta.get("levels") or [], ta.get("domains") or []
    out: dict = {"levels": levels, "slices": []}
    if domains:
        counts = [d["count"] for d in domains]
        out["slices"].append(
            {
                "domainCount": len(domains),
                "valuesPerLevel": [_compact([d["values"][i] for d in domains]) for i in range(len(levels))],
                "podCounts": {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts},
            }
        )
    return out


def _compact(values: list[str]) -> dict:
    """fillSingleCompactSliceValues: one universal value, or roots between a common prefix and suffix."""
    if len(set(values)) == 1:
        return {"universal": values[0]}
    prefix = suffix = values[0]
    for s in values[1:]:
        prefix = prefix[: next((i for i, (a, b) in enumerate(zip(prefix, s)) if a != b), min(len(prefix), len(s)))]
        n = next((i for i, (a, b) in enumerate(zip(reversed(suffix), reversed(s))) if a != b), min(len(suffix), len(s)))
        suffix = suffix[len(suffix) - n :] if n else ""
    shortest = min(len(s) for s in values)
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    individual: dict = {"roots": [s[len(prefix) : len(s) - len(suffix)] for s in values]}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    return {"individual": individual}


def domains_from(ta: dict) -> dict:
    """v1beta2 slices as v1beta1 domains (tas.InternalSeqFrom)."""
    domains = []
    for sl in ta.get("slices") or []:
        for i in range(sl.get("domainCount", 0)):
            values = []
            for level in sl.get("valuesPerLevel") or []:
                if "universal" in level:
                    values.append(level["universal"])
                else:
                    ind = level["individual"]
                    values.append(ind.get("prefix", "") + ind["roots"][i] + ind.get("suffix", ""))
            counts = sl.get("podCounts") or {}
            domains.append(
                {"values": values, "count": counts["universal"] if "universal" in counts else counts["individual"][i]}
            )
    return {"levels": ta.get("levels") or [], "domains": domains}


def domains_of(ta: dict | None) -> list[tuple[list[str], int]]:
    """(values per level, pod count) of each domain of a stored (v1beta2) assignment."""
    return [(d["values"], d["count"]) for d in domains_from(ta or {})["domains"]]
