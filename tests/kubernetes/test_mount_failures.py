"""Which FailedMount is fatal: a user's secret that is not there, never a ConfigMap of the
run's own that submit creates right after the JobSet, whatever the run is named."""

from __future__ import annotations

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes.attempts import rank_view


def pending_pod(run: str) -> dict:
    return {
        "metadata": {
            "name": f"{run}-0-abcde",
            "labels": {"launcher.dev/run": run},
            "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
        },
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}],
        },
    }


def failed_mount(pod: dict, message: str) -> dict:
    return {
        "reason": "FailedMount",
        "involvedObject": {"kind": "Pod", "name": pod["metadata"]["name"]},
        "lastTimestamp": "2025-01-01T00:00:01Z",
        "message": message,
    }


def test_a_run_named_after_secrets_waits_for_its_own_config_map():
    # Found by mcli's create_secret example on the fake cluster: a run named uses-secret-XXXX
    # failed whenever its pod came up before its ConfigMap, as "secret" was in the message.
    pod = pending_pod("uses-secret-rk3pir")
    event = failed_mount(pod, 'MountVolume.SetUp failed for volume "config" : configmap "uses-secret-rk3pir" not found')
    assert rank_view(pod, [event]).status is RunStatus.STARTING


def test_a_users_missing_secret_is_still_fatal():
    pod = pending_pod("uses-secret-rk3pir")
    event = failed_mount(pod, 'MountVolume.SetUp failed for volume "hf" : secret "hf-token" not found')
    view = rank_view(pod, [event])
    assert view.status is RunStatus.FAILED and 'secret "hf-token" not found' in (view.reason or "")
