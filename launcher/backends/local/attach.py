"""`launcher exec` and `port-forward` on the local backend: a command in a rank's world, and a TCP relay.

A rank's command runs with the environment and in the working directory its entrypoint
recorded (contract.EXEC_RECORD: the run's secret values included, in the run's private
directory, 0600), never read from /proc of another process. Where the rank got a private
mount namespace (launcher/backends/local/mounts.py) the command joins it, with setns(2) on
the rank's namespaces, so /mnt/config and the file secrets' mount paths are the ones the
rank sees: as root the mount namespace alone; otherwise first the user namespace the rank
made, whose owner (this user) holds every capability in it. The command inherits this
process's stdin, stdout and stderr: on a terminal, the terminal itself.

Ranks run on this machine and share its network, so a rank's port is 127.0.0.1:PORT, and
port-forward is a plain relay to it.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import socketserver
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from launcher.backends.local.mounts import _CLONE_NEWNS, _CLONE_NEWUSER, NAMESPACE, MountPlan, _check, _libc
from launcher.backends.local.procs import alive


class ExecRecord:
    """What a rank's entrypoint recorded for exec: the command's environment, working directory, pid."""

    def __init__(self, env: dict[str, str], cwd: str, pid: int):
        self.env, self.cwd, self.pid = env, cwd, pid

    @classmethod
    def read(cls, path: Path) -> ExecRecord | None:
        try:
            raw = json.loads(path.read_text())
            return cls(dict(raw["env"]), str(raw["cwd"]), int(raw["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # not written yet (the rank is still in its integrations), or mid-replace


def _namespaces(pid: int) -> list[tuple[str, int]]:
    """The rank's namespaces this process must join, in order: (path, CLONE_ flag)."""
    joins = []
    for kind, flag in (("user", _CLONE_NEWUSER), ("mnt", _CLONE_NEWNS)):
        theirs = f"/proc/{pid}/ns/{kind}"
        if os.readlink(theirs) != os.readlink(f"/proc/self/ns/{kind}"):
            joins.append((theirs, flag))
    return joins


def _enter(fds: list[tuple[int, int]], cwd: str) -> Callable[[], None]:
    """The child's step between fork and exec: join the namespaces (fd, CLONE_ flag), then go
    to the rank's working directory (joining a mount namespace moves the cwd to its root)."""

    def enter() -> None:
        libc = _libc()
        for fd, flag in fds:
            _check(libc.setns(fd, flag), "setns")
        os.chdir(cwd)

    return enter


def run_in_rank(record: ExecRecord, plan: MountPlan | None, argv: list[str], *, tty: bool) -> int:
    """Run argv as `record` describes, in the rank's namespaces where it has them; its exit code
    (128+N for a signal N). Raises ProcessLookupError when the rank has exited, and OSError when
    the command cannot be started."""
    env = dict(record.env)
    if tty and os.environ.get("TERM"):
        env["TERM"] = os.environ["TERM"]  # this terminal's, whatever the run was submitted from
    fds: list[tuple[int, int]] = []
    if plan is not None and plan.mode == NAMESPACE:
        try:
            if not alive(record.pid, None):
                raise FileNotFoundError
            for path, flag in _namespaces(record.pid):
                fds.append((os.open(path, os.O_RDONLY | os.O_CLOEXEC), flag))
        except FileNotFoundError:  # its /proc entry went away: the rank exited
            for fd, _ in fds:
                os.close(fd)
            raise ProcessLookupError(f"the rank's entrypoint (pid {record.pid}) has exited") from None
    # The command gets the terminal's signals (Ctrl-C reaches its foreground group); this
    # process waits them out and passes a stop it gets itself on to the command. Signal
    # handlers belong to the main thread; the SDK may be called from another.
    main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)} if main else {}
    try:
        if main:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGQUIT, signal.SIG_IGN)
        try:
            proc = subprocess.Popen(
                argv, env=env, preexec_fn=_enter(fds, record.cwd) if fds else None, cwd=None if fds else record.cwd
            )
        finally:
            for fd, _ in fds:
                os.close(fd)
        if main:
            signal.signal(signal.SIGTERM, lambda s, _f: proc.send_signal(s))
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            if handler is not None:  # None: set outside Python, left as it is
                signal.signal(s, handler)
    return code if code >= 0 else 128 - code


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    remote_port: int
    stopping: threading.Event


class _Relay(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.remote_port), timeout=10)
        except OSError:
            return  # nothing listens there (yet): the client sees its connection closed
        upstream.settimeout(None)
        client: socket.socket = self.request  # a TCPServer's request is the accepted socket
        with upstream, selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ, (client, upstream))
            sel.register(upstream, selectors.EVENT_READ, (upstream, client))
            open_ends = 2
            while open_ends:
                for key, _ in sel.select(timeout=1.0):
                    source, sink = key.data
                    data = source.recv(1 << 16)
                    if not data:  # that side is done sending: pass the half-close on
                        sel.unregister(source)
                        open_ends -= 1
                        try:
                            sink.shutdown(socket.SHUT_WR)
                        except OSError:
                            open_ends = 0
                        continue
                    sink.sendall(data)
                if self.server.stopping.is_set():
                    return


def relay(
    local_port: int, remote_port: int, *, ready: Callable[[int], None] | None, stop: threading.Event | None
) -> None:
    """Serve 127.0.0.1:remote_port on 127.0.0.1:local_port until `stop` is set (forever without one)."""
    stop = stop or threading.Event()
    with _Server(("127.0.0.1", local_port), _Relay) as server:
        server.remote_port = remote_port
        server.stopping = stop
        def shut_down_when_stopped() -> None:
            stop.wait()
            server.shutdown()

        threading.Thread(target=shut_down_when_stopped, daemon=True).start()
        if ready is not None:
            ready(server.server_address[1])
        server.serve_forever(poll_interval=0.2)
