"""The health gate before the command (resilience.preflight), on every attempt and every rank:

1. devices: where `nvidia-smi` is on the rank's PATH, it must list the GPUs (a GPU that
   fell off the bus or reports an Xid makes it fail or hang); where `dcgmi` is, DCGM's
   short diagnostic (`dcgmi diag -r 1`) must report no failed test; a rank without either
   has no device to check with them;
2. where torch is importable by the rank's python3 and CUDA is there, on each local GPU a
   matmul whose answer is known and a device-memory check (a block of up to 1 GiB written
   and summed), each timed;
3. all ranks together, within LAUNCHER_PREFLIGHT_TIMEOUT (default 60 s): with torch, one
   gloo all-reduce across all node ranks, which tells every rank whether any rank's device
   checks failed, then, where every rank has CUDA and none failed, one NCCL all-reduce on
   GPU 0 (the path the training's collectives take); without torch, a rendezvous over
   MASTER_ADDR and MASTER_PORT in the standard library: every rank > 0 connects to rank 0,
   says its rank and whether its devices passed, and rank 0 answers all once all have come.

A rank whose devices failed ends the attempt as `hardware`, its reason naming the check; a
rank that cannot reach the others within the deadline (or whose NCCL all-reduce fails), as
`collective` (the exit file's reason starts with the class: launcher.pod.failures). Either
way the command has not started. The gate's time, and each GPU check's, is logged.

The port is rank 0's MASTER_PORT, free again when the gate ends (the listening socket has
SO_REUSEADDR, and the ranks > 0 close first), so the command's own rendezvous gets it.
"""

from __future__ import annotations

import importlib.util
import json
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
import datetime, os, sys, time
import torch, torch.distributed as dist
rank, world, bad, timeout = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
MEMORY_BYTES = 1 << 30  # the memory check's block, at most (a quarter of what is free, if less)
def say(kind, text):
    print(f"@@preflight-{kind} {text}", flush=True)
cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
if cuda and not bad:
    for i in range(torch.cuda.device_count()):
        check, began = "matmul", time.monotonic()
        try:
            a = torch.ones(256, 256, device=f"cuda:{i}")
            if float((a @ a)[0, 0]) != 256.0:
                raise RuntimeError("a 256x256 matmul of ones gave a wrong answer")
            check = "memory"
            free, total = torch.cuda.mem_get_info(i)
            n = max(1, min(MEMORY_BYTES, free // 4) // 8)
            block = torch.arange(n, dtype=torch.int64, device=f"cuda:{i}")
            if int(block.sum()) != n * (n - 1) // 2:
                raise RuntimeError(f"a block of {n * 8 >> 20} MiB read back wrong")
            del block
            torch.cuda.synchronize(i)
            say("log", f"GPU {i} ({torch.cuda.get_device_name(i)}): matmul and {n * 8 >> 20} MiB of memory "
                f"({free >> 20} of {total >> 20} MiB free) checked in {time.monotonic() - began:.2f} s")
        except Exception as e:  # a CUDA error (ECC, a lost device) is the finding, not a crash
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            say("device", f"GPU {i}: {check} check failed: {first}")
            bad = 1
dist.init_process_group(
    "gloo",
    init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
    rank=rank,
    world_size=world,
    timeout=datetime.timedelta(seconds=timeout),
)
t = torch.tensor([bad, int(cuda and not bad)], dtype=torch.int64)
dist.all_reduce(t)
failed, with_cuda = int(t[0]), int(t[1])
print(f"@@preflight {failed}", flush=True)
if failed == 0 and with_cuda == world:
    # Every rank has a working GPU: the collectives the training will use go over NCCL.
    began = time.monotonic()
    say("nccl", "start")
    torch.cuda.set_device(0)
    nccl = dist.new_group(backend="nccl", timeout=datetime.timedelta(seconds=timeout))
    x = torch.ones(1, device="cuda:0")
    dist.all_reduce(x, group=nccl)
    torch.cuda.synchronize(0)
    if int(x.item()) != world:
        raise SystemExit(f"the NCCL all-reduce summed {world} ones to {x.item()}")
    say("nccl", f"passed {time.monotonic() - began:.2f}")
dist.destroy_process_group()
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
    answer: int | str
    alone_and_failed = bool(device_problem) and nodes == 1  # no need to meet: fail now
    has_torch = not alone_and_failed and torch_importable(env)
    if alone_and_failed:
        how, answer = "one rank: nothing to tell the others", 1
    elif nodes > 1 or has_torch:
        how, answer, gpu_problem = together(env, rank, nodes, bool(device_problem), timeout, cwd, has_torch)
        if gpu_problem:
            out.log(f"preflight: {gpu_problem}")
        device_problem = device_problem or gpu_problem
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
    """What is wrong with this rank's GPUs, by nvidia-smi and DCGM's diagnostic where they
    are; None: nothing found."""
    return _nvidia_smi(env, timeout) or _dcgm_diag(env, timeout)


def _nvidia_smi(env: dict[str, str], timeout: float) -> str | None:
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


DCGM_DIAG = ("diag", "-r", "1", "-j")
"""DCGM's short diagnostic (level 1: deployment and software checks, seconds), as JSON."""


def _dcgm_diag(env: dict[str, str], timeout: float) -> str | None:
    """The failed tests of `dcgmi diag -r 1`, where dcgmi is on PATH. Only a test DCGM
    reports as failed is a finding: a dcgmi that cannot run or reach its host engine
    (nv-hostengine), or says nothing readable, says nothing of the GPUs, and is logged."""
    dcgmi = shutil.which("dcgmi", path=env.get("PATH"))
    if not dcgmi:
        return None
    limit = min(timeout, 60.0)
    began = time.monotonic()
    try:
        done = subprocess.run(
            [dcgmi, *DCGM_DIAG], env=env, capture_output=True, timeout=limit, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        out.log(f"preflight: dcgmi diag -r 1 did not answer within {limit:g} s: not counted")
        return None
    except OSError as e:
        out.log(f"preflight: dcgmi could not run ({e.strerror or e}): not counted")
        return None
    text = done.stdout.decode("utf-8", "replace")
    # Its JSON may follow lines of its own (a banner, notes): from the first brace on.
    try:
        report = json.loads(text[text.index("{") : text.rindex("}") + 1])
    except ValueError:
        said = (done.stdout + done.stderr).decode("utf-8", "replace").strip().splitlines()
        out.log(
            f"preflight: dcgmi diag -r 1 gave no report (exit code {done.returncode}"
            + (f": {out.mask(said[-1])}" if said else "")
            + "): not counted"
        )
        return None
    found = _failed_tests(report)
    # A summary's bare "Fail" (4.x's test_summary) adds nothing to its results' own words.
    failed = [f for f in found if not f.endswith(f": {FAILED_BARE}")] or found
    spent = time.monotonic() - began
    if failed:
        return f"dcgmi diag -r 1 failed: {'; '.join(failed[:4])}"
    out.log(f"preflight: dcgmi diag -r 1 passed in {spent:.1f} s")
    return None


FAILED_BARE = "failed"


def _failed_tests(node: object, test: str = "") -> list[str]:
    """'GPU N: TEST: warning' for each result DCGM marks failed, anywhere in its JSON report:
    its layout changed across DCGM releases (test_categories → tests → results, each with a
    status and warnings; a test_summary beside them in 4.x), so the walk looks for the
    status, not for a path."""
    found: list[str] = []
    if isinstance(node, list):
        for item in node:
            found += _failed_tests(item, test)
    elif isinstance(node, dict):
        name = node.get("name") or node.get("test_name")
        test = name if isinstance(name, str) else test
        for key, value in node.items():
            if key not in ("warnings", "info") and isinstance(value, (dict, list)):
                found += _failed_tests(value, test)
        status = node.get("status", node.get("result"))
        if isinstance(status, str) and status.strip().lower() == "fail":
            said = [w.get("warning") if isinstance(w, dict) else w for w in node.get("warnings") or []]
            words = [w.strip() for w in said if isinstance(w, str) and w.strip()]
            gpu = next((node[k] for k in ("gpu_id", "gpu_ids", "entity_id") if k in node), None)
            where = f"GPU {gpu}: " if isinstance(gpu, (int, str)) and str(gpu) != "" else ""
            found.append(f"{where}{test or 'a test'}: {words[0] if words else FAILED_BARE}")
    return list(dict.fromkeys(found))


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
) -> tuple[str, int | str, str | None]:
    """All ranks at once: how; the number of ranks whose devices failed (or, as a string,
    why the ranks could not all be reached); and what the GPU checks that come with the
    torch gate found wrong on this rank (None: nothing, or no torch to check with)."""
    if has_torch:
        return _torch_gate(env, rank, nodes, bad, timeout, cwd)
    out.log("preflight: no torch for this rank's python3: no GPU matmul or memory check")
    answer = rendezvous(env["MASTER_ADDR"], int(env["MASTER_PORT"]), rank, nodes, bad, timeout)
    return "rendezvous at rank 0 (no torch in this rank)", answer, None


def _torch_gate(
    env: dict[str, str], rank: int, nodes: int, bad: bool, timeout: float, cwd: str
) -> tuple[str, int | str, str | None]:
    python = shutil.which("python3", path=env.get("PATH")) or sys.executable
    argv = [python, "-c", _TORCH_GATE, str(rank), str(nodes), str(int(bad)), str(timeout)]
    ended: int | str
    try:
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=timeout + 30)
        said, ended = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        said, ended = (e.stdout or b"") + (e.stderr or b""), f"did not end within {timeout + 30:g} s"
    answer: int | None = None
    problems: list[str] = []
    nccl: str | None = None  # None: not tried; "": started; else its seconds
    others: list[str] = []
    for line in said.decode("utf-8", "replace").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "@@preflight":
            answer = int(rest)
        elif kind == "@@preflight-device":
            problems.append(rest)
        elif kind == "@@preflight-log":
            out.log(f"preflight: {rest}")
        elif kind == "@@preflight-nccl":
            nccl = "" if rest == "start" else rest[len("passed ") :]  # str.removeprefix is 3.9+
        elif line.strip():
            others.append(line)
    problem = "; ".join(problems) or None
    why = f"exit code {ended}" if isinstance(ended, int) else ended
    last = f": {out.mask(others[-1])}" if others else ""
    if answer is None:
        return "gloo all-reduce", f"the gloo all-reduce failed ({why}){last}", problem
    if nccl == "":
        return "gloo all-reduce", f"the NCCL all-reduce failed ({why}){last}", problem
    how = "gloo all-reduce" + (f", then an NCCL all-reduce in {nccl} s" if nccl else "")
    return how, answer, problem


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
