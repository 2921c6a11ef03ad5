"""The Kubernetes backend's exec and port-forward: our client (kubernetes.stream) against the
fake API server's pods/exec and pods/portforward, in the rank's pod (its environment, its
config and secret files, its working directory).

exec is attached to the calling process's stdin and stdout, so it runs in a child process
(EXEC_CLIENT) that a test feeds and reads, as a user's terminal would."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import urllib.request

import pexpect
import pytest

from launcher.backends.capabilities import Feature
from launcher.backends.kubernetes.errors import KubeError
from launcher.backends.kubernetes.secrets import KubernetesSecretStore
from launcher.config import load_config
from launcher.errors import InputError, NotFoundError
from launcher.secrets.kinds import Secret, SecretKind
from launcher.spec.models import RunSpec
from tests.conftest import wait_until

SECRET = "tok-Exec-Secret-4242"
KEY_FILE = "-----BEGIN KEY-----\nexec-key-5151\n-----END KEY-----"
# Backend.exec in a process of its own, its exit code the command's; a LauncherError is printed
# as the CLI prints it, never as a traceback.
EXEC_CLIENT = """
import sys
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.config import load_config
from launcher.errors import LauncherError
backend = KubernetesBackend(load_config().profile("fake"))
try:
    code = backend.exec(sys.argv[1], sys.argv[4:], rank=int(sys.argv[2]), tty=sys.argv[3] == "tty")
except LauncherError as e:
    print(f"error: {e}", file=sys.stderr)
    code = e.exit_code
sys.exit(code)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_run(backend, kube, name: str, command: str, *, nodes: int = 2, secrets: list[Secret] = ()) -> None:
    store = KubernetesSecretStore(load_config().profile("fake"))
    for s in secrets:
        store.create(s)
    spec = RunSpec.model_validate(
        {
            "name": name,
            "command": command,
            "compute": {"nodes": nodes},
            "parameters": {"lr": 0.25},
            "secrets": [s.name for s in secrets],
        }
    )
    backend.submit(spec, store.for_run([s.name for s in secrets]))

    def running() -> bool:
        pods = [p for p in kube.pods("default", f"launcher.dev/run={name}") if p["status"].get("phase") == "Running"]
        return len(pods) == nodes

    wait_until(running, 60, message=f"{name}'s {nodes} pods to run")


def exec_client(name: str, rank: int, *argv: str, stdin: bytes = b"", timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-c", EXEC_CLIENT, name, str(rank), "pipe", *argv],
        input=stdin,
        capture_output=True,
        timeout=timeout,
    )


@pytest.fixture
def sleeper(backend, fake_kube):
    """A two-rank run that sleeps, with an env secret and a file secret."""
    start_run(
        backend,
        fake_kube,
        "sleeper-abc123",
        "sleep 120",
        secrets=[
            Secret("api-token", SecretKind.ENV, {"value": SECRET}, {"env_key": "API_TOKEN"}),
            Secret("ssh-key", SecretKind.FILE, {"value": KEY_FILE}, {"mount_path": "/etc/ssh-key"}),
        ],
    )
    yield "sleeper-abc123"
    backend.stop("sleeper-abc123")


def test_exec_in_rank_1_sees_its_parameters_env_and_secrets_and_returns_the_exit_code(sleeper, fake_kube):
    isolated = fake_kube.kubelet.isolated
    config = "/mnt/config" if isolated else "$LAUNCHER_CONFIG_DIR"
    r = exec_client(
        sleeper,
        1,
        "sh",
        "-c",
        f"cat {config}/parameters.yaml; echo rank=$NODE_RANK token=$API_TOKEN; echo to-stderr >&2; exit 7",
    )
    assert r.returncode == 7, r.stderr
    out = r.stdout.decode()
    assert "lr: 0.25" in out and "rank=1 " in out and f"token={SECRET}" in out
    assert r.stderr.decode() == "to-stderr\n"
    if isolated:  # the file secret where the rank sees it: in the pod's own mount namespace
        r = exec_client(sleeper, 0, "sh", "-c", "cat /etc/ssh-key/*; echo; echo rank=$NODE_RANK; pwd")
        assert r.returncode == 0 and "exec-key-5151" in r.stdout.decode() and "rank=0" in r.stdout.decode()
    assert ("exec", "v5.channel.k8s.io") in fake_kube.streams


