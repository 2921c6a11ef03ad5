"""The real `launcher` command for the tests, without paying its imports on every call.

A command line of the launcher spends most of its CPU importing (the CLI, pydantic, the
kubernetes client, databricks-sdk: 0.3 to 1.5 s a call on 2 cores), and the suite makes
thousands of calls. `ForkServer` is a process that has imported all of that once; each call
is a child forked from it, with the caller's argv, environment, working directory and stdin,
stdout and stderr (passed as file descriptors), which runs `python -m launcher` as a fresh
interpreter would (runpy) and exits with its exit code. Each call is still its own process:
its own pid, state and exit; nothing of one call is seen by the next. The zygote never calls
the launcher itself, so no cache of the launcher is warm in a child.

The caller runs `tests/forked_cli_client.py` (stdlib only, started with `python -I -S`) in
place of `python -m launcher`, through subprocess as before: timeouts, pipes, input= and
return codes behave as they did. The client sends its own fds 0-2 and environment, relays
SIGINT/SIGTERM/SIGHUP to the child, and exits with the child's status; when the client dies
(a timeout's SIGKILL), the server kills the child.

What a fork cannot give, a test gets from a plain subprocess (CLI(fork=False) or
`subprocess.run([sys.executable, "-m", "launcher", ...])`): the import of the CLI itself
(tests/cli/test_help.py checks what `launcher --help` imports), and a call whose
interpreter settings differ from the server's (PYTHON*, LANG, LC_*: `forkable` says so).
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLIENT = Path(__file__).with_name("forked_cli_client.py")
SOCKET_ENV = "LAUNCHER_TEST_FORK_SOCKET"

# What the children would otherwise import on each call, besides every command's module
# (launcher.cli.commands): the three backends and their clients.
PRELOAD = (
    "launcher.sdk.runs",
    "launcher.sdk.fanout",
    "launcher.sdk.placement",
    "launcher.backends.local.backend",
    "launcher.backends.kubernetes.backend",
    "launcher.backends.kubernetes.kubeapi",
    "launcher.backends.databricks.backend",
    "databricks.sdk",
)


# Settings an interpreter reads once, at its start: a call that sets them otherwise than the
# server had them runs as a plain subprocess.
def _startup_settings(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(("PYTHON", "LC_")) or k == "LANG"}


def forkable(env: dict[str, str], server_env: dict[str, str]) -> bool:
    return _startup_settings(env) == _startup_settings(server_env)


class ForkServer:
    """The zygote process, started with `env`; `command()` is the argv that replaces
    [sys.executable, "-m", "launcher"]."""

    def __init__(self, workdir: Path, env: dict[str, str]):
        self.socket = workdir / "launcher.sock"
        self.env = dict(env)
        self.log = open(workdir / "fork-server.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.forked_cli", str(self.socket)],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(
                    f"the fork server did not start: {(workdir / 'fork-server.log').read_text()[-2000:]}"
                )
            time.sleep(0.02)

    def command(self) -> list[str]:
        return [sys.executable, "-I", "-S", str(CLIENT), str(self.socket)]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.socket.parent, ignore_errors=True)


_server: ForkServer | None = None


def launcher_command(env: dict[str, str]) -> list[str]:
    """The argv that runs `launcher` with `env`: through the fork server where it can (started
    at the first call, one per test process), else `python -m launcher`."""
    global _server
    if os.environ.get("LAUNCHER_TEST_NO_FORK"):
        return [sys.executable, "-m", "launcher"]
    if _server is None:
        import tempfile

        # Without the test's LAUNCHER_HOME: a test's teardown kills what runs with its home.
        server_env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_HOME"}
        _server = ForkServer(Path(tempfile.mkdtemp(prefix="launcher-fork-")), server_env)
    if not forkable(env, _server.env):
        return [sys.executable, "-m", "launcher"]
    return _server.command()


def stop_server() -> None:
    global _server
    if _server is not None:
        _server.close()
        _server = None


# ---- the server process ----


def serve(path: str) -> None:
    import importlib

    from launcher.cli.commands import COMMANDS

    for name in sorted({module for module, _, _ in COMMANDS.values()}) + list(PRELOAD):
        importlib.import_module(name)
    sel = selectors.DefaultSelector()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # the socket's name appears once it accepts
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "signal")
    children: dict[int, socket.socket] = {}
    by_conn: dict[socket.socket, int] = {}
    server_pid = os.getpid()
    while not stop:
        for key, _ in sel.select():
            if key.data == "accept":
                conn, _ = listener.accept()
                pid = _start(conn, server_pid)  # returns only in the server
                if pid is None:
                    conn.close()
                    continue
                children[pid] = conn
                by_conn[conn] = pid
                sel.register(conn, selectors.EVENT_READ, "client")
            elif key.data == "signal":
                os.read(wake_r, 4096)
                _reap(children, by_conn, sel)
            else:  # the client hung up (killed): its call goes with it
                conn = key.fileobj
                assert isinstance(conn, socket.socket)
                pid = by_conn.get(conn)
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                sel.unregister(conn)
        _reap(children, by_conn, sel)
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.unlink(path)


def _reap(children: dict[int, socket.socket], by_conn: dict[socket.socket, int], sel) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        by_conn.pop(conn, None)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        except OSError:
            pass
        conn.close()


def _start(conn: socket.socket, server_pid: int) -> int | None:
    """Read one call (its JSON and fds 0-2) and fork its child; the pid, in the server."""
    fds = array.array("i")
    data = b""
    conn.settimeout(10)
    try:
        while not data.endswith(b"\n"):
            msg, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
            if not msg:
                return None
            data += msg
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    except OSError:
        return None
    call = json.loads(data)
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        return pid
    _child(conn, call, list(fds))
    raise AssertionError("unreachable")


def _child(conn: socket.socket, call: dict, fds: list[int]) -> None:
    import runpy

    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        conn.close()
        # Nothing of the server's but the imported modules: its descriptors close here.
        os.closerange(3, 1 << 16)
        os.chdir(call["cwd"])
        os.environ.clear()
        os.environ.update(call["env"])
        os.umask(call["umask"])
        sys.argv = [sys.executable, *call["argv"]]
        sys.path[0] = call["cwd"]  # as `python -m` started there would have it
        code: int | str | None = 0
        try:
            runpy.run_module("launcher", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code
        except BaseException:  # noqa: BLE001 - as the interpreter does with an uncaught exception
            import traceback

            traceback.print_exc()
            code = 1
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            print(code, file=sys.stderr)
            status = 1
        # The interpreter's own exit: atexit handlers run, as at the end of `python -m launcher`.
        sys.exit(status)
    except SystemExit as e:
        _exit_now(e.code if isinstance(e.code, int) else 1)
    except BaseException:  # noqa: BLE001 - a child never returns into the server's loop
        _exit_now(1)


def _exit_now(code: int) -> None:
    """Exit as the interpreter does (its other threads joined, then atexit, then the streams
    flushed), without unwinding into the server's frames."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
