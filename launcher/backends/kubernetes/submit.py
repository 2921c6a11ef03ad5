"""Submit: create a run's JobSet, then its record (ConfigMap) and its code snapshot,
owned by it. A cluster that serves no JobSet is refused, with the command that installs it.

The JobSet comes first because the others carry an owner reference to its uid, so
`kubectl delete jobset <run>` cleans everything up; where the profile sets
ttl_seconds_after_finished, the record is not owned, so that it outlives the JobSet
the cluster deletes (record_outlives). All of them carry a fresh
submission uid (the `launcher.dev/submission` label): a create retried after its
answer was lost recognises its own object, and a clean-up deletes only objects of
this submission. If any create fails, everything this submission created goes
again: a run is either whole or absent, never a JobSet without its record.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from launcher.backends.base import Run, utcnow
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed, labels
from launcher.backends.kubernetes.discovery import serves_jobset
from launcher.backends.kubernetes.history import created_labels
from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError
from launcher.backends.kubernetes.render import (
    code_in_store,
    code_url,
    no_jobset_error,
    owner_reference,
    plan_run,
    render_code_object,
)
from launcher.backends.kubernetes.status import derive
from launcher.errors import InputError

if TYPE_CHECKING:
    from launcher.backends.kubernetes.profiles import Placement
    from launcher.pod.code_archive import Snapshot
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

KINDS_IN_ORDER = ("JobSet", "ConfigMap")


def submit_run(
    api: KubeApi,
    spec: RunSpec,
    secrets: list[Secret],
    *,
    placement: Placement | None = None,
    code: Snapshot | None = None,
) -> Run:
    """Named warnings (fields the cluster cannot honour) ride on the returned Run.
    `placement`: the one the backend's check resolved (None: resolved here); `code`: the
    run's packed code snapshot, created as <run>-code beside the record."""
    profile = api.profile
    if not serves_jobset(api):
        raise InputError(no_jobset_error(profile.name))
    rendered = plan_run(spec, profile, secrets, placement=placement)
    token = uuid.uuid4().hex
    configmap, *others = rendered.manifests
    if code is not None and code_in_store(spec, profile):
        upload_code(api, spec.name, code)  # before any pod could look for it
    elif code is not None:
        others.insert(0, render_code_object(spec, profile, code.data))
        others[0]["metadata"]["labels"][keys.SUBMISSION] = token
    owner_manifest = others[-1]  # the JobSet
    kind = owner_manifest["kind"]
    queue_warnings = fit_to_queue(api, spec, owner_manifest)
    # The creation time, as labels a listing selects windows of time by (history.py); the
    # submission's, not the plan's, which stays the same offline.
    stamped = created_labels(utcnow())
    for obj in rendered.manifests:
        obj["metadata"].setdefault("labels", {})[keys.SUBMISSION] = token
        if obj is configmap or obj is owner_manifest:
            obj["metadata"]["labels"].update(stamped)
    try:
        created = api.create(kind, owner_manifest)
    except KubeError as e:
        if e.status == 409:
            raise InputError(f"a run named {spec.name!r} already exists in {profile.where}") from None
        _clean_up(api, spec.name, token)  # a create that failed may still have happened
        raise
    owner = [owner_reference(created)]
    for obj in (configmap, *others[:-1]):
        if obj is configmap and record_outlives(created):
            continue
        obj["metadata"]["ownerReferences"] = owner
    try:
        # The code snapshot before the record: once a pod mounts its config, its code is there too.
        for obj in others[:-1]:  # the code snapshot
            api.create(obj["kind"], obj)
        record = api.create("ConfigMap", configmap)
    except KubeError as e:
        left = _clean_up(api, spec.name, token)
        raise KubeError(
            f"{e.message}; "
            + (
                f"could not remove what was created ({', '.join(left)}): "
                f"`launcher delete {spec.name}` does, and so does any look at "
                "the run in a few minutes"
                if left
                else "the run was not started and nothing of it is left"
            ),
            status=e.status,
            reason=e.reason,
            exit_code=e.exit_code,
            hint=e.hint,
        ) from None
    run, _ = derive(Observed(spec.name, record=record, jobset=created, cluster=profile.name))
    run.warnings = list(rendered.warnings) + queue_warnings + kueue_warnings(api)
    return run


def record_outlives(owner: dict) -> bool:
    """Whether the run's record must not be owned by its JobSet (or Job): the cluster deletes
    a finished one after its ttlSecondsAfterFinished, and the record (the run's outcome, its
    history, where its log archive is) must stay for `get runs`, `describe` and `logs`.
    It stays until `launcher delete`, as a stopped run's does."""
    return (owner.get("spec") or {}).get("ttlSecondsAfterFinished") is not None


def fit_to_queue(api: KubeApi, spec: RunSpec, jobset: dict) -> list[str]:
    """Where the profile has a queue: its ClusterQueue (through the LocalQueue) asked whether
    it can ever admit the run, the default requests fitted to it where they are why not
    (kueue.fit_requests). A queue Kueue does not serve is kueue_warnings' to say."""
    from launcher.backends.kubernetes.kueue import cluster_queue_of, fit_requests

    if not api.profile.queue:
        return []
    cluster_queue = cluster_queue_of(api, api.profile.queue)
    return [] if cluster_queue is None else fit_requests(spec, api.profile.name, cluster_queue, jobset)


def kueue_warnings(api: KubeApi) -> list[str]:
    """A run for a queue is created suspended, for Kueue to admit: where the cluster serves no
    Kueue, nothing ever will, and the user must hear it now."""
    from launcher.backends.kubernetes.kueue import GROUP, use_served_version

    profile = api.profile
    if not profile.queue or use_served_version(api) is not None:
        return []
    return [
        f"clusters.{profile.name}.queue: cluster {profile.name} serves no Kueue API ({GROUP}): the run was "
        f"created suspended for queue {profile.queue} and nothing will admit it (install Kueue, or remove "
        f"queue from the profile and `launcher run --clone`)"
    ]


def upload_code(api: KubeApi, name: str, code: Snapshot) -> None:
    """Write the run's code snapshot to <code_store>/<run>/code.tar.gz with the credentials of
    the profile's code_store_secret (launcher.storage, the store the log archive's readers use)."""
    from launcher.backends.kubernetes.archive import store_credentials
    from launcher.storage import open_store

    profile = api.profile
    url = code_url(profile, name)
    where, _, file_name = url.rpartition("/")
    store = open_store(where, store_credentials(api, where, profile.code_store_secret), what=f"the code store {where}")
    store.write(file_name, code.data)


def _clean_up(api: KubeApi, name: str, token: str) -> list[str]:
    """Delete every object of this submission (never another run's that has the name);
    return those that could not be deleted. The record is owned by the JobSet, so the
    JobSet's deletion takes it too; they are deleted here as well so that
    nothing waits on the garbage collector."""
    left = []
    for kind, obj_name in [
        *((k, name) for k in KINDS_IN_ORDER),
        ("ConfigMap", keys.code_object_name(name)),
        ("Secret", keys.code_object_name(name)),
    ]:
        try:
            obj = api.get(kind, obj_name)
            if obj is not None and labels(obj).get(keys.SUBMISSION) == token:
                api.delete(kind, obj_name, propagation="Background", uid=obj["metadata"]["uid"])
        except KubeError:
            left.append(f"{kind} {obj_name}")
    return left
