"""On Kubernetes (the fake cluster as a program, `--fault rank=1,kind=slow`): rank 0's entrypoint
hears the other ranks' step times while they run (launcher.entrypoint.progress) and names a
throttled rank a straggler in its log while the run is RUNNING; with exclude_faulty_nodes and
a short resilience.straggler_grace rank 0 tells the straggler, whose own pod then fails the
attempt as `hardware`, pinned to its node, which `run -r` keeps off: while the pods are there,
and after a JobSet restart has deleted them (its events are left)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import wait_until
from tests.fakes.kube.runc import runc_check
from tests.kubernetes.test_restart_update import record, wait_status
from tests.kubernetes.test_runc import ZIPAPP
from tests.resilience.test_kubernetes_excluded_nodes import launcher
from tests.resilience.test_kubernetes_pod_faults import submit

# Steps of CPU work (a throttled rank takes longer over each; a sleep would not), for a minute
# at most on attempt 1 (the test ends it sooner), 25 steps on a later one.
CPU_STEPS = """\
import json, os, time
end = time.time() + (60 if os.environ["LAUNCHER_ATTEMPT"] == "1" else 0)
step = 0
while step < 25 or time.time() < end:
    step += 1
    sum(range(300_000))
    print("@@launcher.heartbeat " + json.dumps({"step": step, "time": time.time()}), flush=True)
