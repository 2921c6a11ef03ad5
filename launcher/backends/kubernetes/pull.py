"""Whether the cluster can pull an image, asked with one short-lived pod (`launcher cluster
check`): the image, `true` as its command, the pull policy and pull secrets a run's pods
would have, a short activeDeadlineSeconds, and deleted once it has answered. What the
kubelet says of its container decides: a pull error (ErrImagePull, ImagePullBackOff, ...)
is "cannot pull"; a container that ran or ended (even one whose `true` does not exist in
the image: it was pulled to find out) is "pulled", and so is one the kubelet could not
create after the pull (CreateContainerConfigError: a root image under pod_security:
restricted). The pod has the security context a run's pods have, so that a namespace
enforcing a Pod Security level admits it as it admits them. A pod still waiting at the deadline
(unschedulable, a slow pull) answers neither."""

from __future__ import annotations

import secrets as random
import time
from typing import TYPE_CHECKING

from launcher.backends.capabilities import ImagePull
from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.render import container_security, pod_security_context
from launcher.secrets.kinds import project

if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi
    from launcher.backends.kubernetes.profiles import ClusterProfile
    from launcher.secrets.kinds import Secret

PULL_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "RegistryUnavailable"}
# The kubelet creates a container's config only once its image is there.
AFTER_PULL = {"CreateContainerConfigError", "CreateContainerError"}
PROBE = "launcher.dev/probe"
DEADLINE_SECONDS = 120  # the cluster ends the pod by itself if the launcher is gone before it deletes it


def probe_pod(profile: ClusterProfile, image: str, pull_policy: str, pull_secrets: list[Secret], name: str) -> dict:
    spec: dict = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(profile),
        "containers": [
            {
                "name": "pull",
                "image": image,
                "imagePullPolicy": pull_policy,
                "command": ["true"],
                **container_security(profile),
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"cpu": "100m", "memory": "64Mi"},
                },
            }
        ],
    }
    pulls = sorted(s.name for s in pull_secrets if project(s).image_pull)
    if pulls:
        spec["imagePullSecrets"] = [{"name": n} for n in pulls]
    if profile.service_account:
        spec["serviceAccountName"] = profile.service_account
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": profile.namespace,
            "labels": {keys.MANAGED_BY: keys.MANAGER, PROBE: "image-pull"},
        },
        "spec": spec,
    }


def verdict(pod: dict, image: str) -> ImagePull | None:
    """What the pod says about the pull so far; None while it has not said."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in PULL_ERRORS:
            message = waiting.get("message") or ""
            return ImagePull(image, False, f"{waiting['reason']}: {message}" if message else waiting["reason"])
        if "running" in state or "terminated" in state or cs.get("imageID") or waiting.get("reason") in AFTER_PULL:
            return ImagePull(image, True, "pulled")
    if status.get("phase") == "Succeeded":
        return ImagePull(image, True, "pulled")
    return None


def _pending(pod: dict | None) -> str:
    status = (pod or {}).get("status") or {}
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return waiting["reason"] + (f": {waiting['message']}" if waiting.get("message") else "")
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"not scheduled: {cond.get('message') or cond.get('reason') or 'no node fits'}"
    return status.get("phase") or "Pending"


def probe_image(
    api: KubeApi,
    profile: ClusterProfile,
    image: str,
    *,
    pull_policy: str,
    pull_secrets: list[Secret],
    timeout: float,
    poll: float = 0.5,
) -> ImagePull:
    name = f"launcher-pull-check-{random.token_hex(3)}"
    api.create("Pod", probe_pod(profile, image, pull_policy, pull_secrets, name))
    try:
        deadline = time.monotonic() + timeout
        pod = None
        while True:
            pod = api.get("Pod", name)
            found = verdict(pod or {}, image)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                return ImagePull(image, None, f"no answer within {timeout:g} s ({_pending(pod)})")
            time.sleep(poll)
    finally:
        api.delete("Pod", name)
