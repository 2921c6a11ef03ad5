"""`launcher logs -f` on a Kubernetes run deleted under it exits 1 and says so (it ended
with exit 0 as if the attempt had ended). Against the fake API server."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import wait_until
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import run_spec, worker


def test_logs_follow_of_a_run_deleted_under_it_exits_1(fake_kube):
    backend = make_backend()
    spec = run_spec("gone-abc123", worker("--forever", "--interval", "0.1"))
    backend.submit(spec, [])
    wait_until(lambda: backend.get(spec.name).status.value == "RUNNING", 30, message="the run to start")
    follower = subprocess.Popen(
        [sys.executable, "-m", "launcher", "logs", spec.name, "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        lines = iter(follower.stdout.readline, "")
        assert any("line" in next(lines) for _ in range(20)), "the follow printed no line of the run"
        backend.delete(spec.name)
        _, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
        backend.close()
    assert follower.returncode == 1, err
    assert f"run {spec.name} was deleted while following its logs" in err
    assert "Traceback" not in err
