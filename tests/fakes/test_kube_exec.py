"""The fake's pods/exec and pods/portforward: real kubectl exec (WebSocket, v5.channel.k8s.io),
the v4 fallback and the resize channel with a WebSocket client of our own choosing, and the
port-forward framing (the first message of each channel carries its port)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pexpect
import pytest
import websocket

from tests.conftest import wait_until
from tests.fakes.kube.cluster import FakeKube

KUBECTL = shutil.which("kubectl")
NS = "default"


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    kube = FakeKube().start()
    kube.kubeconfig = kube.write_kubeconfig(tmp_path_factory.mktemp("exec") / "kubeconfig")
    kube.create(
        "Pod",
        NS,
        {
            "metadata": {"name": "box"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sleep", "300"],
                        "env": [{"name": "GREETING", "value": "hi"}],
                        "workingDir": "/tmp",
                    }
                ],
            },
        },
    )
    wait_until(lambda: kube.get("Pod", NS, "box")["status"].get("phase") == "Running", 30, message="the pod to run")
    try:
        yield kube
    finally:
        kube.close()


def kubectl_env(kube) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(kube.kubeconfig.parent), "KUBECONFIG": str(kube.kubeconfig)}


def ws_url(kube, path: str) -> str:
    return kube.url.replace("http://", "ws://") + path


needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (.ci/run installs it)")


@needs_kubectl
def test_kubectl_exec_gets_stdout_stderr_the_env_and_the_exit_code(kube):
    r = subprocess.run(
        [KUBECTL, "exec", "box", "--", "sh", "-c", "echo $GREETING from $(pwd); echo oops >&2; exit 4"],
        capture_output=True,
        text=True,
        timeout=30,
        env=kubectl_env(kube),
    )
    assert r.returncode == 4
    assert r.stdout == "hi from /tmp\n"
    assert r.stderr.startswith("oops\n") and "command terminated with exit code 4" in r.stderr
    assert ("exec", "v5.channel.k8s.io") in kube.streams  # kubectl's WebSocket executor, not SPDY


@needs_kubectl
def test_kubectl_exec_with_stdin_ends_when_stdin_does(kube):
    r = subprocess.run(
        [KUBECTL, "exec", "-i", "box", "--", "sh", "-c", "tr a-z A-Z; echo done"],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=30,
        env=kubectl_env(kube),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "HELLO\ndone\n"


@needs_kubectl
def test_kubectl_exec_with_a_tty(kube):
    child = pexpect.spawn(KUBECTL, ["exec", "-it", "box", "--", "sh"], env=kubectl_env(kube), timeout=30)
    try:
        child.setwinsize(33, 101)
        child.sendline("test -t 1 && stty size")
        child.expect("33 101")
        child.sendline("exit 5")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 5
    finally:
        child.close(force=True)


@needs_kubectl
def test_kubectl_exec_in_a_pod_that_does_not_run_is_refused(kube):
    r = subprocess.run(
        [KUBECTL, "exec", "nothere", "--", "true"], capture_output=True, text=True, timeout=30, env=kubectl_env(kube)
    )
    assert r.returncode == 1 and 'pods "nothere" not found' in r.stderr


def frames(ws) -> list[tuple[int, bytes]]:
    """Every (channel, data) until the server closes."""
    out = []
    while True:
        try:
            opcode, frame = ws.recv_data_frame(True)
        except websocket.WebSocketConnectionClosedException:
            return out
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return out
        out.append((frame.data[0], frame.data[1:]))


def test_v4_is_the_fallback_and_the_status_carries_the_exit_code(kube):
    ws = websocket.create_connection(
        ws_url(
            kube,
            f"/api/v1/namespaces/{NS}/pods/box/exec?command=sh&command=-c&command=echo+v4;exit+9"
            "&stdout=true&stderr=true",
        ),
        subprotocols=["v4.channel.k8s.io"],
        timeout=20,
    )
    assert ws.subprotocol == "v4.channel.k8s.io"
    got = frames(ws)
    assert b"".join(d for c, d in got if c == 1) == b"v4\n"
    status = json.loads(next(d for c, d in got if c == 3))
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "9"}]


def test_a_tty_takes_its_size_from_the_resize_channel(kube):
    ws = websocket.create_connection(
        ws_url(
            kube,
            f"/api/v1/namespaces/{NS}/pods/box/exec?command=sh&command=-c&command=read+x;stty+size"
            "&stdin=true&stdout=true&tty=true",
        ),
        subprotocols=["v5.channel.k8s.io"],
        timeout=20,
    )
    ws.send_binary(bytes([4]) + json.dumps({"Width": 77, "Height": 22}).encode())
    ws.send_binary(b"\x00go\n")
    got = frames(ws)
    assert b"22 77" in b"".join(d for c, d in got if c == 1)
    assert json.loads(next(d for c, d in got if c == 3))["status"] == "Success"


def test_a_client_that_hangs_up_ends_the_command(kube):
    marker = f"/tmp/exec-hangup-{os.getpid()}"
    ws = websocket.create_connection(
        ws_url(
            kube,
            f"/api/v1/namespaces/{NS}/pods/box/exec?command=sh&command=-c"
            f"&command=echo+up;sleep+30;touch+{marker}&stdout=true",
        ),
        subprotocols=["v5.channel.k8s.io"],
        timeout=20,
    )
    assert ws.recv_data_frame(True)[1].data == b"\x01up\n"
    ws.close()
    wait_until(lambda: not _running(marker.encode()), 10, message="the exec'd command to end")
    assert not os.path.exists(marker)


def _running(text: bytes) -> list[str]:
    """The pids whose command line holds text."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *args):
        return


def test_portforward_frames_carry_the_port_and_relay_both_ways(kube):
    server = HTTPServer(("127.0.0.1", 0), Hello)  # a listener the pod's processes would share: the host's loopback
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        ws = websocket.create_connection(
            ws_url(kube, f"/api/v1/namespaces/{NS}/pods/box/portforward?ports={port}"),
            subprotocols=["v4.channel.k8s.io"],
            timeout=20,
        )
        first = [ws.recv_data_frame(True)[1].data for _ in range(2)]
        assert first == [bytes([0]) + struct.pack("<H", port), bytes([1]) + struct.pack("<H", port)]
        ws.send_binary(b"\x00GET / HTTP/1.0\r\n\r\n")
        got = frames(ws)
        body = b"".join(d for c, d in got if c == 0)
        assert body.startswith(b"HTTP/1.0 200") and body.endswith(b"hello")
    finally:
        server.shutdown()
        server.server_close()


def test_portforward_to_a_closed_port_answers_on_the_error_channel(kube):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = websocket.create_connection(
        ws_url(kube, f"/api/v1/namespaces/{NS}/pods/box/portforward?ports={port}"),
        subprotocols=["v4.channel.k8s.io"],
        timeout=20,
    )
    got = frames(ws)
    errors = [d for c, d in got if c == 1][1:]
    assert errors and b"connection refused" in errors[0].lower()


@needs_kubectl
def test_kubectl_port_forward_is_refused_in_words(kube):
    """kubectl (1.31+) tunnels SPDY inside its port-forward WebSocket, and falls back to SPDY:
    the fake serves neither, and says so (our client's v4 port-forward is tested above)."""
    r = subprocess.run(
        [KUBECTL, "port-forward", "pod/box", "0:80"], capture_output=True, text=True, timeout=30, env=kubectl_env(kube)
    )
    assert r.returncode == 1 and "SPDY" in r.stderr
