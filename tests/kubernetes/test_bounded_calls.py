"""Every Kubernetes request has a deadline, and a cluster that cannot be asked is said so.

A server that takes connections and never answers (a wedged API server, a proxy whose
far end is gone) fails each command within the profile's request_timeout, exit 1, in a
line that names the cluster; before, describe, logs and secret list waited about 300 s.
And a cluster that cannot be asked does not look empty: when it is the current profile or
one named with --cluster, `get runs` fails (it printed [] and exit 0), and a run that may
be on it is said to be there (stop said "no run named", exit 2)."""

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
from tests.fakes.kube.faults import unreachable_server
from tests.kubernetes.test_api_faults import add_profile, local_run
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


def test_a_stalled_current_profile_is_the_answer_not_an_empty_one(launcher_home, capsys):
    with silent_server() as url:
        add_profile(launcher_home, "stalled", url)
        set_profile(launcher_home, "stalled", request_timeout=REQUEST_TIMEOUT)
        assert launcher("cluster", "use", "stalled") == 0
        for command in (("describe", "run", "y-abc123"), ("get", "runs", "-o", "json")):
            capsys.readouterr()
            code, took = timed(*command)
            out, err = capsys.readouterr()
            assert code == 1 and out == "", (command, out, err)
            assert took < 2 * REQUEST_TIMEOUT, f"{' '.join(command)} took {took:.1f} s"
            assert_names_the_stalled_cluster(err)


def test_a_current_profile_that_is_down_is_an_error_not_an_empty_list(launcher_home, tmp_path, capsys):
    local_run(tmp_path)
    with unreachable_server("refused") as url:
        add_profile(launcher_home, "down", url)
        assert launcher("cluster", "use", "down") == 0
        capsys.readouterr()
        assert launcher("get", "runs", "-o", "json") == 1
        out, err = capsys.readouterr()
        assert out == "", out  # not [], which would say there are no runs
        assert err.startswith(f"✗ cluster down: cannot reach the API server: connection refused ({url})"), err
        assert "cluster down is the current profile" in err and "Traceback" not in err
        # Another profile, asked for by name, still answers.
        assert launcher("get", "runs", "--cluster", "local", "-o", "name") == 0
        assert capsys.readouterr().out.startswith("here-")


def test_stop_of_a_run_on_a_cluster_that_is_down_says_so(launcher_home, tmp_path, capsys):
    local_run(tmp_path)
    with unreachable_server("refused") as url:
        add_profile(launcher_home, "down", url)
        RunIndex().record("there-abc123", load_config().profile("down"))  # submitted from here
        capsys.readouterr()
        assert launcher("stop", "there-abc123", "-y") == 1
        err = capsys.readouterr().err
        assert "no run named" not in err, err
        assert err.startswith("✗ cluster down: cannot reach the API server: connection refused"), err
        assert "run 'there-abc123' may be on cluster down (where it was submitted), which is down" in err
        # A run submitted elsewhere, with the current profile down: not "no run named" either.
        assert launcher("cluster", "use", "down") == 0
        capsys.readouterr()
        assert launcher("stop", "elsewhere-abc123", "-y") == 1
        err = capsys.readouterr().err
        assert "run 'elsewhere-abc123' may be on cluster down (the current profile), which is down" in err, err
        # A run that is found is stopped, whichever profile is down.
        assert launcher("stop", "here", "-y") == 0


def test_a_profile_named_with_cluster_that_is_down_is_an_error(launcher_home, tmp_path, capsys):
    local_run(tmp_path)
    with unreachable_server("refused") as url:
        add_profile(launcher_home, "down", url)
        capsys.readouterr()
        assert launcher("get", "runs", "--cluster", "local,down", "-o", "name") == 1
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("✗ cluster down: cannot reach the API server"), (out, err)
        assert "cluster down was named" in err
        # Not named, and not the current profile: a warning beside the runs that answered.
        assert launcher("get", "runs", "-o", "name") == 0
        out, err = capsys.readouterr()
        assert out.startswith("here-") and err.startswith("! cluster down: cannot reach the API server"), err
