"""What other users' objects and half-finished submits cannot do: a forged run record in the
namespace is never turned into a workload by someone else's command, a JobSet left without
its record is shown as such and removed by `delete`, and a connection cut while the record
is created still gives one whole run. Against the fake API server."""

from __future__ import annotations

import json
import threading

from launcher.backends.base import RunStatus
from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import run_spec, worker

PRIVILEGED_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "forged",
        "labels": {"app.kubernetes.io/managed-by": "launcher", "launcher.dev/run": "forged"},
    },
    "spec": {
        "template": {
            "spec": {
                "hostPID": True,
                "serviceAccountName": "cluster-admin-sa",
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "ghcr.io/example/launcher:test",
                        "command": ["sh", "-c", "cat /host/etc/shadow"],
                        "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                    }
                ],
                "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
            }
        }
    },
}


def forge_record(kube, name: str = "forged") -> None:
    """What anyone with `configmaps create` in the namespace can write: a ConfigMap labelled as
    a launcher run record, ended FAILED, whose annotations carry a privileged Job (the old Job
    form's kept Job and its restart mark) and whose spec asks for nothing special."""
    spec = {"name": name, "image": "ghcr.io/example/launcher:test", "command": "echo hi"}
    kube.create(
        "ConfigMap",
        "default",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "labels": {"app.kubernetes.io/managed-by": "launcher", "launcher.dev/run": name},
                "annotations": {
                    "launcher.dev/form": "Job",
                    "launcher.dev/job": json.dumps(PRIVILEGED_JOB),
                    "launcher.dev/restart": "2",
                    "launcher.dev/secrets": "[]",
                    "launcher.dev/final": json.dumps({"status": "FAILED", "reason": "x", "at": "2026-01-01T00:00:00Z"}),
                },
            },
            "data": {"spec.json": json.dumps(spec)},
        },
    )


def workloads(kube) -> list[dict]:
    jobs, _ = kube.list("Job", "default", None)
    jobsets, _ = kube.list("JobSet", "default", None)
    return jobs + jobsets


def test_a_forged_record_is_never_made_a_workload_by_another_users_commands(fake_kube, capsys):
    forge_record(fake_kube)
    backend = make_backend()
    spec = run_spec("mine-abc123", worker("--lines", "1"), image="ghcr.io/example/launcher:test")
    backend.submit(spec, [])
    names = {r.name for r in backend.list()}
    assert {"forged", spec.name} <= names
    backend.get("forged")
    assert run_cli(cli, ["describe", "forged"]) == 0
    assert run_cli(cli, ["get", "runs"]) == 0
    # Every workload in the namespace is the user's own run's: nothing was created from the forgery.
    owners = {(o["kind"], (o["metadata"].get("labels") or {}).get("launcher.dev/run")) for o in workloads(fake_kube)}
    assert owners <= {("JobSet", spec.name), ("Job", spec.name)}, owners
    assert not any(p["spec"].get("hostPID") for p in fake_kube.pods())
    backend.close()


def test_restarting_a_forged_record_renders_its_spec_with_the_users_own_profile(fake_kube):
    """`run -r` on such a record creates what the restarting user's launcher renders from the
    spec, validated again, never the Job its annotation holds."""
    forge_record(fake_kube)
    backend = make_backend()
    run = backend.restart("forged")
    assert run.current_attempt == 2
    [jobset] = fake_kube.list("JobSet", "default", "launcher.dev/run=forged")[0]
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert not pod.get("hostPID") and "serviceAccountName" not in pod
    assert not any("hostPath" in v for v in pod["volumes"])
    assert [c["image"] for c in pod["containers"]] == ["ghcr.io/example/launcher:test"]
    final = wait_until(lambda: (r := backend.get("forged")).status.is_terminal and r, timeout=60, message="its end")
    assert final.status is RunStatus.COMPLETED and [a.index for a in final.attempts] == [1, 2]
    assert not any(p["spec"].get("hostPID") for p in fake_kube.pods())
    backend.close()


def test_a_jobset_left_without_its_record_is_shown_and_removed_by_delete(fake_kube):
    """A submit that died between the JobSet and its record (the cluster went away, so it could
    not clean up) leaves a JobSet whose pods wait for a ConfigMap forever. Reads say so, write
    nothing, and `launcher delete` removes it."""
    from launcher.backends.kubernetes.render import plan_run

    backend = make_backend()
    young = run_spec("young-abc123", worker("--lines", "1"))
    old = run_spec("old-abc123", worker("--lines", "1"))
    for spec in (young, old):
        jobset = plan_run(spec, backend.profile, []).manifests[-1]
        fake_kube.create("JobSet", "default", jobset)
    wait_until(
        lambda: fake_kube.list("Job", "default", f"launcher.dev/run={old.name}")[0],
        timeout=30,
        message="the JobSet's child Job",
    )
    with fake_kube.lock:  # time passes for one of them (an API server keeps creationTimestamp unchangeable)
        fake_kube.objects[("JobSet", "default", old.name)]["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    listed = {r.name: r for r in backend.list()}
    assert listed[young.name].status is not RunStatus.FAILED  # a submit may still be on its way
    assert listed[old.name].status is RunStatus.FAILED
    assert listed[old.name].reason == (
        f"its submit never finished (no record); `launcher delete {old.name}` removes its JobSet"
    )
    assert fake_kube.get("JobSet", "default", old.name) is not None  # a listing only reads
    backend.delete(old.name)
    wait_until(
        lambda: not fake_kube.list("Job", "default", f"launcher.dev/run={old.name}")[0],
        timeout=30,
        message="its Job's removal",
    )
    assert not fake_kube.list("JobSet", "default", f"launcher.dev/run={old.name}")[0]
    assert fake_kube.list("JobSet", "default", f"launcher.dev/run={young.name}")[0]
    backend.close()


def test_a_connection_cut_while_the_record_is_created_still_gives_one_whole_run(fake_kube):
    # The server goes away (connections cut, then refused for a moment) while the submit
    # creates the ConfigMap: the create is retried when the server is back, and the run
    # is whole (not a JobSet without its record, STARTING forever).
    backend = make_backend()
    spec = run_spec("cut-abc123", worker("--lines", "1"))
    held = fake_kube.faults.inject("create", "configmaps", delay=0.5, times=1)

    def cut_when_held() -> None:
        wait_until(lambda: held.fired, timeout=30, message="the ConfigMap create")
        fake_kube.faults.refuse_connections(0.7)

    cutter = threading.Thread(target=cut_when_held, daemon=True)
    cutter.start()
    backend.submit(spec, [])
    cutter.join(10)
    for kind in ("JobSet", "ConfigMap"):
        assert len(fake_kube.list(kind, "default", f"launcher.dev/run={spec.name}")[0]) == 1, kind
    final = wait_until(
        lambda: (r := backend.get(spec.name)).status.is_terminal and r, timeout=30, message="the run's end"
    )
    assert final.status is RunStatus.COMPLETED
    backend.close()
