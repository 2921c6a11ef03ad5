"""Every Kubernetes request has a deadline, and a cluster that cannot be asked is said so.

A server that takes connections and never answers (a wedged API server, a proxy whose
far end is gone) fails each command within the profile's request_timeout, exit 1, in a
line that names the cluster; before, describe, logs and secret list waited about 300 s."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from launcher.config import load_config
from launcher.sdk.index import RunIndex
from tests.kubernetes.test_api_faults import add_profile
from tests.kubernetes.test_cli import launcher

REQUEST_TIMEOUT = 2


@contextmanager
def silent_server() -> Iterator[str]:
    """The URL of a server that accepts every connection and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


def set_profile(home: Path, name: str, **settings: object) -> None:
    path = home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["clusters"][name].update(settings)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def timed(*args: str) -> tuple[int, float]:
    started = time.monotonic()
    code = launcher(*args)
    return code, time.monotonic() - started


def assert_names_the_stalled_cluster(err: str) -> None:
    first = err.strip().splitlines()[0]
    assert first.startswith("✗ cluster stalled: "), err
    assert f"did not answer within {REQUEST_TIMEOUT} s" in first, err
    assert "Traceback" not in err


def test_a_stalled_server_fails_each_command_within_the_request_timeout(launcher_home, capsys):
    with silent_server() as url:
        add_profile(launcher_home, "stalled", url)
        set_profile(launcher_home, "stalled", request_timeout=REQUEST_TIMEOUT)
        # A run this machine submitted there before the server stalled.
        RunIndex().record("x-abc123", load_config().profile("stalled"))
        for command in (
            ("describe", "run", "x-abc123"),
            ("logs", "x-abc123"),
            ("logs", "x-abc123", "--follow"),
            ("secret", "list", "--cluster", "stalled"),
        ):
            capsys.readouterr()
            code, took = timed(*command)
            err = capsys.readouterr().err
            assert code == 1, (command, err)
            assert took < 2 * REQUEST_TIMEOUT, f"{' '.join(command)} took {took:.1f} s"
            assert_names_the_stalled_cluster(err)
