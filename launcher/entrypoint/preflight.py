"""The health gate before the command (resilience.preflight), on every attempt and every rank:

1. devices: where `nvidia-smi` is on the rank's PATH, it must list the GPUs (a GPU that
   fell off the bus or reports an Xid makes it fail or hang); a rank without it has no
   device to check;
2. all ranks together, within LAUNCHER_PREFLIGHT_TIMEOUT (default 60 s): where torch is
   importable by the rank's python3, one gloo all-reduce across all node ranks (with a
   matmul on each local GPU first where CUDA is there), which also tells every rank
   whether any rank's device check failed; otherwise a rendezvous over MASTER_ADDR and
   MASTER_PORT in the standard library: every rank > 0 connects to rank 0, says its rank
   and whether its devices passed, and rank 0 answers all once all have come.

A rank whose devices failed ends the attempt as `hardware`; a rank that cannot reach the
others within the deadline, as `collective` (the exit file's reason starts with the class:
launcher.pod.failures). Either way the command has not started. The gate's time is logged.

The port is rank 0's MASTER_PORT, free again when the gate ends (the listening socket has
SO_REUSEADDR, and the ranks > 0 close first), so the command's own rendezvous gets it.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
import time

from launcher.entrypoint import log as out
from launcher.pod import contract
from launcher.pod.failures import COLLECTIVE, HARDWARE, SECONDHAND

DEFAULT_TIMEOUT = 60.0

_TORCH_GATE = r"""
import datetime, os, sys
import torch, torch.distributed as dist
rank, world, bad, timeout = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
if not bad and torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        a = torch.ones(256, 256, device=f"cuda:{i}")
        if float((a @ a)[0, 0]) != 256.0:
            print(f"GPU {i}: a matmul gave a wrong answer", flush=True)
            bad = 1
