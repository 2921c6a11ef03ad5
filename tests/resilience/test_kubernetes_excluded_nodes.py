"""On Kubernetes (the fake cluster as a program, `--fault node=fake-node-0,kind=xid`): a rank
on a node whose GPU fell off the bus fails; the node's condition makes the attempt `hardware`,
and the next attempt (`run -r`) keeps off that node, which the record and `describe` list. A
run that cannot fit without it waits and says why."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.kubernetes.test_restart_update import record, wait_status

XID = "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus"


def launcher(*args: str) -> int:
    try:
        return run_cli(cli, list(args))
    except SystemExit as e:  # `run --follow` exits with the run's outcome
        return int(e.code or 0)


def submit(tmp_path: Path, capsys, **fields) -> str:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "xid",
                "image": "ghcr.io/example/trainer:2.0",
                "command": 'echo "rank $NODE_RANK done"',
                "compute": {"nodes": 2},
                **fields,
            }
        )
    )
    capsys.readouterr()
    assert launcher("run", "-f", str(spec), "--cluster", "fake", "--no-follow") == 0
    return re.search(r"Run (xid-[a-z0-9]{6}) submitted", capsys.readouterr().out).group(1)


def test_the_next_attempt_keeps_off_the_node_whose_gpu_failed(fake_kube_program, tmp_path, capsys):
    prog = fake_kube_program("--nodes", "3", "--fault", "node=fake-node-0,kind=xid")
    name = submit(tmp_path, capsys)
    rec = wait_status(capsys, name, "FAILED")
    first = rec["attempts"][0]
    assert first["failure"]["class"] == "hardware", first
    assert f"node fake-node-0: GpuXid XidError: {XID}" in first["failure"]["evidence"]
    bad = next(r for r in first["ranks"] if r["node"] == "fake-node-0")
    assert first["failure"]["evidence"].startswith(f"rank {bad['rank']}: ")

    capsys.readouterr()
    assert launcher("run", "-r", name, "--follow") == 0
    out, err = capsys.readouterr()
    assert f"Run {name} restarted: attempt 2." in out, out + err
    rec = record(capsys, name)
    assert rec["status"] == "COMPLETED"
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]
    assert {r["node"] for r in rec["attempts"][1]["ranks"]} == {"fake-node-1", "fake-node-2"}
    assert rec["excluded_nodes"] == [
        {"node": "fake-node-0", "class": "hardware", "evidence": first["failure"]["evidence"], "attempt": 1}
    ]
    # The JobSet the restart created says so to the scheduler, by the node's name.
    pod = prog.get("JobSet", "default", name)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["fake-node-0"]}]}]

    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    text = capsys.readouterr().out
    assert f"Excluded:   node fake-node-0 (hardware in attempt 1: rank {bad['rank']}: node fake-node-0: " in text


def test_a_failure_whose_pods_a_restart_deleted_is_pinned_to_its_node_by_its_scheduled_event(
    fake_kube_program, tmp_path, capsys
):
    fake_kube_program("--nodes", "2", "--fault", "node=fake-node-0,kind=xid")
    # The JobSet controller's restart deletes attempt 1's pods: only the Job's failure event
    # (the pod's name, its exit code) and the pod's Scheduled event are left of it.
    name = submit(tmp_path, capsys, scheduling={"max_retries": 1})
    rec = wait_until(
        lambda: (r := record(capsys, name))["status"] == "FAILED" and len(r["attempts"]) == 2 and r,
        60,
        interval=0.2,
        message="both attempts to fail",
    )
    first = rec["attempts"][0]
    failed = [r for r in first["ranks"] if r["status"] == "FAILED"]
    assert [r["node"] for r in failed] == ["fake-node-0"], first
    assert first["failure"]["class"] == "hardware", first
    assert first["failure"]["evidence"] == f"rank {failed[0]['rank']}: node fake-node-0: GpuXid XidError: {XID}"
    capsys.readouterr()
    assert launcher("run", "-r", name, "--no-follow") == 0
    # Pinned from attempt 1, the first failure there (attempt 2's pods alone told it before).
    assert record(capsys, name)["excluded_nodes"] == [
        {"node": "fake-node-0", "class": "hardware", "evidence": first["failure"]["evidence"], "attempt": 1}
    ]
    assert launcher("stop", name, "-y") == 0


def test_a_run_that_cannot_fit_without_the_excluded_node_waits_and_says_why(fake_kube_program, tmp_path, capsys):
    fake_kube_program("--nodes", "2", "--fault", "node=fake-node-0,kind=xid")
    name = submit(tmp_path, capsys)
    wait_status(capsys, name, "FAILED")
    capsys.readouterr()
    assert launcher("run", "-r", name, "--no-follow") == 0
    rec = wait_until(
        lambda: (r := record(capsys, name))["status"] == "QUEUED" and "waiting for a node" in (r["reason"] or "") and r,
        60,
        interval=0.2,
        message="the restarted run to wait for a node",
    )
    assert "node(s) didn't match Pod's node affinity/selector" in rec["reason"]
    assert rec["reason"].endswith(
        "; it keeps off fake-node-0 (hardware in attempt 1) (resilience.exclude_faulty_nodes)"
    )
    assert [e["node"] for e in rec["excluded_nodes"]] == ["fake-node-0"]
    assert launcher("stop", name, "-y") == 0


def test_exclude_faulty_nodes_false_keeps_every_node(fake_kube_program, tmp_path, capsys):
    prog = fake_kube_program("--nodes", "3", "--fault", "node=fake-node-0,kind=xid")
    name = submit(tmp_path, capsys, resilience={"exclude_faulty_nodes": False}, scheduling={"max_retries": 0})
    wait_status(capsys, name, "FAILED")
    capsys.readouterr()
    assert launcher("run", "-r", name, "--no-follow") == 0
    pod = prog.get("JobSet", "default", name)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "nodeAffinity" not in (pod.get("affinity") or {})
    assert record(capsys, name)["excluded_nodes"] == []
    assert launcher("stop", name, "-y") == 0


def test_a_node_tells_a_hardware_fault_by_a_condition_or_a_taint_and_not_by_its_stock_conditions():
    from launcher.backends.kubernetes.attempts import node_fault

    def node(conditions=(), taints=()):
        return {
            "metadata": {"name": "n1"},
            "spec": {"taints": list(taints)},
            "status": {"conditions": list(conditions)},
        }

    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    pressure = {"type": "MemoryPressure", "status": "True", "reason": "KubeletHasInsufficientMemory"}
    assert node_fault(node([ready, pressure])) is None
    healed = {"type": "GpuXid", "status": "False", "reason": "XidError", "message": XID}
    assert node_fault(node([ready, healed])) is None
    assert node_fault(node([ready, {**healed, "status": "True"}])) == f"node n1: GpuXid XidError: {XID}"
    taint = {"key": "nvidia.com/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}
    assert node_fault(node([ready], [taint])) == "node n1: taint nvidia.com/gpu-unhealthy=true:NoSchedule"
    assert node_fault(node([ready], [{"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}])) is None


def test_a_collective_failure_is_pinned_to_a_node_only_where_one_rank_alone_failed():
    from launcher.backends.base import Attempt, RankState, RunStatus
    from launcher.backends.kubernetes.attempts import excluded_nodes

    def attempt(index: int, failed: list[int], kind: str) -> Attempt:
        ranks = [
            RankState(
                r, RunStatus.FAILED if r in failed else RunStatus.STOPPED, 1 if r in failed else None, None, f"n{r}"
            )
            for r in range(3)
        ]
        evidence = f"rank {failed[0]}: {kind}: Watchdog caught collective operation timeout"
        return Attempt(index=index, status=RunStatus.FAILED, ranks=ranks, failure_class=kind, evidence=evidence)

    everyone = attempt(1, [0, 1, 2], "collective")  # every rank timed out: no node to blame
    alone = attempt(2, [2], "collective")
    user = attempt(3, [1], "user")
    assert [(e["node"], e["attempt"]) for e in excluded_nodes([everyone, alone, user])] == [("n2", 2)]


def test_a_restart_by_the_jobset_controller_keeps_off_a_node_tainted_for_its_fault(fake_kube_program, tmp_path, capsys):
    prog = fake_kube_program("--nodes", "3")
    go = tmp_path / "go"
    # Attempt 1 fails once the test has marked its node, as a GPU that fell off the bus does.
    command = (
        f'if [ "${{LAUNCHER_RESTART_ATTEMPT:-0}}" = 0 ]; then '
        f'for i in $(seq 300); do [ -e {go} ] && break; sleep 0.1; done; echo "{XID}"; exit 1; fi; '
        'echo "rank $NODE_RANK done"'
    )
    name = submit(tmp_path, capsys, command=command, scheduling={"max_retries": 1})
    rec = wait_status(capsys, name, "RUNNING")
    bad = rec["attempts"][0]["ranks"][0]["node"]
    # A health checker that cordons: the condition and a NoSchedule taint no launcher pod tolerates.
    prog.fault_node(bad, "xid", taint=True)
    go.touch()
    rec = wait_status(capsys, name, "COMPLETED", "FAILED")
    assert rec["status"] == "COMPLETED", rec
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "COMPLETED"]
    assert bad not in {r["node"] for r in rec["attempts"][1]["ranks"]}  # the JobSet's own restart, not `run -r`


def test_a_gpu_run_tolerates_its_gpus_taint_and_not_a_faulty_gpu_taint():
    from launcher.backends.kubernetes.render import plan_run
    from tests.fakes.kube.faults import NODE_FAULTS
    from tests.fakes.kube.scheduler import tolerated
    from tests.kubernetes.specs import PROFILE, spec

    (jobset,) = [
        m
        for m in plan_run(spec("gpus-abc123", compute={"gpus": 16, "gpu_type": "h100_80gb"}), PROFILE, []).manifests
        if m["kind"] == "JobSet"
    ]
    tolerations = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["tolerations"]
    assert tolerated(tolerations, {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    assert not tolerated(tolerations, NODE_FAULTS["xid"]["taint"])
