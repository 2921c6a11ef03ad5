"""pods/exec and pods/portforward: the WebSocket subresources, as the API server and kubelet serve them.

The handshake and framing are the `websockets` library's sans-I/O protocol, driven over the
connection the HTTP handler already holds. Subprotocols (k8s.io/apimachinery wsstream):

  exec        v5.channel.k8s.io, then v4.channel.k8s.io. Each binary message starts with a channel
              byte: 0 stdin, 1 stdout, 2 stderr, 3 the final metav1.Status (a non-zero exit is
              reason NonZeroExitCode with causes [{reason: ExitCode, message: "N"}]), 4 resize
              ({"Width", "Height"}); v5 adds 255: [255, channel] closes that channel (stdin's EOF).
  portforward v4.channel.k8s.io (also portforward.k8s.io). Port i of ?ports= has data channel 2i and
              error channel 2i+1; the server's first message on each is the port, uint16 little-endian.

The exec'd process is the kubelet's (kubelet.exec_argv): the container's environment, working
directory and mount namespace. Port-forward dials 127.0.0.1:port, where the pod's processes listen
(the fake has no network namespaces). SPDY is not served: kubectl >= 1.30 speaks WebSocket for exec.
"""

from __future__ import annotations

import collections
import fcntl
import json
import os
import pty
import signal
import socket
import struct
import subprocess
import termios
import threading
from typing import TYPE_CHECKING, Any

from websockets.exceptions import InvalidState
from websockets.frames import Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from tests.fakes.kube.common import ApiError

if TYPE_CHECKING:
    from tests.fakes.kube.http import Handler

EXEC_PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
PORTFORWARD_PROTOCOLS = ["v4.channel.k8s.io", "portforward.k8s.io"]
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


class WebSocket:
    """One server-side WebSocket on the handler's connection; send is safe from any thread."""

    def __init__(self, handler: Handler, subprotocols: list[str]):
        self.handler, self.sock = handler, handler.connection
        self.protocol = ServerProtocol(subprotocols=subprotocols)
        self._send_lock = threading.Lock()
        self._pending: collections.deque[bytes] = collections.deque()
        # The handler has read the request already; the protocol parses it again from its bytes.
        head = (
            f"{handler.command} {handler.path} HTTP/1.1\r\n"
            + "".join(f"{key}: {value}\r\n" for key, value in handler.headers.items())
            + "\r\n"
        )
        self.protocol.receive_data(head.encode("latin-1"))
        request = next(e for e in self.protocol.events_received() if isinstance(e, Request))
        response = self.protocol.accept(request)
        self.protocol.send_response(response)
        self._flush()
        handler.close_connection = True
        if response.status_code != 101:
            raise _Refused()
        self.subprotocol = self.protocol.subprotocol

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.sock.sendall(data)

    def send(self, payload: bytes) -> bool:
        with self._send_lock:
            try:
                self.protocol.send_binary(payload)
                self._flush()
                return True
            except (OSError, InvalidState):  # the client went away, or the session is closing
                return False

    def recv(self) -> bytes | None:
        """The next data message's payload; None once the connection is closed."""
        while True:
            with self._send_lock:  # the protocol is shared with the senders; flushed: pongs, the close reply
                self._pending.extend(
                    e.data for e in self.protocol.events_received() if e.opcode in (Opcode.BINARY, Opcode.TEXT)
                )
                try:
                    self._flush()
                except OSError:
                    return None
            if self._pending:
                return self._pending.popleft()
            if self.protocol.state is State.CLOSED:
                return None
            if self.protocol.close_expected():  # we said close: wait a little for the client's reply
                self.sock.settimeout(5)
            try:
                data = self.handler.rfile.read1(65536)
            except (OSError, ValueError):
                data = b""
            with self._send_lock:
                if data:
                    self.protocol.receive_data(data)
                else:
                    self.protocol.receive_eof()
            if not data:
                return None

    def close(self) -> None:
        with self._send_lock:
            try:
                self.protocol.send_close(1000)
                self._flush()
                self.sock.shutdown(socket.SHUT_WR)
            except (OSError, InvalidState):  # closed already
                pass