dist.init_process_group(
    "gloo",
    init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
    rank=rank,
    world_size=world,
    timeout=datetime.timedelta(seconds=timeout),
)
t = torch.tensor([bad], dtype=torch.int64)
dist.all_reduce(t)
dist.destroy_process_group()
print(f"@@preflight {int(t.item())}", flush=True)
"""


def timeout_from(env: dict[str, str]) -> float:
    try:
        return max(1.0, float(env.get(contract.PREFLIGHT_TIMEOUT) or DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT


def gate(env: dict[str, str], cwd: str) -> tuple[str, str] | None:
    """Run the gate for this rank; None when it passed, else (class, reason)."""
    began = time.monotonic()
    timeout = timeout_from(env)
    rank, nodes = int(env["NODE_RANK"]), int(env.get(contract.NODES) or 1)
    out.log(f"preflight: checking this rank's devices, then all {nodes} rank(s) together (deadline {timeout:g} s)")
    device_problem = check_devices(env, timeout)
    if device_problem:
        out.log(f"preflight: {device_problem}")
    has_torch = torch_importable(env)
    if nodes > 1 or has_torch:
        how, answer = together(env, rank, nodes, bool(device_problem), timeout, cwd, has_torch)
    else:
        how, answer = "one rank: nothing to reach", 0
    spent = time.monotonic() - began
    if device_problem:
        out.log(f"preflight: failed after {spent:.1f} s")
        return HARDWARE, f"{HARDWARE}: preflight: {device_problem}"
    if isinstance(answer, str):
        out.log(f"preflight: failed after {spent:.1f} s: {answer}")
        return COLLECTIVE, f"{COLLECTIVE}: preflight: {answer}"
    if answer:
        why = f"{SECONDHAND} devices failed their check ({answer} rank(s)); this rank's passed"
        out.log(f"preflight: failed after {spent:.1f} s: {why}")
        return HARDWARE, f"{HARDWARE}: preflight: {why}"
    out.log(f"preflight: passed in {spent:.1f} s ({how})")
    return None


def check_devices(env: dict[str, str], timeout: float) -> str | None:
    """What is wrong with this rank's GPUs, by nvidia-smi where it is; None: nothing found."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        out.log("preflight: no nvidia-smi on PATH: no GPU to check on this rank")
        return None
    try:
        done = subprocess.run(
            [smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader"],
            env=env,
            capture_output=True,
            timeout=min(timeout, 30.0),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"nvidia-smi did not answer within {min(timeout, 30.0):g} s"
    except OSError as e:
        return f"nvidia-smi could not run: {e.strerror or e}"
    text = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
    if done.returncode != 0:
        last = text.splitlines()[-1] if text else f"exit code {done.returncode}"
        return f"nvidia-smi failed (exit code {done.returncode}): {last}"
    gpus = [line for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    out.log(f"preflight: nvidia-smi lists {len(gpus)} GPU(s)" + (f": {'; '.join(gpus[:8])}" if gpus else ""))
    return None


def torch_importable(env: dict[str, str]) -> bool:
    """Whether the command's python3 can import torch (asked without importing it)."""
    python = shutil.which("python3", path=env.get("PATH")) or sys.executable
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"
    try:
        return subprocess.run([python, "-c", probe], env=env, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return importlib.util.find_spec("torch") is not None


def together(
    env: dict[str, str], rank: int, nodes: int, bad: bool, timeout: float, cwd: str, has_torch: bool
) -> tuple[str, int | str]:
    """All ranks at once: how, and the number of ranks whose devices failed (or, as a
    string, why the ranks could not all be reached)."""
    if has_torch:
        return "gloo all-reduce", _torch_all_reduce(env, rank, nodes, bad, timeout, cwd)
    return "rendezvous at rank 0 (no torch in this rank)", rendezvous(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), rank, nodes, bad, timeout
    )


def _torch_all_reduce(env: dict[str, str], rank: int, nodes: int, bad: bool, timeout: float, cwd: str) -> int | str:
    python = shutil.which("python3", path=env.get("PATH")) or sys.executable
    argv = [python, "-c", _TORCH_GATE, str(rank), str(nodes), str(int(bad)), str(timeout)]
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        return f"the gloo all-reduce did not end within {timeout + 30:g} s"
    text = (done.stdout + done.stderr).decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("@@preflight "):
            return int(line.split()[1])
    last = [x for x in text.strip().splitlines() if x.strip()]
    return f"the gloo all-reduce failed (exit code {done.returncode}): {out.mask(last[-1]) if last else ''}"


def rendezvous(addr: str, port: int, rank: int, nodes: int, bad: bool, timeout: float) -> int | str:
    """The standard library's stand-in for an all-reduce of `bad` over `nodes` ranks."""
    deadline = time.monotonic() + timeout
    if rank == 0:
        return _serve(port, nodes, bad, deadline, timeout)
    while True:
        try:
            with socket.create_connection((addr, port), timeout=max(0.1, deadline - time.monotonic())) as s:
                s.sendall(f"{rank} {int(bad)}\n".encode())
                s.settimeout(max(0.1, deadline - time.monotonic()))
                reply = _read_line(s)
            if reply is None:
                return f"rank 0 did not answer within {timeout:g} s"
            return int(reply)
        except (ConnectionRefusedError, ConnectionResetError):
            pass  # rank 0 is not listening yet
        except (OSError, ValueError) as e:
            if time.monotonic() >= deadline:
                return f"rank 0 at {addr}:{port} could not be reached within {timeout:g} s ({e})"
        if time.monotonic() >= deadline:
            return f"rank 0 at {addr}:{port} could not be reached within {timeout:g} s"
        time.sleep(0.1)


def _serve(port: int, nodes: int, bad: bool, deadline: float, timeout: float) -> int | str:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    joined: dict[int, socket.socket] = {}
    failed = int(bad)
    try:
        server.bind(("", port))
        server.listen(max(8, nodes))
        while len(joined) < nodes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, nodes)) - set(joined))
                return f"rank(s) {', '.join(map(str, missing))} did not join within {timeout:g} s"
            server.settimeout(left)
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                line = _read_line(conn)
                rank, its_bad = (int(x) for x in (line or "").split())
            except (OSError, ValueError):
                conn.close()
                continue
            joined[rank] = conn
            failed += its_bad
        for conn in joined.values():
            try:
                conn.sendall(f"{failed}\n".encode())
            except OSError:
                pass
        # The others close first, so that this port is not left in TIME_WAIT for the command.
        for conn in joined.values():
            try:
                conn.settimeout(2.0)
                conn.recv(1)
            except OSError:
                pass
        return failed
    except OSError as e:
        return f"rank 0 could not listen on port {port}: {e.strerror or e}"
    finally:
        for conn in joined.values():
            conn.close()
        server.close()


def _read_line(s: socket.socket) -> str | None:
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = s.recv(64)
        except socket.timeout:
            return None
        if not chunk:
            return None
        data += chunk
    return data.decode().strip()
