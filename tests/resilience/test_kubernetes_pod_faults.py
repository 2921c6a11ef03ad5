"""On Kubernetes (the fake cluster as a program, `--fault rank=N,kind=hang|oom|slow`): a rank
whose processes stop is a hang its peer sees (stacks in the log, class `hang`, the JobSet's
restart completes); an OOM-killed pod is `oom` and not retried; a rank whose CPU is
throttled is named a straggler with its step time against the other ranks'."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.fakes.kube.runc import runc_check
from tests.kubernetes.test_restart_update import record
from tests.kubernetes.test_runc import ZIPAPP
from tests.resilience.test_kubernetes_excluded_nodes import launcher

# Two ranks that meet over MASTER_ADDR:MASTER_PORT each step, as a collective does: when one
# stops, the other waits in wait_for_the_allreduce and makes no progress either.
ALLREDUCE = """\
import os, socket, time
rank, restart = int(os.environ["NODE_RANK"]), os.environ.get("LAUNCHER_RESTART_ATTEMPT", "0")
addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
print('@@launcher.heartbeat {"step": 0}', flush=True)
peer = None
def wait_for_the_allreduce():
    global peer
    if peer is None and rank == 0:
        peer = socket.create_server(addr).accept()[0]
    while peer is None:
        try:
            peer = socket.create_connection(addr)
        except OSError:
            time.sleep(0.05)
    peer.sendall(b"x")
    assert peer.recv(1) == b"x"
for step in range(1, 400 if restart == "0" else 5):
    wait_for_the_allreduce()
    print('@@launcher.heartbeat {"step": %d}' % step, flush=True)
    time.sleep(0.05)
print("rank", rank, "finished in restart", restart)
"""


def submit(tmp_path: Path, capsys, name: str, command: str, *extra: str, **fields) -> tuple[int, str]:
    spec = tmp_path / f"{name}.yaml"
    body = {"name": name, "image": "ghcr.io/example/trainer:2.0", "command": command, **fields}
    spec.write_text(yaml.safe_dump(body))
    capsys.readouterr()
    code = launcher("run", "-f", str(spec), "--cluster", "fake", *extra)
    out, err = capsys.readouterr()
    m = re.search(rf"Run ({name}-[a-z0-9]{{6}}) (?:submitted|started)", out + err)
    assert m, out + err
    return code, m.group(1)


def get_run(capsys, name: str) -> dict:
    capsys.readouterr()
    assert launcher("get", "runs", name, "-o", "json") == 0
    (run,) = json.loads(capsys.readouterr().out)
    return run


def test_a_rank_that_stops_is_a_hang_with_stacks_and_the_restart_completes(fake_kube_program, tmp_path, capsys):
    # A short grace: the stopped rank ignores SIGTERM until the SIGKILL after it.
    fake_kube_program("--nodes", "2", "--grace-seconds", "1", "--fault", "rank=1,kind=hang,after=1", profile=ZIPAPP)
    code, name = submit(
        tmp_path,
        capsys,
        "hangs",
        f"python3 - <<'EOF'\n{ALLREDUCE}EOF",
        "--follow",
        compute={"nodes": 2},
        resilience={"hang_timeout": "3s"},
        # No max_retries: a hang is the system's, which the JobSet restarts without counting.
        scheduling={"retry_on_system_failure": True},
    )
    rec = record(capsys, name)
    assert code == 0 and rec["status"] == "COMPLETED", rec
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "COMPLETED"]
    failure = rec["attempts"][0]["failure"]
    assert failure["class"] == "hang" and failure["retried_as"] == "system", failure
    # The restart took the pods and their termination messages: the Job's event has the exit code.
    assert failure["evidence"] == (
        "rank 0: hang: exit code 69 (the entrypoint saw no progress for resilience.hang_timeout)"
    )
    assert get_run(capsys, name)["attempts"][0]["failure"]["class"] == "hang"
    capsys.readouterr()
    assert launcher("logs", name, "--attempt", "1", "--rank", "0") == 0
    logs = capsys.readouterr().out
    assert "hang: dumping the Python stacks of process(es)" in logs
    assert "in wait_for_the_allreduce" in logs  # rank 0 waits for the rank that stopped
    capsys.readouterr()
    assert launcher("logs", name, "--attempt", "2", "--rank", "1") == 0
    assert "rank 1 finished in restart 1" in capsys.readouterr().out


def test_an_oom_killed_pod_is_oom_and_not_retried(fake_kube_program, tmp_path, capsys):
    prog = fake_kube_program("--nodes", "1", profile=ZIPAPP)
    prog.fault_pod("oom", rank=0, after=1)  # at run time, through the admin API
    beats = "for step in $(seq 1 600); do launcher-heartbeat $step; sleep 0.05; done"
    code, name = submit(tmp_path, capsys, "eats", beats, "--follow", scheduling={"retry_on_system_failure": True})
    assert code != 0
    rec = record(capsys, name)
    assert rec["status"] == "FAILED" and len(rec["attempts"]) == 1, rec
    failure = rec["attempts"][0]["failure"]
    assert failure["class"] == "oom" and failure["retried_as"] == "user", failure
    assert failure["evidence"] == "rank 0: OOMKilled", failure
    assert rec["attempts"][0]["reason"] == "rank 0 exited with code 137 (out of memory)"
    assert get_run(capsys, name)["failure"]["class"] == "oom"
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    assert "oom" in capsys.readouterr().out


# Fails with an NCCL watchdog's line in attempt 1, as a rank whose peer's GPU broke does.
COLLECTIVE_THEN_OK = """\
import os, sys
if os.environ["LAUNCHER_ATTEMPT"] == "1":
    print("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
          "WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.", flush=True)
    sys.exit(1)
