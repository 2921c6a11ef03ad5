"""exec and port-forward into a rank's pod: the pods/exec and pods/portforward WebSockets of
the official client (kubernetes.stream.ws_client, opened by kubeapi's exec_stream and
portforward, where its failures become KubeErrors), relayed to this process's terminal and
to a local TCP port.

exec speaks v5.channel.k8s.io where the server does (the end of stdin is a close of
channel 0, so `cat` ends), else v4; the exit code is the final Status on channel 3. With a
TTY, this terminal is in raw mode for the session and restored on every way out, and its
size goes to channel 4 at the start and on each SIGWINCH.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import sys
import termios
import threading
import tty as ttymode
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import attempt_of, pod_rank
from launcher.backends.kubernetes.errors import KubeError
from launcher.errors import InputError

if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi

STDOUT, STDERR, ERROR, RESIZE = 1, 2, 3, 4


def rank_pod(api: KubeApi, name: str, rank: int) -> str | None:
    """The running pod of rank `rank` of run `name` (its completion index) in the newest
    attempt that has one; None when no such pod runs. Only a pod of the run's own JobSet
    counts (owned_pods): labels anyone can copy, so they only narrow the listing."""
    running = [
        p
        for p in owned_pods(api, name)
        if pod_rank(p) == rank
        and (p.get("status") or {}).get("phase") == "Running"
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    if not running:
        return None
    newest = max(running, key=lambda p: (attempt_of(p), p["metadata"].get("creationTimestamp") or ""))
    return newest["metadata"]["name"]


def owned_pods(api: KubeApi, name: str) -> list[dict]:
    """The pods of run `name` that its current JobSet owns: pod -> its controller Job -> that
    Job's controller, the JobSet <name>, each link matched by uid. The JobSet is the one the
    run's record names (its owner reference's uid) where the record has one; a record with
    none (a TTL profile's, or one applied from a dry-run) goes with the JobSet of the run's
    name, which no other object can hold while it exists. A pod that merely carries the
    run's labels (anyone allowed to create pods can copy them, and a high attempt label)
    never receives an exec or port-forward session."""
    jobset = api.get("JobSet", name)
    if jobset is None:
        return []
    uid = jobset["metadata"]["uid"]
    record = api.get("ConfigMap", name)
    named = [r.get("uid") for r in _owners(record) if r.get("kind") == "JobSet" and r.get("name") == name]
    if named and uid not in named:
        return []  # not the JobSet this run's record belongs to
    selector = keys.run_selector(name)
    jobs = {j["metadata"]["uid"] for j in api.list("Job", labels=selector)[0] if _controller_uid(j, "JobSet") == uid}
    return [p for p in api.list("Pod", labels=selector)[0] if _controller_uid(p, "Job") in jobs]


def _owners(obj: dict | None) -> list[dict]:
    return list(((obj or {}).get("metadata") or {}).get("ownerReferences") or [])


def _controller_uid(obj: dict, kind: str) -> str | None:
    """The uid of obj's controller (the one owner reference with controller: true) of that kind."""
    return next((r.get("uid") for r in _owners(obj) if r.get("controller") and r.get("kind") == kind), None)


# --- exec -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """This terminal in raw mode (keys go to the pod as typed), restored however we leave."""
    saved = termios.tcgetattr(fd)
    try:
        ttymode.setraw(fd, termios.TCSANOW)  # not setraw's TCSAFLUSH, which drops what was typed ahead
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _send_size(ws: Any, fd: int) -> None:
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        size = shutil.get_terminal_size()
    ws.write_channel(RESIZE, json.dumps({"Width": size.columns, "Height": size.lines}).encode())


def exec_in_pod(api: KubeApi, pod: str, argv: list[str], *, tty: bool) -> int:
    """Run argv in the pod, attached to this process's stdin, stdout and stderr; its exit code."""
    ws = api.exec_stream(pod, argv, tty=tty)
    stdin_fd = sys.stdin.fileno()
    previous_winch = None
    # SIGWINCH only wakes the relay (through this pair), which sends the size: a handler that
    # wrote to the WebSocket itself could interrupt a write holding its lock.
    resized, wake = socket.socketpair()
    wake.setblocking(False)
    try:
        with raw_terminal(stdin_fd) if tty else contextlib.nullcontext():
            if tty:
                _send_size(ws, stdin_fd)
                if threading.current_thread() is threading.main_thread():
                    previous_winch = signal.signal(signal.SIGWINCH, lambda *_: _poke(wake))
            _relay(ws, stdin_fd, resized if tty else None)
    except OSError as e:  # the WebSocket broke under us
        raise KubeError(
            f"cluster {api.profile.name}: exec in pod {pod}: the connection broke: {e}", reason="ConnectionBroken"
        ) from None
    finally:
        if previous_winch is not None:
            signal.signal(signal.SIGWINCH, previous_winch)
        resized.close()
        wake.close()
        ws.close()
    return _exit_code(api, pod, ws)


def _poke(wake: socket.socket) -> None:
    with contextlib.suppress(OSError):  # full: a wake-up is pending already
        wake.send(b"\0")


def _relay(ws: Any, stdin_fd: int, resized: socket.socket | None) -> None:
    from websocket import WebSocketException

    out, err = sys.stdout.buffer, sys.stderr.buffer

    def write_output() -> None:
        # read_channel on an empty channel reads the socket (ws.update): stdout's next frames,
        # and the close, may arrive while stderr is read. So it is called once more after
        # the close, when it only hands over what is buffered (else that output was lost).
        for channel, stream in ((STDOUT, out), (STDERR, err)):
            data = ws.read_channel(channel)
            if data:
                stream.write(data)
                stream.flush()

    def send(data: bytes) -> bool:
        """stdin to the command (b"": its end); False once the session is closing (the command
        ended while we wrote): its output and status are still read."""
        try:
            ws.write_stdin(data) if data else ws.close_channel(0)  # v4 has no way to end stdin
            return bool(data)
        except (OSError, WebSocketException):
            return False

    with selectors.DefaultSelector() as sel:
        sel.register(ws.sock.sock, selectors.EVENT_READ, "ws")
        if resized is not None:
            sel.register(resized, selectors.EVENT_READ, "resized")
        try:
            sel.register(stdin_fd, selectors.EVENT_READ, "stdin")
        except (ValueError, OSError):  # a stdin select cannot watch (a regular file, /dev/null): read it now
            while send(os.read(stdin_fd, 1 << 20)):
                pass
        while ws.is_open():
            for key, _ in sel.select(1.0):
                if key.data == "stdin":
                    if not send(os.read(stdin_fd, 65536)):
                        sel.unregister(stdin_fd)
                elif key.data == "resized" and resized is not None:  # registered only where there is one
                    resized.recv(4096)
                    with contextlib.suppress(OSError, WebSocketException):
                        _send_size(ws, stdin_fd)
                else:
                    try:
                        ws.update(timeout=0)
                    except (OSError, WebSocketException):  # closed under us: the status, if it came, says how
                        ws.close()
            write_output()
        write_output()


def _exit_code(api: KubeApi, pod: str, ws: Any) -> int:
    raw = ws.read_channel(ERROR)
    if not raw:
        raise KubeError(
            f"cluster {api.profile.name}: exec in pod {pod}: the connection closed before the command ended",
            reason="ConnectionBroken",
        )
    try:
        status = json.loads(raw)
    except ValueError:
        raise KubeError(
            f"cluster {api.profile.name}: exec in pod {pod}: the server's exit status is not a Status",
            reason="BadStatus",
        ) from None
    if status.get("status") == "Success":
        return 0
    causes = (status.get("details") or {}).get("causes") or []
    code = next((c.get("message") for c in causes if c.get("reason") == "ExitCode"), None)
    if status.get("reason") == "NonZeroExitCode" and code is not None and str(code).isdigit():
        return int(code)
    raise KubeError(
        f"cluster {api.profile.name}: exec in pod {pod}: {status.get('message') or 'failed'}",
        reason=str(status.get("reason") or "ExecFailed"),
    )


# --- port-forward -----------------------------------------------------------------------------------
def forward_port(
    api: KubeApi,
    pod: str,
    *,
    local_port: int,
    remote_port: int,
    ready: Callable[[int], None] | None,
    stop: threading.Event | None,
) -> None:
    """Serve the pod's remote_port on 127.0.0.1:local_port: one pods/portforward WebSocket per
    accepted connection (a WebSocket carries one connection of each port), until stop is set."""
    stop = stop or threading.Event()
    try:
        server = socket.create_server(("127.0.0.1", local_port))
    except OSError as e:
        raise InputError(f"cannot listen on 127.0.0.1:{local_port}: {e.strerror or e}") from None
    relays: list[threading.Thread] = []
    with server:
        server.settimeout(0.2)
        if ready is not None:
            ready(server.getsockname()[1])
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            t = threading.Thread(target=_forward_one, args=(api, pod, remote_port, conn, stop), daemon=True)
            t.start()
            relays = [r for r in relays if r.is_alive()] + [t]
    for t in relays:
        t.join(2)


def _forward_one(api: KubeApi, pod: str, port: int, conn: socket.socket, stop: threading.Event) -> None:
    with conn:
        try:
            forward = api.portforward(pod, port)
        except KubeError as e:
            print(f"launcher: port-forward: {e}", file=sys.stderr)
            return
        remote = forward.socket(port)
        try:
            _pipe(conn, remote, stop)
        finally:
            remote.close()
            error = forward.error(port)
            if error:
                print(f"launcher: port-forward: {error}", file=sys.stderr)


def _pipe(a: socket.socket, b: Any, stop: threading.Event) -> None:
    """Copy both ways until either side ends (or stop): half-closes are not kept."""
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_READ, (a, b))
        sel.register(b, selectors.EVENT_READ, (b, a))
        while not stop.is_set():
            for key, _ in sel.select(0.5):
                source, sink = key.data
                try:
                    data = source.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                try:
                    sink.sendall(data)
                except OSError:
                    return
