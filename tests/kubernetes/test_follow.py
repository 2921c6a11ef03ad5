"""`logs -f` on Kubernetes: every rank is attached as its pod starts, whatever the others
print; --tail never drops lines of a pod that started after the command; and the stream
says why it ended."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import run_spec, worker
from tests.kubernetes.test_cli import launcher

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def gpu_node(i: int) -> dict:
    return {"name": f"gpu-{i}", "gpus": 8, "labels": {"kubernetes.io/hostname": f"gpu-{i}", **H100}}


def test_a_late_rank_is_attached_at_once_while_another_is_chatty(fake_kube_factory):
    # One node at first: rank 1 waits for a second node while rank 0 prints without pause.
    kube = fake_kube_factory(nodes=[gpu_node(0)])
    backend = make_backend()
    spec = run_spec(
        "late-abc123", worker("--lines", "3000", "--interval", "0.001"), compute={"gpus": 16, "gpu_type": "h100_80gb"}
    )
    backend.submit(spec, [])

    def add_node_when_rank_0_is_chatty() -> None:
        # Rank 1 starts late: once rank 0 (the only container yet) has printed 300 lines.
        wait_until(
            lambda: any(len(c.lines) >= 300 for c in list(kube.containers.values())),
            30,
            message="rank 0 to print 300 lines",
        )
        kube.nodes.append(gpu_node(1))

    threading.Thread(target=add_node_when_rank_0_is_chatty, daemon=True).start()
    lines = list(backend.logs(spec.name, follow=True, tail=5))
    rank1 = [ln.text for ln in lines if ln.rank == 1 and ln.text.startswith("rank 1 line")]
    # Rank 1 started after the command began: none of its lines is lost to --tail or a late attach.
    assert rank1 == [f"rank 1 line {i}" for i in range(3000)]
    assert sum(1 for ln in lines if ln.text == "rank 0 done") == 1
    backend.close()


def test_logs_follow_says_why_it_ended(fake_kube, tmp_path, capsys):
    backend = make_backend()
    spec = run_spec("why-abc123", worker("--lines", "3", "--interval", "0.01"))
    backend.submit(spec, [])
    capsys.readouterr()
    assert launcher("logs", spec.name, "-f") == 0
    out, err = capsys.readouterr()
    assert "rank 0 done" in out
    assert err.strip().splitlines()[-1] == f"i run {spec.name} COMPLETED"
    backend.close()


def test_logs_follow_says_why_when_the_run_cannot_be_followed(fake_kube, capsys):
    backend = make_backend()
    spec = run_spec("nosync-abc123", worker("--lines", "3"))
    backend.submit(spec, [])
    # The pods informer of `logs -f` (its selector names the attempt) never syncs.
    fake_kube.faults.inject("list", "pods", status=503, times=0, labels="jobset.sigs.k8s.io/restart-attempt")
    capsys.readouterr()
    started = time.monotonic()
    assert launcher("logs", spec.name, "-f") == 1
    err = capsys.readouterr().err
    assert time.monotonic() - started < 20
    assert err.strip().splitlines()[-1] == (
        f"✗ cluster fake: cannot list Pods: 503 ServiceUnavailable (tried 5 times); so cannot follow the logs of "
        f"run '{spec.name}'"
    )
    backend.close()


def _follow_threads(before: set[int]) -> list[str]:
    """The threads a follow started (its informers, pod readers, attacher) still alive."""
    return [
        t.name for t in threading.enumerate() if t.ident not in before and t.name.startswith(("logs-", "informer-"))
    ]


def wait_gone(before: set[int], seconds: float = 5.0) -> None:
    wait_until(
        lambda: not _follow_threads(before),
        seconds,
        message=lambda: f"the follow's threads to end (left: {_follow_threads(before)})",
    )


def test_a_follow_of_a_quiet_pod_that_is_cancelled_or_closed_lets_go_of_its_threads(fake_kube):
    """A long-lived reader (the dashboard) follows for clients that leave: what a follow
    started must end with it, not wait for the pod's next line (two minutes away here)."""
    backend = make_backend()
    spec = run_spec("quiet-abc123", worker("--lines", "1", "--interval", "120"))
    backend.submit(spec, [])
    try:
        # Closed by its consumer after the pod's last line for now.
        before = {t.ident for t in threading.enumerate()}
        lines = backend.logs(spec.name, follow=True)
        assert next(ln.text for ln in lines if ln.text == "rank 0 line 0")
        lines.close()
        wait_gone(before)

        # Cancelled from another thread while it waits for a line.
        before = {t.ident for t in threading.enumerate()}
        cancel, seen, ended = threading.Event(), threading.Event(), threading.Event()

        def consume() -> None:
            for line in backend.logs(spec.name, follow=True, cancel=cancel):
                if line.text == "rank 0 line 0":
                    seen.set()
            ended.set()

        threading.Thread(target=consume, daemon=True).start()
        assert seen.wait(30), "the pod's line never came"
        # Kept as a sleep: nothing outside says that the follow now waits for the next line (two
        # minutes away), so give it half a second of that wait before cancelling it.
        time.sleep(0.5)
        cancel.set()
        assert ended.wait(3), "the cancelled follow did not end"
        wait_gone(before)
    finally:
        backend.delete(spec.name)
        backend.close()


def test_a_line_the_reader_cannot_parse_ends_the_follow_with_the_error(fake_kube):
    # A timestamp in month 13 fails the reader's parser: a bug, not a dropped connection, so the
    # follow raises it instead of reconnecting (and skipping the line) in silence.
    backend = make_backend()
    spec = run_spec("garbled-abc123", worker("--lines", "20", "--interval", "0.01"))
    backend.submit(spec, [])
    fake_kube.faults.garble_log_stamps = 1
    with pytest.raises(ValueError, match="month must be in 1..12"):
        for _ in backend.logs(spec.name, follow=True):
            pass
    assert fake_kube.faults.garble_log_stamps == 0, "the fault never fired"
    backend.close()