print("attempt", os.environ["LAUNCHER_ATTEMPT"], "trained")
"""


@pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")
def test_a_collective_failure_is_restarted_by_the_jobset_without_counting(fake_kube_program, tmp_path, capsys):
    # runc: the entrypoint ends with the class's code only in a container (/dev/termination-log).
    fake_kube_program("--runtime", "runc", "--nodes", "1", profile=ZIPAPP)
    code, name = submit(
        tmp_path,
        capsys,
        "nccl",
        f"python3 - <<'EOF'\n{COLLECTIVE_THEN_OK}EOF",
        "--follow",
        scheduling={"retry_on_system_failure": True},  # max_retries 0: a user failure would end the run
    )
    rec = record(capsys, name)
    assert code == 0 and rec["status"] == "COMPLETED", rec
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "COMPLETED"]
    failure = rec["attempts"][0]["failure"]
    assert failure["class"] == "collective" and failure["retried_as"] == "system", failure
    # The restart took the pod and its termination message: the Job's event has the exit code.
    assert failure["evidence"] == (
        "rank 0: collective: exit code 71 (the entrypoint found a collective's failure; the log has its evidence)"
    )
    capsys.readouterr()
    assert launcher("logs", name, "--attempt", "1") == 0
    logs = capsys.readouterr().out
    assert "Watchdog caught collective operation timeout" in logs
    assert "[launcher] exit code 71 for the command's 1: a collective failure" in logs, logs
    capsys.readouterr()
    assert launcher("logs", name, "--attempt", "2") == 0
    assert "attempt 2 trained" in capsys.readouterr().out


@pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")
def test_goodput_on_kubernetes_loses_only_what_came_after_the_last_progress(fake_kube_program, tmp_path, capsys):
    # runc: each rank leaves its progress and setup in /dev/termination-log.
    fake_kube_program("--runtime", "runc", "--nodes", "1", profile=ZIPAPP)
    # Progress for a while, then none until the command fails.
    beats = "for step in $(seq 1 8); do launcher-heartbeat $step; sleep 0.1; done; sleep 1; exit 3"
    code, name = submit(tmp_path, capsys, "lossy", beats, "--follow")
    assert code != 0
    rec = record(capsys, name)
    parts = rec["goodput"]
    # Before, a failed attempt's whole running time was lost: its heartbeats made nothing productive.
    assert parts["productive"] > 0 and parts["lost"] > 0, parts
    assert sum(parts[p] for p in ("queued", "starting", "productive", "lost", "restarting")) == pytest.approx(
        parts["wall"], abs=0.01
    )


# Steps of CPU work: a rank whose CPU is throttled takes longer over each (a sleep would not).
CPU_STEPS = """\
import json, time
for step in range(1, 25):
    sum(range(500_000))
    print("@@launcher.heartbeat " + json.dumps({"step": step, "time": time.time()}), flush=True)
"""


@pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")
def test_a_throttled_rank_is_named_a_straggler_with_its_step_time(fake_kube_program, tmp_path, capsys):
    # runc: the process runtime has no /dev/termination-log, where each rank leaves its step time.
    fake_kube_program("--runtime", "runc", "--nodes", "2", "--fault", "rank=1,kind=slow", profile=ZIPAPP)
    code, name = submit(
        tmp_path,
        capsys,
        "slow",
        f"python3 - <<'EOF'\n{CPU_STEPS}EOF",
        "--follow",
        compute={"nodes": 2},
        resilience={"straggler_factor": 1.5},  # the fake throttles to a tenth: a margin on a loaded machine
    )
    assert code == 0
    rec = record(capsys, name)
    (line,) = rec["attempts"][0]["stragglers"]
    node = next(r["node"] for r in rec["attempts"][0]["ranks"] if r["rank"] == 1)
    m = re.fullmatch(
        rf"straggler: rank 1 on {node}: ([0-9.]+) s a step against the other ranks' median ([0-9.]+) s "
        r"\(([0-9.]+)x, resilience.straggler_factor 1.5\) over its last 20 steps",
        line,
    )
    assert m, line
    assert float(m.group(1)) > 1.5 * float(m.group(2))
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    assert f"  Straggler: {line.removeprefix('straggler: ')}" in capsys.readouterr().out
    capsys.readouterr()
    assert launcher("logs", name, "--rank", "1") == 0
    assert f"[launcher] progress: {m.group(1)} s a step (the median of its last 20)" in capsys.readouterr().out
