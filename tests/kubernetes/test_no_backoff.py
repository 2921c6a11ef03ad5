"""A Job-form retry waits out its backoff (scheduling.retry_backoff), as the Job controller
spaces a failed pod's restarts: the reconciler starts attempt N+1 only once the delay has
passed since attempt N failed, reads say when it is due, and `run --follow` and
`launcher reconcile --watch` wait for that moment (not for their next look). A run whose
every attempt fails within seconds is a crash loop. Against the fake API server."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import yaml

from launcher.backends.base import RunStatus
from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import run_spec, worker
from tests.kubernetes.test_cli import launcher


def gaps(run) -> list[float]:
    """Seconds from each attempt's end to the next one's start."""
    return [(b.started_at - a.ended_at).total_seconds() for a, b in zip(run.attempts, run.attempts[1:])]


def test_run_follow_waits_out_a_doubling_backoff_and_describe_says_crash_loop(fake_kube, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "crashing",
                "image": "ghcr.io/example/launcher:test",
                "compute": {"gpu_type": "none"},
                "command": worker("--lines", "1", "--fail-rank", "0", "--fail-code", "4"),
                "scheduling": {"max_retries": 2, "retry_backoff": {"first": "1s", "max": "1m"}},
            }
        )
    )
    code = launcher("run", "-f", str(spec), "--cluster", "fake", "--follow")
    _out, err = capsys.readouterr()
    assert code == 1, err
    name = re.search(r"Run (crashing-[a-z0-9]{6}) failed: rank 0 exited with code 4", err).group(1)
    # The follow said when each retry was due, and waited for it: as "Run X is PENDING: ... (in N s)"
    # once it follows the logs, or in its status lines when the attempts fail before it
    # saw the run start (a loaded machine).
    said = re.findall(r"attempt (\d) failed \(rank 0 exited with code 4\); a retry is due at \d\d:\d\d:\d\d", err)
    assert set(said) == {"1", "2"}, err
    run = make_backend().get(name)
    assert [a.status for a in run.attempts] == [RunStatus.FAILED] * 3
    # The cluster's times are whole seconds, as are the delays: each gap is at least its delay.
    first, second = gaps(run)
    assert first >= 1 and second >= 2, gaps(run)
    assert run.crash_loop

    assert launcher("describe", name) == 0
    text = capsys.readouterr().out
    assert "Retries:    up to 2; backoff 1 s doubling to 1 min" in text
    assert "Crash loop: each of its 3 attempts failed within 10 s of starting" in text
    assert re.search(r"Attempt 3: FAILED \(rank 0 exited with code 4\), started \d+\.\d s after attempt 2 ended", text)
    assert launcher("get", "runs") == 0
    assert re.search(rf"{name} .* crash loop; rank 0 exited with code 4", capsys.readouterr().out)


def test_reconcile_watch_wakes_when_the_backoff_ends_not_at_its_next_pass(fake_kube, tmp_path, capsys):
    backend = make_backend()
    spec = run_spec(
        "later-abc123",
        worker("--lines", "1", "--fail-rank", "0", "--fail-attempt", "1"),
        scheduling={"max_retries": 1, "retry_backoff": {"first": "3s"}},
    )
    backend.submit(spec, [])
    waiting = wait_until(
        lambda: (r := backend.get(spec.name)).retry_at and r, 30, message="attempt 1 to fail and its retry to wait"
    )
    assert waiting.status is RunStatus.PENDING and "a retry is due at" in waiting.reason
    assert (waiting.retry_at - waiting.attempts[0].ended_at).total_seconds() == 3
    # A pass before the retry is due starts nothing, and says when it is.
    assert run_cli(cli, ["reconcile", spec.name]) == 0
    assert f"PENDING     {spec.name}  attempt 1  ({waiting.reason})" in capsys.readouterr().out
    assert len(fake_kube.pods(labels=f"launcher.dev/run={spec.name},launcher.dev/attempt=2")) == 0
    assert run_cli(cli, ["describe", spec.name]) == 0
    assert re.search(r"Next retry: attempt 2 at \S+ \S+ \(in [1-3] s\)", capsys.readouterr().out)

    # Passes every 60 s: only waking at the retry's due time ends the run within 30 s.
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "reconcile", "--watch", "--cluster", "fake", "--every", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        final = wait_until(
            lambda: (r := backend.get(spec.name)).status.is_terminal and r,
            30,
            message="reconcile --watch to start attempt 2 once due",
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert final.status is RunStatus.COMPLETED and [a.index for a in final.attempts] == [1, 2]
    assert gaps(final)[0] >= 3 and time.monotonic() - started < 30
    assert not final.crash_loop  # attempt 2 completed
    backend.close()


def test_a_jobset_run_says_it_has_no_backoff():
    """JobSet's failurePolicy has no delay between restarts: a retry_backoff is named as not
    honoured there, and describe says the JobSet controller restarts at once."""
    from launcher.backends.kubernetes.attempts import Observed
    from launcher.backends.kubernetes.jobset_status import derive_jobset
    from launcher.backends.kubernetes.profiles import ClusterProfile
    from launcher.backends.kubernetes.render import plan_run

    spec = run_spec(
        "js",
        "true",
        image="ghcr.io/example/launcher:test",
        scheduling={"max_retries": 1, "retry_backoff": {"first": "1s"}},
    )
    warnings = plan_run(spec, ClusterProfile(name="js", jobset=True), []).warnings
    assert (
        "scheduling.retry_backoff: the JobSet controller restarts the group at once (JobSet's failurePolicy "
        "has no backoff); it applies on clusters without JobSet (Indexed Jobs) and on the local backend"
    ) in warnings
    job_form = plan_run(spec, ClusterProfile(name="job", jobset=False), []).warnings
    assert not any("retry_backoff" in w for w in job_form)
    record = {
        "metadata": {
            "name": "js",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "resourceVersion": "1",
            "annotations": {"launcher.dev/form": "JobSet"},
        },
        "data": {"spec.json": '{"name": "js", "command": "true"}'},
    }
    run, _ = derive_jobset(Observed("js", record=record))
    assert run.backoff == (
        "none: the JobSet controller restarts the group at once (JobSet's failurePolicy has no backoff)"
    )
