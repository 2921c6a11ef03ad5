"""The SDK's exec_in_run, port_forward and create_interactive_run on the local backend: what
they return, what the command sees, and that port_forward ends when its stop is set. Every
run is capped (max_duration) and stopped at the end."""

from __future__ import annotations

import queue
import socket
import threading
import urllib.request

import pytest

import launcher
from launcher.sdk.attach import create_interactive_run, exec_in_run, port_forward
from tests.conftest import wait_until


@pytest.fixture
def started(launcher_home):
    runs: list = []
    yield runs
    for run in runs:
        launcher.stop_run(run)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_exec_in_run_returns_the_exit_code_and_runs_in_the_ranks_environment(started, capfd, tmp_path):
    run = create_interactive_run(0.02, gpus=0)
    started.append(run)
    assert run.config["scheduling"]["max_duration"] == 0.02
    assert exec_in_run(run, ["sh", "-c", 'echo "rank:$NODE_RANK:$RUN_NAME"; exit 4']) == 4
    assert f"rank:0:{run.name}" in capfd.readouterr().out
    assert exec_in_run(run.name, ["test", "-f", "/mnt/config/parameters.yaml"]) == 0
    with pytest.raises(launcher.LauncherError, match="has no rank 1"):
        exec_in_run(run, ["true"], rank=1)
    # From another thread too (a notebook's), where no signal handler can be set.
    codes: list[int] = []
    other = threading.Thread(target=lambda: codes.append(exec_in_run(run, ["sh", "-c", "exit 3"])))
    other.start()
    other.join(timeout=30)
    assert codes == [3]
    launcher.stop_run(run)
    with pytest.raises(launcher.LauncherError, match=r"has ended \(STOPPED\)"):
        exec_in_run(run, ["true"])


def test_exec_in_a_rank_that_has_ended_while_the_run_goes_on(started):
    run = launcher.create_run(
        {
            "name": "one-done",
            "compute": {"nodes": 2},
            "scheduling": {"max_duration": 0.02},
            "command": '[ "$NODE_RANK" = 1 ] && exit 0; exec sleep 70',
        }
    )
    started.append(run)
    # The run records its ranks' outcomes when the attempt ends; rank 1's log says it ended now.
    wait_until(
        lambda: any("exit code 0" in str(line) for line in launcher.get_run_logs(run, rank=1)),
        60,
        interval=0.2,
        message="rank 1's entrypoint to end",
    )
    assert exec_in_run(run, ["true"], rank=0) == 0
    with pytest.raises(launcher.LauncherError, match="rank 1 of run .* has ended; the run goes on"):
        exec_in_run(run, ["true"], rank=1)


def test_port_forward_serves_until_stop_is_set(started, tmp_path):
    remote = free_port()
    run = launcher.create_run(
        {
            "name": "web",
            "command": f"exec python -m http.server {remote} --bind 127.0.0.1",
            "scheduling": {"max_duration": 0.02},
        }
    )
    started.append(run)
    ports: queue.Queue[int] = queue.Queue()
    stop = threading.Event()
    forwarding = threading.Thread(
        target=port_forward, args=(run, 0, 0, remote), kwargs={"ready": ports.put, "stop": stop}, daemon=True
    )
    forwarding.start()
    local = ports.get(timeout=30)
    assert local != remote

    def listing():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=5) as response:
                return response.status
        except OSError:
            return None  # the rank's server is not up yet

    assert wait_until(listing, 60, interval=0.2, message="the forwarded server to answer") == 200
    stop.set()
    forwarding.join(timeout=10)
    assert not forwarding.is_alive()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", local)) != 0  # nothing listens there any more