print("rank", os.environ["NODE_RANK"], "done")
"""
COMMAND = f"python3 - <<'EOF'\n{CPU_STEPS}EOF"
LINE = (
    r"straggler: rank 1 on (?P<node>fake-node-\d): (?P<slow>[0-9.]+) s a step against the other ranks' median "
    r"(?P<median>[0-9.]+) s \([0-9.]+x, resilience.straggler_factor 1.5\) over its last 20 steps"
)


def logs(capsys, name: str, rank: int) -> str:
    capsys.readouterr()
    assert launcher("logs", name, "--rank", str(rank)) == 0
    return capsys.readouterr().out


RUNC = pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")


# Processes on the host, or runc containers in the host's network namespace: either way the
# ranks meet on 127.0.0.1, where the fake's kubelet points MASTER_ADDR and the ranks' hosts.
def test_rank_0_names_a_straggler_in_its_log_while_the_run_runs(fake_kube_program, tmp_path, capsys):
    # The suite's runtime (LAUNCHER_TEST_RUNTIME): runc where CI has it, host processes else.
    fake_kube_program("--nodes", "2", "--fault", "rank=1,kind=slow", profile=ZIPAPP)
    _, name = submit(
        tmp_path,
        capsys,
        "slow",
        COMMAND,
        "--no-follow",
        compute={"nodes": 2},
        # the fake throttles to a tenth: a margin on a loaded machine; no grace ends it here
        resilience={"straggler_factor": 1.5, "exclude_faulty_nodes": False},
    )
    m = wait_until(lambda: re.search(LINE, logs(capsys, name, 0)), 60, interval=0.5, message="a straggler line")
    assert record(capsys, name)["status"] == "RUNNING"
    assert float(m.group("slow")) > 1.5 * float(m.group("median"))
    node = next(r["node"] for r in record(capsys, name)["attempts"][0]["ranks"] if r["rank"] == 1)
    assert m.group("node") == node
    assert logs(capsys, name, 0).count("straggler: rank 1 ") == 1  # named once
    assert launcher("stop", name, "-y") == 0


@RUNC
def test_a_straggler_past_its_grace_is_a_fault_of_its_node_and_run_r_keeps_off_it(fake_kube_program, tmp_path, capsys):
    # runc: the process runtime has no /dev/termination-log, where rank 0 says whom it named.
    fake_kube_program("--runtime", "runc", "--nodes", "3", "--fault", "rank=1,kind=slow", profile=ZIPAPP)
    _, name = submit(
        tmp_path,
        capsys,
        "lags",
        COMMAND,
        "--no-follow",
        compute={"nodes": 2},
        resilience={"straggler_factor": 1.5, "straggler_grace": "2s"},
    )
    rec = wait_status(capsys, name, "FAILED", timeout=90)
    first = rec["attempts"][0]
    assert first["failure"]["class"] == "hardware", first
    evidence = first["failure"]["evidence"]
    m = re.match(rf"rank 1: hardware: {LINE}; still one after \d+ s \(resilience.straggler_grace\)$", evidence)
    assert m, evidence
    # Rank 0 told the straggler, whose own pod failed first, on its own node.
    node = m.group("node")
    assert node == next(r["node"] for r in first["ranks"] if r["rank"] == 1)
    assert node != next(r["node"] for r in first["ranks"] if r["rank"] == 0)
    (line,) = first["stragglers"]  # named live by rank 0, not again from the step times the ranks left
    assert (named := re.fullmatch(LINE, line)) and named.group("node") == node, first["stragglers"]
    assert first["reason"].startswith("rank 1 exited with code 72: hardware: straggler: rank 1 "), first
    assert f"{evidence.removeprefix('rank 1: ')}: rank 0 says so; ending this rank" in logs(capsys, name, 1)

    capsys.readouterr()
    assert launcher("run", "-r", name, "--follow") == 0
    rec = record(capsys, name)
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]
    assert node not in {r["node"] for r in rec["attempts"][1]["ranks"]}
    assert rec["excluded_nodes"] == [{"node": node, "class": "hardware", "evidence": evidence, "attempt": 1}]
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    assert f"Excluded:   node {node} (hardware in attempt 1: rank 1: hardware: straggler: rank 1 on {node}: " in (
        capsys.readouterr().out
    )


# Attempt 2, the JobSet's restart, fails as a user's failure, so that the run ends FAILED.
FAILS_ON_ATTEMPT_2 = 'import sys, os\nif os.environ["LAUNCHER_ATTEMPT"] == "2":\n    sys.exit(1)\n'


@RUNC
def test_a_straggler_is_pinned_to_its_node_after_a_jobset_restart(fake_kube_program, tmp_path, capsys):
    # runc: the process runtime has no /dev/termination-log. The fault strikes attempt 1 only.
    fake_kube_program("--runtime", "runc", "--nodes", "3", "--fault", "rank=1,kind=slow", profile=ZIPAPP)
    _, name = submit(
        tmp_path,
        capsys,
        "restarts",
        f"python3 - <<'EOF'\n{FAILS_ON_ATTEMPT_2}{CPU_STEPS}EOF",
        "--no-follow",
        compute={"nodes": 2},
        resilience={"straggler_factor": 1.5, "straggler_grace": "2s"},
        scheduling={"retry_on_system_failure": True},  # the JobSet restarts attempt 1 free
    )

    def straggler_node() -> str | None:  # while attempt 1 runs: its pods are there
        attempts = record(capsys, name)["attempts"]
        return next((r["node"] for r in attempts[0]["ranks"] if r["rank"] == 1), None) if len(attempts) == 1 else ""

    node = wait_until(straggler_node, 30, interval=0.2, message="rank 1's node in attempt 1")
    assert node, "attempt 1 ended before its rank 1's node was seen"
    rec = wait_status(capsys, name, "FAILED", timeout=120)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "FAILED"], rec
    first = rec["attempts"][0]
    # The restart deleted the pods: the Job's failure event names the straggler's pod, and its
    # Scheduled event its node.
    assert first["failure"]["class"] == "hardware" and first["failure"]["retried_as"] == "system", first
    evidence = first["failure"]["evidence"]
    assert evidence == (
        "rank 1: hardware: exit code 72 (the rank stayed a straggler for resilience.straggler_grace, "
        "and rank 0 told it to end)"
    ), evidence
    (failed,) = [r for r in first["ranks"] if r["status"] == "FAILED"]
    assert (failed["rank"], failed["exit_code"], failed["node"]) == (1, 72, node), first["ranks"]

    capsys.readouterr()
    assert launcher("run", "-r", name, "--follow") == 0
    rec = record(capsys, name)
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "FAILED"), (3, "COMPLETED")]
    assert node not in {r["node"] for r in rec["attempts"][2]["ranks"]}
    assert rec["excluded_nodes"] == [{"node": node, "class": "hardware", "evidence": evidence, "attempt": 1}]


def test_rank_0_takes_reports_only_from_the_ranks_addresses_and_tells_the_straggler(capfd):
    """The channel's rank 0 end over real sockets: a report from an address that is not the
    rank's host's is refused (said once in the log), the rank's own is taken; past the grace
    rank 0 tells the straggler on its connection and goes on; once that connection has gone
    (the straggler ended), nothing ends rank 0. A straggler that cannot be told (no
    connection from it) makes rank 0 end the attempt, with the code that pins no node of its own."""
    import json
    import socket
    import time

    from launcher.entrypoint.progress import Collector
    from launcher.entrypoint.watch import Watch
    from launcher.pod import contract

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    watch = Watch(None)  # rank 0's own steps: 0.1 s each, as their heartbeats' times say
    began = time.time() - 3
    for i in range(22):  # one chunk each, as a command's lines come
        watch.feed(b'@@launcher.heartbeat {"step": %d, "time": %f}\n' % (i, began + 0.1 * i))
    slow = {"rank": 1, "node": "node-b", "step": 40, "step_seconds": 1.0, "steps_timed": 20}
    line = "straggler: rank 1 on node-b: 1.000 s a step against the other ranks' median 0.100 s (10.0x, "

    def report(source: str) -> socket.socket:
        c = socket.create_connection(("127.0.0.1", port), source_address=(source, 0))
        c.sendall((json.dumps(slow) + "\n").encode())
        return c

    # Every rank's host is 127.0.0.2 (on Linux all of 127/8 is the loopback's).
    collector = Collector(port, 2, "127.0.0.2", "node-a", 2.0, 0.0)
    assert collector.listen() is None
    collector.start(watch)
    try:
        report("127.0.0.3").close()
        wait_until(lambda: "refused a report" in capfd.readouterr().out or None, 10, message="the refusal")
        assert collector.judge(watch) is None and not collector.named  # nothing taken from it
        with report("127.0.0.2") as straggler:
            wait_until(lambda: 1 in collector.reports or None, 10, interval=0.1, message="its report taken")
            assert collector.judge(watch) is None and collector.named  # named and told, not ended here
            straggler.settimeout(10)
            told = json.loads(straggler.makefile().readline())
        assert told["straggler"].startswith(f"hardware: {line}") and told["line"] == collector.lines()[0], told
        assert "straggler: told rank 1 to end, so that its pod is the one that fails" in capfd.readouterr().out
        time.sleep(1)  # the straggler's connection goes, as when it ends
        assert collector.judge(watch) is None
    finally:
        collector.stop()
    assert collector.lines() == [f"{line}resilience.straggler_factor 2) over its last 20 steps"]

    collector = Collector(port, 2, "127.0.0.2", "node-a", 2.0, 0.0)
    assert collector.listen() is None
    collector.start(watch)
    try:
        report("127.0.0.2").close()  # reported, then gone: it cannot be told
        verdict = wait_until(lambda: collector.judge(watch), 10, interval=0.1, message="rank 0's own end")
    finally:
        collector.stop()
    assert verdict.exit_code == contract.EXIT_STRAGGLER_PEER and verdict.reason.startswith(f"hardware: {line}")


def test_a_rank_told_it_is_a_straggler_ends_with_its_own_code():
    """The channel's other end: the verdict rank 0 sends for this rank ends it (exit code 72);
    one for another rank does not."""
    import json
    import socket

    from launcher.entrypoint.progress import Reporter
    from launcher.entrypoint.watch import Watch
    from launcher.pod import contract

    line = "straggler: rank 1 on node-b: 1.000 s a step ..."
    verdict = f"hardware: {line}; still one after 2 s"
    with socket.create_server(("127.0.0.1", 0)) as server:
        reporter = Reporter("127.0.0.1", server.getsockname()[1], 1, "node-b")
        watch = Watch(None)
        reporter.start(watch)
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(10)
                assert json.loads(conn.makefile().readline())["rank"] == 1
                conn.sendall((json.dumps({"straggler": verdict.replace("rank 1", "rank 2")}) + "\n").encode())
                conn.sendall((json.dumps({"straggler": verdict, "line": line}) + "\n").encode())
                told = wait_until(lambda: reporter.judge(watch), 10, interval=0.1, message="the verdict heard")
        finally:
            reporter.stop()
    assert told == (verdict, contract.EXIT_STRAGGLER)
    assert reporter.lines() == [line]  # for its termination message


def test_which_node_a_straggler_s_exit_code_pins_once_its_pods_are_gone():
    """From a child Job's failure event and the failed pod's Scheduled node, as after a JobSet
    restart: 72 is the straggler's own pod, so its node; 74 is rank 0's, so none (never rank
    0's own), unless rank 0's evidence, while its pod was there, named the straggler."""
    from launcher.backends.base import Attempt, RankState, RunStatus
    from launcher.backends.kubernetes.attempts import fault_node_of
    from launcher.backends.kubernetes.status import attempt_from_event, child_job_name

    def after_restart(rank: int, code: int) -> Attempt:
        pod = f"{child_job_name('lags-abc123')}-{rank}-x7k2p"
        message = f"Container main for pod ns/{pod} failed with exit code {code} matching FailJob rule at index 1"
        event = {"reason": "PodFailurePolicy", "message": message, "lastTimestamp": "2026-01-01T00:00:00Z"}
        return attempt_from_event(1, "lags-abc123", 2, event, {pod: f"gpu-{rank}"})

    told = after_restart(1, 72)
    assert (told.failure_class, fault_node_of(told)) == ("hardware", "gpu-1"), told
    alone = after_restart(0, 74)
    assert (alone.failure_class, fault_node_of(alone)) == ("hardware", None), alone
    named = Attempt(
        index=1,
        status=RunStatus.FAILED,
        ranks=[RankState(0, RunStatus.FAILED, 74, node="gpu-0"), RankState(1, RunStatus.STOPPED, node="gpu-1")],
        failure_class="hardware",
        evidence="rank 0: hardware: straggler: rank 1 on gpu-1: 1.000 s a step ...; still one after 2 s",
    )
    assert fault_node_of(named) == "gpu-1"
