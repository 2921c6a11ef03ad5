"""Submit: create a run's Job, then its record (ConfigMap) and Service, owned by the Job.

The Job comes first because the other two carry an owner reference to its uid, so
`kubectl delete job <run>` cleans everything up. If the record or the Service cannot
be created, the Job goes again: a run is either whole or absent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubernetes.client.exceptions import ApiException

from launcher.backends.base import Run
from launcher.backends.kubernetes.kubeapi import KubeApi, message_of, status_of
from launcher.backends.kubernetes.render import owner_reference, render_run
from launcher.backends.kubernetes.status import Observed, derive
from launcher.errors import InputError, LauncherError

if TYPE_CHECKING:
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec


def submit_run(api: KubeApi, spec: RunSpec, secrets: list[Secret]) -> Run:
    profile = api.profile
    configmap, service, job = render_run(spec, profile, secrets)
    try:
        created = api.create("Job", job)
    except ApiException as e:
        if status_of(e) == 409:
            raise InputError(f"a run named {spec.name!r} already exists in {profile.where}") from None
        raise LauncherError(f"cluster {profile.name} refused the Job: {message_of(e)}") from None
    owner = [owner_reference(created)]
    configmap["metadata"]["ownerReferences"] = owner
    service["metadata"]["ownerReferences"] = owner
    try:
        record = api.create("ConfigMap", configmap)
        api.create("Service", service)
    except ApiException as e:
        api.delete("Job", spec.name, propagation="Background")
        raise LauncherError(f"cluster {profile.name} refused the run's objects: {message_of(e)}") from None
    run, _ = derive(Observed(spec.name, record=record, job=created, cluster=profile.name))
    return run
