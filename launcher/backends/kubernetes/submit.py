"""Submit: create a run's JobSet (where the cluster serves JobSet, asked at every submit)
or Job, then its record (ConfigMap) and, for a Job, its Service, owned by it.

The owner comes first because the others carry an owner reference to its uid, so
`kubectl delete jobset <run>` (or job) cleans everything up. All of them carry a fresh
submission uid (the `launcher.dev/submission` label): a create retried after its
answer was lost recognises its own object, and a clean-up deletes only objects of
this submission. If any create fails, everything this submission created goes
again: a run is either whole or absent, never a Job without its record.

The Job form's record keeps the Job as submitted (`launcher.dev/job`): a retry creates
the next attempt from it. A submit ends with one reconciler's pass over the namespace
(reconcile.reconcile_all).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from launcher.backends.base import Run
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import Observed, labels
from launcher.backends.kubernetes.discovery import serves_jobset
from launcher.backends.kubernetes.kubeapi import QUICK_RETRY, KubeApi, KubeError
from launcher.backends.kubernetes.render import (
    code_in_store,
    code_url,
    kept_job,
    owner_reference,
    plan_run,
    render_code_object,
)
from launcher.backends.kubernetes.status import derive
from launcher.errors import InputError, LauncherError

if TYPE_CHECKING:
    from launcher.backends.kubernetes.profiles import Placement
    from launcher.pod.code_archive import Snapshot
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

KINDS_IN_ORDER = ("JobSet", "Job", "ConfigMap", "Service")


def submit_run(
    api: KubeApi,
    spec: RunSpec,
    secrets: list[Secret],
    *,
    placement: Placement | None = None,
    code: Snapshot | None = None,
) -> Run:
    """Named warnings (no JobSet, fields the cluster cannot honour) ride on the returned Run.
    `placement`: the one the backend's check resolved (None: resolved here); `code`: the
    run's packed code snapshot, created as <run>-code beside the record."""
    profile = api.profile
    jobset = serves_jobset(api)  # a JobSet installed or removed since `cluster add` counts
    rendered = plan_run(spec, profile, secrets, jobset=jobset, placement=placement)
    token = uuid.uuid4().hex
    configmap, *others = rendered.manifests
    if code is not None and code_in_store(spec, profile):
        upload_code(api, spec.name, code)  # before any pod could look for it
    elif code is not None:
        others.insert(0, render_code_object(spec, profile, code.data))
        others[0]["metadata"]["labels"][keys.SUBMISSION] = token
    owner_manifest = others[-1]  # the JobSet, or the Job
    kind = owner_manifest["kind"]
    for obj in rendered.manifests:
        obj["metadata"].setdefault("labels", {})[keys.SUBMISSION] = token
    if kind == "Job":
        # A retry creates attempt N+1 from this Job, whoever reconciles it (their profile may differ).
        configmap["metadata"]["annotations"][keys.RECORD_JOB] = kept_job(owner_manifest)
    try:
        created = api.create(kind, owner_manifest)
    except KubeError as e:
        if e.status == 409:
            raise InputError(f"a run named {spec.name!r} already exists in {profile.where}") from None
        _clean_up(api, spec.name, token)  # a create that failed may still have happened
        raise
    owner = [owner_reference(created)]
    for obj in (configmap, *others[:-1]):
        obj["metadata"]["ownerReferences"] = owner
    try:
        # The code snapshot before the record: once a pod mounts its config, its code is there too.
        for obj in others[:-1]:  # the code snapshot, the Service of the Job form
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
    obs = Observed(spec.name, record=record, cluster=profile.name)
    if jobset:
        obs.jobset = created
    else:
        obs.job = created
    run, _ = derive(obs)
    run.warnings = list(rendered.warnings) + kueue_warnings(api) + reconcile_namespace(api)
    if jobset != profile.jobset:
        run.warnings.insert(
            0,
            f"cluster {profile.name} {'now serves' if jobset else 'no longer serves'} JobSet "
            f"(its profile says jobset: {str(profile.jobset).lower()}): the run is a {kind}",
        )
    return run


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


def reconcile_namespace(api: KubeApi) -> list[str]:
    """A submit is also one reconciler's pass over its namespace: the Job-form retries that
    are due and the leftovers of submits that died part way. The run is already whole, so a
    failure here (another user's run this identity may not change) is a warning, not an error."""
    from launcher.backends.kubernetes.reconcile import reconcile_all

    try:
        reconcile_all(api, QUICK_RETRY)
    except LauncherError as e:
        return [f"reconcile: {e.message}; the run was submitted"]
    return []


def _clean_up(api: KubeApi, name: str, token: str) -> list[str]:
    """Delete every object of this submission (never another run's that has the name);
    return those that could not be deleted. The record and the Service are owned by the
    Job, so the Job's deletion takes them too; they are deleted here as well so that
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
