"""A Kubernetes run has no backoff between restarts: the JobSet controller restarts the
group at once, and the launcher says so (a named warning, describe's backoff line)."""

from __future__ import annotations

from tests.kubernetes.test_backend import run_spec


def test_a_jobset_run_says_it_has_no_backoff():
    """JobSet's failurePolicy has no delay between restarts: a retry_backoff is named as not
    honoured there, and describe says the JobSet controller restarts at once."""
    from launcher.backends.kubernetes.attempts import Observed
    from launcher.backends.kubernetes.profiles import ClusterProfile
    from launcher.backends.kubernetes.render import plan_run
    from launcher.backends.kubernetes.status import derive

    spec = run_spec(
        "js",
        "true",
        image="ghcr.io/example/launcher:test",
        scheduling={"max_retries": 1, "retry_backoff": {"first": "1s"}},
    )
    warnings = plan_run(spec, ClusterProfile(name="js"), []).warnings
    assert (
        "scheduling.retry_backoff: the JobSet controller restarts the group at once (JobSet's failurePolicy "
        "has no backoff); it applies on the local backend"
    ) in warnings
    record = {
        "metadata": {
            "name": "js",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "resourceVersion": "1",
            "annotations": {},
        },
        "data": {"spec.json": '{"name": "js", "command": "true"}'},
    }
    run, _ = derive(Observed("js", record=record))
    assert run.backoff == (
        "none: the JobSet controller restarts the group at once (JobSet's failurePolicy has no backoff)"
    )
