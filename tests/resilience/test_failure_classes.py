"""Failed attempts are classified with the line that says why (launcher.pod.failures), and
the class decides the retry: real local runs of the entrypoint, through the CLI."""

from __future__ import annotations

import json

from launcher.pod.failures import COLLECTIVE, HARDWARE, OOM, PREEMPTED, USER, classify

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."


def test_a_gpu_xid_is_hardware_and_is_retried_free_as_a_system_failure(cli):
    spec = cli.spec(
        "xid",
        f"""\
        name: xid
        command: |
          if [ "$LAUNCHER_ATTEMPT" = 1 ]; then echo '{XID}'; echo more output; exit 1; fi
          echo "attempt $LAUNCHER_ATTEMPT is fine"
        scheduling: {{retry_on_system_failure: true, retry_backoff: {{first: 0.1s}}}}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "xid", "-o", "json").stdout)
    assert rec["status"] == "COMPLETED"
    first, second = rec["attempts"]
    assert first["failure"]["class"] == "hardware" and first["failure"]["retried_as"] == "system"
    assert first["failure"]["evidence"] == f"rank 0: {XID}"
    assert second["status"] == "COMPLETED" and second["failure"] is None
    assert rec["failure"]["class"] == "hardware"  # the run's latest classified failure
    text = cli("describe", "run", "xid").stdout
    assert f"Failure:    hardware in attempt 1: rank 0: {XID}" in text
    assert f"  Failure: hardware (a system failure): rank 0: {XID}" in text
    listing = json.loads(cli("get", "runs", "-o", "json").stdout)
    assert listing[0]["attempts"][0]["failure"]["class"] == "hardware"


def test_cuda_out_of_memory_is_oom_and_not_retried_by_default(cli):
    spec = cli.spec(
        "oom",
        """\
        name: oom
        command: |
          echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'
          exit 1
        scheduling: {retry_on_system_failure: true}
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "oom", "-o", "json").stdout)
    assert rec["status"] == "FAILED" and len(rec["attempts"]) == 1
    assert rec["failure"]["class"] == "oom" and rec["failure"]["retried_as"] == "user"
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in rec["failure"]["evidence"]


def test_evidence_that_scrolled_far_out_of_the_log_tail_still_counts(cli):
    # The entrypoint keeps the first evidence line of each class as the output streams past.
    spec = cli.spec(
        "early",
        """\
        name: early
        command: |
          echo '[E ProcessGroupNCCL.cpp:563] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)'
          python3 -c "print(('x' * 1000 + '\\n') * 300, end='')"
          exit 1
        """,
    )
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 1
    rec = json.loads(cli("describe", "run", "early", "-o", "json").stdout)
    assert rec["failure"]["class"] == "collective"
    assert "Watchdog caught collective operation timeout" in rec["failure"]["evidence"]


def test_the_classifier_reads_reasons_lines_and_exit_codes():
    assert classify(1, None, ["hello", XID]).kind == HARDWARE
    # A bad GPU makes the other collectives time out: the hardware line is the cause.
    assert classify(1, None, ["Watchdog caught collective operation timeout", XID]).kind == HARDWARE
    assert classify(137, "OOMKilled", []).kind == OOM
    assert classify(137, None, ["Out of memory: Killed process 12 (python)"]).kind == OOM
    # The OOM killer's note is no evidence for a rank that was not killed.
    assert classify(1, None, ["Out of memory: Killed process 12 (python)"]).kind == USER
    assert classify(143, "Preempted by a higher-priority workload", []).kind == PREEMPTED
    assert classify(1, None, ["gloo: Timed out waiting 1800000ms for recv"]).kind == COLLECTIVE
    assert classify(1, None, ["Xid 13: graphics engine exception"]).kind == USER  # 13 is an app error
    long = classify(1, None, ["CUDA out of memory " + "y" * 1000])
    assert long.kind == OOM and long.evidence is not None and len(long.evidence) == 300