def test_exec_relays_stdin_to_its_end(sleeper):
    r = exec_client(sleeper, 0, "sh", "-c", "wc -c; cat /dev/null", stdin=b"x" * 100_000)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == "100000"


def test_exec_with_a_tty_is_a_terminal_and_exits_with_the_shells_code(sleeper):
    child = pexpect.spawn(sys.executable, ["-c", EXEC_CLIENT, sleeper, "0", "tty", "sh"], timeout=30)
    try:
        child.sendline("test -t 0 && echo is-a-tty-$((6*7))")
        child.expect("is-a-tty-42")
        child.sendline("stty size")
        child.expect(r"24 80")  # pexpect's terminal
        child.setwinsize(31, 97)  # SIGWINCH: the new size goes to the pod's terminal
        wait_until(
            lambda: child.sendline("stty size") and child.expect([r"31 97", pexpect.TIMEOUT], timeout=1) == 0,
            20,
            message="the new terminal size in the pod",
        )
        child.sendline("exit 3")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 3
    finally:
        child.close(force=True)


def test_exec_refuses_a_rank_without_a_pod_and_an_unknown_run(backend, sleeper):
    with pytest.raises(InputError, match="run sleeper-abc123 has no running pod for rank 5 .*it has 2 rank"):
        backend.exec(sleeper, ["true"], rank=5)
    with pytest.raises(NotFoundError):
        backend.exec("no-such-run", ["true"])
    r = exec_client(sleeper, 0, "no-such-program-xyz")
    assert r.returncode != 0 and b"Traceback" not in r.stderr
    assert b"no-such-program-xyz" in r.stderr


def test_port_forward_serves_an_http_server_in_the_pod(backend, fake_kube):
    assert backend.supports(Feature.EXEC) and backend.supports(Feature.PORT_FORWARD)
    port = free_port()
    start_run(backend, fake_kube, "web-abc123", f"python -m http.server {port} --bind 127.0.0.1", nodes=1)
    ready: list[int] = []
    stop = threading.Event()
    forwarder = threading.Thread(
        target=backend.port_forward,
        args=("web-abc123",),
        kwargs={"rank": 0, "local_port": 0, "remote_port": port, "ready": ready.append, "stop": stop},
        daemon=True,
    )
    forwarder.start()
    try:
        wait_until(lambda: ready, 10, message="the local port to listen")

        def answers():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ready[0]}/", timeout=5) as resp:
                    return resp.status == 200 and b"Directory listing" in resp.read()
            except OSError:
                return False  # the pod's server is not listening yet

        wait_until(answers, 30, message="the forwarded server to answer")
        assert answers()  # a second connection: a WebSocket of its own
        assert ("portforward", "v4.channel.k8s.io") in fake_kube.streams
    finally:
        stop.set()
        forwarder.join(10)
        backend.stop("web-abc123")
    assert not forwarder.is_alive()


def test_port_forward_to_a_closed_port_says_so_and_keeps_serving(backend, fake_kube, capfd):
    start_run(backend, fake_kube, "quiet-abc123", "sleep 120", nodes=1)
    ready: list[int] = []
    stop = threading.Event()
    forwarder = threading.Thread(
        target=backend.port_forward,
        args=("quiet-abc123",),
        kwargs={"rank": 0, "local_port": 0, "remote_port": free_port(), "ready": ready.append, "stop": stop},
        daemon=True,
    )
    forwarder.start()
    try:
        wait_until(lambda: ready, 10, message="the local port to listen")
        with socket.create_connection(("127.0.0.1", ready[0]), timeout=10) as conn:
            assert conn.recv(100) == b""  # closed: nothing listens in the pod
        err: list[str] = []
        wait_until(
            lambda: err.append(capfd.readouterr().err) or "connection refused" in "".join(err).lower(),
            10,
            message="the forwarding error on stderr",
        )
        assert forwarder.is_alive()
    finally:
        stop.set()
        forwarder.join(10)
        backend.stop("quiet-abc123")


def test_a_refused_exec_handshake_is_one_line_with_the_apis_message(backend, fake_kube):
    with pytest.raises(KubeError) as e:
        backend.api.exec_stream("no-such-pod", ["true"], tty=False)
    assert str(e.value) == 'cluster fake: cannot exec in pod no-such-pod: 404 NotFound: pods "no-such-pod" not found'
    assert e.value.status == 404 and e.value.exit_code == 2