class _Refused(Exception):
    """The handshake was answered with an error already."""


def _flag(q: dict[str, list[str]], name: str) -> bool:
    return (q.get(name) or ["false"])[-1].lower() in ("true", "1")


def _running_container(handler: Handler, ns: str, name: str, q: dict[str, list[str]]):
    k = handler.kube
    with k.lock:
        pod = k.objects.get(("Pod", ns, name))
    if pod is None:
        raise ApiError(404, "NotFound", f'pods "{name}" not found')
    container = (q.get("container") or [None])[-1]
    names = [c["name"] for c in pod["spec"]["containers"]]
    if container is None:
        container = names[0]
    if container not in names:
        raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    c = k.kubelet.container(pod, container)
    if c is None or c.proc is None or c.proc.poll() is not None:
        raise ApiError(400, "BadRequest", f'unable to upgrade connection: container not found ("{container}")')
    return pod, c


def serve(handler: Handler, ns: str, name: str, sub: str, q: dict[str, list[str]]) -> None:
    if "websocket" not in (handler.headers.get("Upgrade") or "").lower():
        raise ApiError(
            400,
            "BadRequest",
            "Upgrade request required: this fake serves exec and portforward over WebSocket only, not SPDY",
        )
    try:
        if sub == "exec":
            serve_exec(handler, ns, name, q)
        else:
            serve_portforward(handler, ns, name, q)
    except _Refused:
        pass


