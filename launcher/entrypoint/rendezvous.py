"""Node ranks > 0 wait for rank 0 before starting the command.

composer and torchrun on node rank N connect to MASTER_ADDR:MASTER_PORT, where
rank 0's process listens. On Kubernetes the DNS record of rank 0's pod (a headless
Service) can appear tens of seconds after this pod starts, and the port answers
only once rank 0's program has started; a program that tries too early fails or
hangs. So: retry DNS resolution and a TCP connect, with backoff, until both
succeed or LAUNCHER_RENDEZVOUS_TIMEOUT (default 600 s) runs out.
"""

from __future__ import annotations

import socket
import time

from launcher.entrypoint import contract
from launcher.entrypoint import log as out

DEFAULT_TIMEOUT = 600.0
REPORT_EVERY = 10.0
MAX_DELAY = 1.0  # a short ceiling: rank 0's port is seen within ~1 s of opening


def timeout_from(env: dict[str, str]) -> float:
    raw = env.get(contract.RENDEZVOUS_TIMEOUT, "")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{contract.RENDEZVOUS_TIMEOUT} must be a positive number of seconds, got {raw!r}")
    return value


def probe(addr: str, port: int, timeout: float) -> str | None:
    """None when addr resolves and one of its addresses accepts a TCP connection;
    otherwise why not."""
    try:
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return f"{addr} does not resolve yet ({e.strerror})"
    errors = []
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(timeout)
                s.connect(sockaddr)
                return None
        except OSError as e:
            errors.append(f"{sockaddr[0]}: {e.strerror or type(e).__name__}")
    return f"port {port} does not answer yet ({'; '.join(errors)})"


def wait_for_rank0(env: dict[str, str]) -> int:
    """0 once rank 0 answers, contract.EXIT_RENDEZVOUS after the timeout."""
    addr = env["MASTER_ADDR"]
    port = int(env["MASTER_PORT"])
    try:
        timeout = timeout_from(env)
    except ValueError as e:
        out.log(f"error: {e}")
        return contract.EXIT_RENDEZVOUS
    out.log(f"waiting for node rank 0 at {addr}:{port} (up to {timeout:g}s)")
    start = time.monotonic()
    deadline = start + timeout
    next_report = start + REPORT_EVERY
    delay = 0.2
    while True:
        why = probe(addr, port, timeout=min(3.0, max(0.1, deadline - time.monotonic())))
        now = time.monotonic()
        if why is None:
            out.log(f"node rank 0 answered at {addr}:{port} after {now - start:.1f}s")
            return 0
        if now >= deadline:
            out.log(
                f"error: node rank 0 did not answer at {addr}:{port} within {timeout:g}s: {why}. "
                "Check node rank 0's log: its command must start the distributed program (composer, "
                "torchrun) that listens on MASTER_PORT. On Kubernetes, check that the headless Service "
                f"resolves. {contract.RENDEZVOUS_TIMEOUT} sets how long to wait."
            )
            return contract.EXIT_RENDEZVOUS
        if now >= next_report:
            out.log(f"still waiting for node rank 0 after {now - start:.0f}s: {why}")
            next_report = now + REPORT_EVERY
        time.sleep(min(delay, max(0.0, deadline - now)))
        delay = min(delay * 2, MAX_DELAY)
