"""On Kubernetes (the fake cluster as a program, `--fault rank=1,kind=slow`): rank 0's entrypoint
hears the other ranks' step times while they run (launcher.entrypoint.progress) and names a
throttled rank a straggler in its log while the run is RUNNING; with exclude_faulty_nodes and
a short resilience.straggler_grace it ends the attempt as `hardware`, pinned to the straggler's
node, which `run -r` keeps off."""

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
    m = re.match(rf"rank 0: hardware: {LINE}; still one after \d+ s \(resilience.straggler_grace\)$", evidence)
    assert m, evidence
    # The straggler's node, as its entrypoint told rank 0 (its pod went with the group), not rank 0's.
    node = m.group("node")
    assert node != next(r["node"] for r in first["ranks"] if r["rank"] == 0)
    (line,) = first["stragglers"]  # named live by rank 0, not again from the step times the ranks left
    assert (named := re.fullmatch(LINE, line)) and named.group("node") == node, first["stragglers"]
    assert first["reason"].startswith("rank 0 exited with code 72: hardware: straggler: rank 1 "), first

    capsys.readouterr()
    assert launcher("run", "-r", name, "--follow") == 0
    rec = record(capsys, name)
    assert [(a["attempt"], a["status"]) for a in rec["attempts"]] == [(1, "FAILED"), (2, "COMPLETED")]
    assert node not in {r["node"] for r in rec["attempts"][1]["ranks"]}
    assert rec["excluded_nodes"] == [{"node": node, "class": "hardware", "evidence": evidence, "attempt": 1}]
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    assert f"Excluded:   node {node} (hardware in attempt 1: rank 0: hardware: straggler: rank 1 on {node}: " in (
        capsys.readouterr().out
    )


def test_rank_0_takes_reports_only_from_the_ranks_addresses(capfd):
    """The channel's rank 0 end over real sockets: a report from an address that is not the
    rank's host's is refused (said once in the log), the rank's own is taken; past the grace
    the straggler is the verdict that ends the attempt."""
    import json
    import socket
    import time

    from launcher.entrypoint.progress import Collector
    from launcher.entrypoint.watch import Watch

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Every rank's host is 127.0.0.2 (on Linux all of 127/8 is the loopback's).
    collector = Collector(port, 2, "127.0.0.2", "node-a", 2.0, 0.0)
    assert collector.listen() is None
    watch = Watch(None)  # rank 0's own steps: 0.1 s each, as their heartbeats' times say
    began = time.time() - 3
    for i in range(22):  # one chunk each, as a command's lines come
        watch.feed(b'@@launcher.heartbeat {"step": %d, "time": %f}\n' % (i, began + 0.1 * i))
    collector.start(watch)
    slow = {"rank": 1, "node": "node-b", "step": 40, "step_seconds": 1.0, "steps_timed": 20}

    def report(source: str) -> None:
        with socket.create_connection(("127.0.0.1", port), source_address=(source, 0)) as c:
            c.sendall((json.dumps(slow) + "\n").encode())

    try:
        report("127.0.0.3")
        wait_until(lambda: "refused a report" in capfd.readouterr().out or None, 10, message="the refusal")
        assert collector.judge(watch) is None and not collector.named  # nothing taken from it
        report("127.0.0.2")
        verdict = wait_until(lambda: collector.judge(watch), 10, interval=0.1, message="the straggler")
    finally:
        collector.stop()
    line = "straggler: rank 1 on node-b: 1.000 s a step against the other ranks' median 0.100 s (10.0x, "
    assert verdict.startswith(f"hardware: {line}"), verdict
    assert collector.lines() == [f"{line}resilience.straggler_factor 2) over its last 20 steps"]