# --- exec -------------------------------------------------------------------------------------------
def _status(code: int, command: list[str]) -> dict[str, Any]:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "reason": "NonZeroExitCode",
        "message": f"command terminated with non-zero exit code: error executing command {command}, exit code {code}",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def _controlling_tty() -> None:  # in the child, after setsid: the pty on fd 0 becomes its terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def serve_exec(handler: Handler, ns: str, name: str, q: dict[str, list[str]]) -> None:
    command = q.get("command") or []
    if not command:
        raise ApiError(400, "BadRequest", "you must specify at least 1 command")
    _, c = _running_container(handler, ns, name, q)
    tty, want_stdin = _flag(q, "tty"), _flag(q, "stdin")
    ws = WebSocket(handler, EXEC_PROTOCOLS)
    with handler.kube.lock:
        handler.kube.streams.append(("exec", ws.subprotocol))
        handler.kube.stream_pods.append(("exec", name))
    argv = handler.kube.kubelet.exec_argv(c, command)
    master = None
    try:
        if tty:
            master, slave = pty.openpty()
            proc = subprocess.Popen(
                argv,
                cwd=c.cwd,
                env=c.env,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                preexec_fn=_controlling_tty,
            )
            os.close(slave)
            outputs = [(master, STDOUT)]
        else:
            proc = subprocess.Popen(
                argv,
                cwd=c.cwd,
                env=c.env,
                stdin=subprocess.PIPE if want_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            outputs = [(proc.stdout.fileno(), STDOUT), (proc.stderr.fileno(), STDERR)]
    except OSError as e:  # not found / not executable: the runtime's exec fails before the process runs
        ws.send(
            bytes([ERROR])
            + json.dumps(
                {
                    "metadata": {},
                    "status": "Failure",
                    "reason": "InternalError",
                    "code": 500,
                    "message": f"Internal error occurred: error executing command in container: OCI runtime exec failed: "
                    f'exec failed: unable to start container process: exec: "{command[0]}": {e.strerror}',
                }
            ).encode()
        )
        ws.close()
        return

    def pump(fd: int, channel: int) -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: a pty whose other side is closed
                data = b""
            if not data or not ws.send(bytes([channel]) + data):
                return

    pumps = [threading.Thread(target=pump, args=out, daemon=True) for out in outputs]
    for t in pumps:
        t.start()

    def finish() -> None:
        code = proc.wait()
        for t in pumps:
            t.join()
        code = 128 - code if code < 0 else code  # killed by a signal: the shell's convention, as runtimes report
        ws.send(bytes([ERROR]) + json.dumps(_status(code, command)).encode())
        ws.close()

    finisher = threading.Thread(target=finish, daemon=True)
    finisher.start()
    stdin_fd = master if tty else (proc.stdin.fileno() if proc.stdin else None)
    try:
        while (msg := ws.recv()) is not None:
            if not msg:
                continue
            channel, data = msg[0], msg[1:]
            if channel == STDIN and stdin_fd is not None and data:
                try:
                    os.write(stdin_fd, data)
                except OSError:
                    pass
            elif channel == RESIZE and master is not None:
                size = json.loads(data)
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", size["Height"], size["Width"], 0, 0))
            elif channel == CLOSE and ws.subprotocol == "v5.channel.k8s.io" and data[:1] == bytes([STDIN]):
                if tty and master is not None:
                    os.write(master, b"\x04")  # a terminal's end of input
                elif proc.stdin is not None:
                    proc.stdin.close()
                    stdin_fd = None
    finally:
        if proc.poll() is None:  # the client hung up first: the process goes, as a runtime's exec session does
            try:
                os.killpg(proc.pid, signal.SIGHUP if tty else signal.SIGKILL)
            except OSError:
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        finisher.join(10)
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        if master is not None:
            os.close(master)


# --- portforward ------------------------------------------------------------------------------------
def serve_portforward(handler: Handler, ns: str, name: str, q: dict[str, list[str]]) -> None:
    if "SPDY/3.1+portforward.k8s.io" in (handler.headers.get("Sec-WebSocket-Protocol") or ""):
        raise ApiError(
            400,
            "BadRequest",
            "this fake does not serve SPDY tunnelled in a WebSocket (kubectl "
            "port-forward); it serves portforward over v4.channel.k8s.io",
        )
    ports = [int(p) for v in q.get("ports") or [] for p in v.split(",") if p.strip()]
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise ApiError(400, "BadRequest", 'query parameter "ports" is required and must be valid ports')
    pod_uid = _running_container(handler, ns, name, q)[0]["metadata"]["uid"]
    ws = WebSocket(handler, PORTFORWARD_PROTOCOLS)
    with handler.kube.lock:
        handler.kube.streams.append(("portforward", ws.subprotocol))
        handler.kube.stream_pods.append(("portforward", name))
    conns: dict[int, socket.socket] = {}
    open_ports = set()
    lock = threading.Lock()

    def relay(i: int, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                data = b""
            if not data or not ws.send(bytes([2 * i]) + data):
                break
        with lock:
            open_ports.discard(i)
            last = not open_ports
        if last:
            ws.close()

    for i, port in enumerate(ports):
        prefix = struct.pack("<H", port)
        ws.send(bytes([2 * i]) + prefix)
        ws.send(bytes([2 * i + 1]) + prefix)
        try:
            conns[i] = socket.create_connection(("127.0.0.1", port), timeout=5)
            conns[i].settimeout(None)
        except OSError as e:
            ws.send(
                bytes([2 * i + 1])
                + (
                    f"an error occurred forwarding {port} -> {port}: error forwarding port "
                    f"{port} to pod {pod_uid}: dial tcp4 127.0.0.1:{port}: {e}"
                ).encode()
            )
            continue
        open_ports.add(i)
    if not open_ports:
        ws.close()
    for i, conn in conns.items():
        threading.Thread(target=relay, args=(i, conn), daemon=True).start()
    try:
        while (msg := ws.recv()) is not None:
            if len(msg) > 1 and msg[0] % 2 == 0 and msg[0] // 2 in conns:
                try:
                    conns[msg[0] // 2].sendall(msg[1:])
                except OSError:
                    pass
    finally:
        for conn in conns.values():
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
