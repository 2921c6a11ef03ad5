"""Node ranks > 0 wait for rank 0's address before starting the command.

On Kubernetes the DNS record of rank 0's pod (a headless Service) can appear tens
of seconds after this pod starts, and a program that looks it up too early fails
at once. So: retry DNS resolution of MASTER_ADDR, with backoff, until it resolves
or LAUNCHER_RENDEZVOUS_TIMEOUT (default 600 s) runs out. The local backend's
MASTER_ADDR is 127.0.0.1: there is nothing to wait for, and main does not call this.

The port is not waited for: torch's TCPStore and torchrun's c10d rendezvous retry
their own connections, and a plain command (`echo hi`, which never opens the port)
must run on every node at once, as on mcli.
"""

from __future__ import annotations

import socket
import time

from launcher.entrypoint import log as out
from launcher.pod import contract
from launcher.pod.backoff import Backoff

DEFAULT_TIMEOUT = 600.0
REPORT_EVERY = 10.0
FIRST_DELAY = 0.2
MAX_DELAY = 2.0


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


def resolve(addr: str) -> str | None:
    """None when addr resolves; otherwise why not."""
    try:
        socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return f"{addr} does not resolve yet ({e.strerror})"
    except UnicodeError:
        return f"{addr} is not a valid host name"
    return None


def addresses(host: str) -> set[str]:
    """The addresses `host` resolves to now (IPv4 ones as plain dotted quads); empty where
    it does not (yet)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return set()
    return {plain_address(str(info[4][0])) for info in found}


def plain_address(address: str) -> str:
    """An address as `addresses` gives it: an IPv4 address that reached a dual-stack socket
    (::ffff:10.0.0.5) as its dotted quad."""
    return address[len("::ffff:") :] if address.startswith("::ffff:") and "." in address else address


def wait_for_rank0(env: dict[str, str]) -> int:
    """0 once rank 0's address resolves, contract.EXIT_RENDEZVOUS after the timeout."""
    addr = env["MASTER_ADDR"]
    try:
        timeout = timeout_from(env)
    except ValueError as e:
        out.log(f"error: {e}")
        return contract.EXIT_RENDEZVOUS
    start = time.monotonic()
    why = resolve(addr)
    if why is None:
        return 0
    out.log(f"waiting for node rank 0's address {addr} to resolve (up to {timeout:g}s)")
    deadline = start + timeout
    next_report = start + REPORT_EVERY
    pause = Backoff(FIRST_DELAY, MAX_DELAY, jitter=False)
    while True:
        now = time.monotonic()
        if now >= deadline:
            out.log(
                f"error: node rank 0's address {addr} did not resolve within {timeout:g}s: {why}. "
                "On Kubernetes, check that the run's headless Service exists and that node rank 0's pod "
                f"was scheduled. {contract.RENDEZVOUS_TIMEOUT} sets how long to wait."
            )
            return contract.EXIT_RENDEZVOUS
        if now >= next_report:
            out.log(f"still waiting for node rank 0's address after {now - start:.0f}s: {why}")
            next_report = now + REPORT_EVERY
        time.sleep(min(pause.next(), max(0.0, deadline - now)))
        why = resolve(addr)
        if why is None:
            out.log(f"node rank 0's address {addr} resolved after {time.monotonic() - start:.1f}s")
            return 0
