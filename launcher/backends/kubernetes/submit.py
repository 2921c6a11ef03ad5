"""Submit: create a run's JobSet (or Job), then its record (ConfigMap) and, for a Job,
its Service, owned by the JobSet or Job.

The owner comes first because the others carry an owner reference to its uid, so
`kubectl delete jobset <run>` (or job) cleans everything up. If the record or the
Service cannot be created, the owner goes again: a run is either whole or absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import urllib3
from kubernetes.client.exceptions import ApiException

from launcher.backends.base import Run
from launcher.backends.kubernetes.kubeapi import KubeApi, message_of, status_of
from launcher.backends.kubernetes.render import owner_reference, plan_run
from launcher.backends.kubernetes.status import Observed, derive
from launcher.errors import InputError, LauncherError

if TYPE_CHECKING:
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec


def submit_run(api: KubeApi, spec: RunSpec, secrets: list[Secret]) -> Run:
    """Create the run in the form the cluster serves now (JobSet, asked again; else an
    Indexed Job), owner first; named warnings ride on the returned Run."""
    profile = api.profile
    jobset = cluster_serves_jobset(api)
    rendered = plan_run(spec, profile, secrets, jobset=jobset)
    configmap, *rest = rendered.manifests
    owner_manifest = rest[-1]  # the JobSet, or the Job
    kind = owner_manifest["kind"]
    try:
        created = api.create(kind, owner_manifest)
    except ApiException as e:
        if status_of(e) == 409:
            raise InputError(f"a run named {spec.name!r} already exists in {profile.where}") from None
        raise LauncherError(f"cluster {profile.name} refused the {kind}: {message_of(e)}") from None
    owner = [owner_reference(created)]
    for m in (configmap, *rest[:-1]):
        m["metadata"]["ownerReferences"] = owner
    try:
        record = api.create("ConfigMap", configmap)
        for m in rest[:-1]:  # the Service of the Job form
            api.create(m["kind"], m)
    except ApiException as e:
        api.delete(kind, spec.name, propagation="Background")
        raise LauncherError(f"cluster {profile.name} refused the run's objects: {message_of(e)}") from None
    obs = Observed(spec.name, record=record, cluster=profile.name)
    if jobset:
        obs.jobset = created
    else:
        obs.job = created
    run, _ = derive(obs)
    run.warnings = rendered.warnings
    if jobset != profile.jobset:
        run.warnings.insert(0, f"cluster {profile.name} {'now serves' if jobset else 'no longer serves'} JobSet "
                               f"(the profile says jobset: {str(profile.jobset).lower()}): the run is a "
                               f"{'JobSet' if jobset else 'Job'}")
    return run


def cluster_serves_jobset(api: KubeApi) -> bool:
    """Ask discovery at every submit: a JobSet installed or removed since `cluster add` counts."""
    from launcher.backends.kubernetes.discovery import serves_jobset

    try:
        return serves_jobset(api.client)
    except ApiException as e:
        if status_of(e) == 404:
            return False  # no discovery document for the group: not served
        raise LauncherError(f"cluster {api.profile.name}: API discovery failed: {message_of(e)}") from None
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise LauncherError(f"cannot reach the API server of cluster {api.profile.name}: "
                            f"{type(e).__name__}: {e}") from None
