"""The progress channel among the node ranks, where they are on different nodes (the backend
sets contract.PROGRESS_PORT only there; on the local backend the supervisor reads each
rank's progress file and names the stragglers itself).

Every rank > 0 keeps one TCP connection to rank 0's entrypoint (MASTER_ADDR, PROGRESS_PORT)
and sends on it, every REPORT_SECONDS, one line of JSON: {"rank", "node", "step",
"step_seconds", "steps_timed"}, from its watch (launcher.entrypoint.watch). Rank 0 keeps
the latest of each, with its own, and on each tick of its watch applies
launcher.pod.stragglers: it names each straggler once, live, in its log (`straggler: rank N
on NODE: ...`), and keeps the lines for its termination message, which `describe` shows
after the attempt. With resilience.exclude_faulty_nodes, a rank that stays a straggler for
the grace period (resilience.straggler_grace; by default the longer of DEFAULT_GRACE and
this attempt's own setup time: what a restart costs, docs/resilience.md) is a fault of its
node: rank 0 tells that rank so on its connection (a JSON line: the verdict and the line that
named it), and the straggler ends its command as a hang does and exits EXIT_STRAGGLER. Rank 0
goes on: the Job fails on its first failed pod, whose failure event (and, after a JobSet
restart, its Scheduled event) then gives the straggler's node. Where the straggler cannot be
told, or has not ended TOLD_SECONDS after, rank 0 ends the attempt (EXIT_STRAGGLER_PEER).

The port is not MASTER_PORT: that is the command's own while it runs (torch's TCPStore,
torchrun's static rendezvous), whereas the health gate uses it only before the command.
TCP rather than UDP: an accepted connection's source address has come through a handshake,
which is what rank 0's check of it (Collector._allowed) rests on. Standard library only
(launcher.pod.zipapp): the server is one thread over `selectors`, as many connections as
ranks, each a line every few seconds.
"""

from __future__ import annotations

import json
import select
import selectors
import socket
import threading
import time
from typing import NamedTuple

from launcher.entrypoint import log as out
from launcher.entrypoint.rendezvous import addresses, plain_address
from launcher.pod import contract, stragglers

REPORT_SECONDS = 2.0
"""How often a rank > 0 sends its progress: a straggler is named at most this much later."""
CONNECT_SECONDS = 5.0
DEFAULT_GRACE = 120.0
"""The least grace a straggler gets before it is a node fault (resilience.straggler_grace unset)."""
RESOLVE_EVERY = 5.0
"""Seconds between lookups of a rank's host name when a report comes from an address it did
not resolve to (a pod's DNS record appears a little after the pod)."""
MAX_LINE = 4096
MAX_NAMED_IN_MESSAGE = 8
"""Straggler lines rank 0 leaves in its termination message (4 KiB in all); the log has every one."""
TOLD_SECONDS = 30.0
"""How long a straggler that rank 0 told to end may take to end (its command's group gets
SIGTERM, then SIGKILL 5 s later) before rank 0 ends the attempt itself."""


class Verdict(NamedTuple):
    """Why the watch ends the command for a straggler, and the exit code that says whose."""

    reason: str
    exit_code: int


def open_channel(env: dict[str, str], resilience, setup_seconds: float):
    """This rank's end of the channel (a Collector on rank 0, a Reporter on the others), or
    None where there is none (one node, the local backend, no port from the backend)."""
    raw = env.get(contract.PROGRESS_PORT)
    nodes = int(env.get(contract.NODES) or 1)
    if not raw or nodes < 2 or contract.on_host(env):
        return None
    try:
        port = int(raw)
        if not 0 < port < 65536:
            raise ValueError
    except ValueError:
        out.log(f"note: {contract.PROGRESS_PORT} is not a TCP port ({raw!r}): stragglers are named after the ranks end")
        return None
    rank, node = int(env["NODE_RANK"]), env.get(contract.NODE_NAME) or None
    if rank > 0:
        return Reporter(env["MASTER_ADDR"], port, rank, node)
    grace = resilience.straggler_grace
    if grace is None:
        grace = max(DEFAULT_GRACE, setup_seconds)
    collector = Collector(
        port,
        nodes,
        env.get(contract.RANK_HOSTS) or "",
        node,
        resilience.straggler_factor,
        grace if resilience.exclude_faulty_nodes else None,
    )
    problem = collector.listen()
    if problem:
        out.log(f"note: {problem}: stragglers are named after the ranks end")
        return None
    then = (
        f"; one that stays a straggler for {grace:g} s ends the attempt as a fault of its node "
        "(resilience.exclude_faulty_nodes, resilience.straggler_grace)"
        if resilience.exclude_faulty_nodes
        else ""
    )
    out.log(
        f"progress: comparing the step times of all {nodes} ranks on port {port}: a rank slower than "
        f"{resilience.straggler_factor:g}x the others' median is named here{then}"
    )
    return collector


class Reporter:
    """A rank > 0's end: its progress to rank 0, every REPORT_SECONDS, on one connection."""

    def __init__(self, addr: str, port: int, rank: int, node: str | None):
        self.addr, self.port, self.rank, self.node = addr, port, rank, node
        self.told: str | None = None
        """What rank 0 told this rank: that it stayed a straggler past its grace."""
        self._named: list[str] = []
        """The line rank 0 named this rank with, once told."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, watch) -> None:
        self._thread = threading.Thread(target=self._run, args=(watch,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=CONNECT_SECONDS + 1)

    def judge(self, watch) -> Verdict | None:
        """Rank 0 judges; this rank ends its command once rank 0 has told it that it is a
        straggler past its grace, so that its own pod is the one that fails."""
        return Verdict(self.told, contract.EXIT_STRAGGLER) if self.told else None

    def lines(self) -> list[str]:
        """The line naming this rank, once rank 0 told it (rank 0 names the others)."""
        return list(self._named)

    def _run(self, watch) -> None:
        conn: socket.socket | None = None
        said = False
        buffer = b""
        while not self._wait(conn):
            if self.told:
                # Nothing more to report; the connection stays open until this rank ends
                # (stop): rank 0 takes its close for the straggler's end.
                self._stop.wait()
                break
            report = {"rank": self.rank, "node": self.node, **watch.progress()}
            try:
                if conn is None:
                    conn = socket.create_connection((self.addr, self.port), timeout=CONNECT_SECONDS)
                    buffer = b""
                conn.sendall((json.dumps(report) + "\n").encode())
                buffer = self._hear(conn, buffer)
            except OSError as e:
                if conn is not None:
                    conn.close()
                    conn = None
                if not said:  # once: rank 0 may not listen yet, or have ended
                    out.log(
                        f"progress: cannot reach rank 0 at {self.addr}:{self.port} ({e.strerror or e}); "
                        "trying again every few seconds"
                    )
                    said = True
        if conn is not None:
            conn.close()

    def _wait(self, conn: socket.socket | None) -> bool:
        """Wait REPORT_SECONDS, or less where rank 0 says something first (read by the next
        `_hear`); True: stop."""
        if conn is None:
            return self._stop.wait(REPORT_SECONDS)
        deadline = time.monotonic() + REPORT_SECONDS
        while (left := deadline - time.monotonic()) > 0 and not self._stop.is_set():
            try:
                readable, _, _ = select.select([conn], [], [], min(left, 0.5))
            except (OSError, ValueError):
                break
            if readable:
                break
        return self._stop.is_set()

    def _hear(self, conn: socket.socket, buffer: bytes) -> bytes:
        """Take what rank 0 sent on this connection, without waiting; the part line left.
        OSError where the connection is gone."""
        while select.select([conn], [], [], 0)[0]:
            data = conn.recv(MAX_LINE)
            if not data:
                raise ConnectionResetError("rank 0 closed the connection")
            buffer += data
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                self._heard(line)
            if len(buffer) > MAX_LINE:
                raise ConnectionResetError("rank 0 sent a line too long")
        return buffer

    def _heard(self, line: bytes) -> None:
        try:
            said = json.loads(line.decode("utf-8"))
        except ValueError:
            return
        if not isinstance(said, dict):
            return
        verdict, naming = said.get("straggler"), said.get("line")
        named = stragglers.named_in(verdict) if isinstance(verdict, str) else None
        if named is None or named[0] != self.rank or self.told:
            return  # only this rank's own verdict ends it
        if isinstance(naming, str) and naming.startswith(stragglers.PREFIX) and stragglers.named_in(naming) == named:
            self._named = [naming]
        self.told = verdict
        out.log(f"{verdict}: rank 0 says so; ending this rank, so that its node's pod is the one that fails")


IDENTIFY_SECONDS = 10.0
"""A connection that has not said which rank it is within this long is closed (a rank's first
line comes at once): no one holds rank 0's sockets open without reporting."""


class _Peer:
    def __init__(self, address: str):
        self.address = address
        self.buffer = b""
        self.rank: int | None = None
        self.since = time.monotonic()


class Collector:
    """Rank 0's end: the other ranks' latest progress, and the stragglers among all."""

    def __init__(self, port: int, nodes: int, rank_hosts: str, node: str | None, factor: float, grace: float | None):
        self.port, self.nodes, self.rank_hosts, self.node = port, nodes, rank_hosts, node
        self.factor = factor
        self.grace = grace
        """Seconds a straggler may stay one before it ends the attempt; None: never (no exclude_faulty_nodes)."""
        self.reports: dict[int, dict] = {}
        self.named: dict[int, str] = {}
        """The line naming each straggler, by rank, in the order they were named."""
        self._slow_since: dict[int, float] = {}
        self._told: dict[int, tuple[float, str]] = {}
        """The stragglers rank 0 told to end: when, and what."""
        self._conns: dict[int, socket.socket] = {}
        """Each rank's connection, to tell it (by the server's thread, read by the watch's)."""
        self._reported: dict[int, float] = {}
        """When each rank's last report came."""
        self._resolved: dict[int, tuple[float, set[str]]] = {}
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def listen(self) -> str | None:
        """Listen on the port; None, or why it cannot."""
        try:
            # Both families where the pod has IPv6 (an IPv6-only cluster), else IPv4 alone.
            self._server = socket.create_server(("", self.port), family=socket.AF_INET6, dualstack_ipv6=True)
        except (OSError, ValueError):
            try:
                self._server = socket.create_server(("", self.port))
            except OSError as e:
                return f"cannot listen on the progress port {self.port}: {e.strerror or e}"
        self._server.setblocking(False)
        return None

    def start(self, watch) -> None:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def lines(self) -> list[str]:
        """The lines naming stragglers, for the termination message."""
        return list(self.named.values())[:MAX_NAMED_IN_MESSAGE]

    # ----------------------------------------------------------- the other ranks' reports

    def _serve(self) -> None:
        assert self._server is not None
        sel = selectors.DefaultSelector()
        sel.register(self._server, selectors.EVENT_READ, None)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.5):
                    if key.data is None:
                        try:
                            conn, addr = self._server.accept()
                        except OSError:
                            continue
                        conn.setblocking(False)
                        sel.register(conn, selectors.EVENT_READ, _Peer(plain_address(str(addr[0]))))
                    elif not self._read(key.fileobj, key.data):  # type: ignore[arg-type]
                        sel.unregister(key.fileobj)
                        self._forget(key.fileobj)  # type: ignore[arg-type]
                        key.fileobj.close()  # type: ignore[union-attr]
                now = time.monotonic()
                for key in list(sel.get_map().values()):
                    if key.data is not None and key.data.rank is None and now - key.data.since > IDENTIFY_SECONDS:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
        finally:
            with self._lock:
                self._conns.clear()
            for key in list(sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            sel.close()

    def _read(self, conn: socket.socket, peer: _Peer) -> bool:
        """Take what came on a connection; False: close it."""
        try:
            data = conn.recv(MAX_LINE)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        peer.buffer += data
        while b"\n" in peer.buffer:
            line, _, peer.buffer = peer.buffer.partition(b"\n")
            if not self._take(line, peer, conn):
                return False
        return len(peer.buffer) <= MAX_LINE

    def _take(self, line: bytes, peer: _Peer, conn: socket.socket) -> bool:
        try:
            report = json.loads(line.decode("utf-8"))
        except ValueError:
            return False
        rank = report.get("rank") if isinstance(report, dict) else None
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 < rank < self.nodes:
            return False
        if peer.rank is None:
            if not self._allowed(rank, peer.address):
                return False
            peer.rank = rank
        elif rank != peer.rank:
            return False
        node = report.get("node")
        with self._lock:
            self.reports[rank] = {**report, "node": node if isinstance(node, str) else None}
            self._conns[rank] = conn
            self._reported[rank] = time.monotonic()
        return True

    def _forget(self, conn: socket.socket) -> None:
        with self._lock:
            for rank in [r for r, c in self._conns.items() if c is conn]:
                del self._conns[rank]

    def _tell(self, rank: int, verdict: str) -> bool:
        """Tell a straggler its verdict, and the line that named it, on its own connection;
        False: it cannot be told."""
        with self._lock:
            conn = self._conns.get(rank)
            if conn is None:
                return False
            try:
                # A line of a few hundred bytes into an idle socket's buffer: it does not block.
                conn.sendall((json.dumps({"straggler": verdict, "line": self.named.get(rank)}) + "\n").encode())
            except OSError:
                return False
        return True

    def _allowed(self, rank: int, address: str) -> bool:
        """Whether `address` is one rank `rank`'s host name resolves to, as the rendezvous
        resolves MASTER_ADDR. Why: the port is open to the whole cluster network, and a report
        can name a straggler and, with exclude_faulty_nodes, end the attempt and keep the run
        off a node; a pod of someone else's must not be able to do that to this run. What it
        does not protect against: a process that shares a rank's address (its own pod's other
        containers, a hostNetwork pod on the same node, a rank's own command), an address a
        network lets be spoofed, or a service mesh whose proxy hides the peer's address (then
        the reports are refused, and the stragglers are named after the pods end)."""
        if not self.rank_hosts:
            return self._refuse(address, rank, f"the backend named no host for the ranks ({contract.RANK_HOSTS})")
        host = self.rank_hosts.replace("{rank}", str(rank))
        when, known = self._resolved.get(rank, (0.0, set()))
        if address not in known and time.monotonic() - when >= RESOLVE_EVERY:
            known = addresses(host)
            self._resolved[rank] = (time.monotonic(), known)
        if address in known:
            return True
        return self._refuse(address, rank, f"{host} resolves to {', '.join(sorted(known)) or 'nothing yet'}")

    def _refuse(self, address: str, rank: int, why: str) -> bool:
        if address not in self._refused:  # once per address: a log line, not a flood
            self._refused.add(address)
            out.log(f"progress: refused a report from {address} as rank {rank}: {why}")
        return False

    # ----------------------------------------------------------- judging, on each tick of rank 0's watch

    def judge(self, watch) -> Verdict | None:
        """Name each new straggler; once one has stayed a straggler for the grace period (with
        exclude_faulty_nodes), tell it to end, and end the attempt here only where rank 0 is
        the straggler, or the straggler cannot be told or does not end when told."""
        with self._lock:
            reports = dict(self.reports)
            connected, reported = set(self._conns), dict(self._reported)
        now = time.monotonic()
        for rank, (when, verdict) in self._told.items():
            # Ended: its connection went and no report came since (a reporter that reconnected has not).
            ended = rank not in connected and reported.get(rank, 0.0) <= when
            if not ended and now - when >= TOLD_SECONDS:
                out.log(
                    f"straggler: rank {rank} has not ended {now - when:.0f} s after it was told; ending the attempt"
                )
                return Verdict(verdict, contract.EXIT_STRAGGLER_PEER)
        reports[0] = {**watch.progress(), "node": self.node}
        times = {}
        for rank, report in reports.items():
            seconds = stragglers.timed(report)
            if seconds is not None:
                times[rank] = seconds
        slow = stragglers.stragglers(times, self.factor)
        for rank in set(self._slow_since) - {s.rank for s in slow}:
            del self._slow_since[rank]  # it caught up: its grace starts afresh
        for s in slow:
            node = reports[s.rank].get("node")
            since = self._slow_since.setdefault(s.rank, now)
            if s.rank not in self.named:
                self.named[s.rank] = stragglers.line(s, node, self.factor)
                out.log(self.named[s.rank])
            if self.grace is not None and now - since >= self.grace and s.rank not in self._told:
                verdict = (
                    f"hardware: {stragglers.line(s, node, self.factor)}; still one after {now - since:.0f} s "
                    "(resilience.straggler_grace)"
                )
                out.log(verdict)
                if s.rank == 0:  # this rank's own node: its own pod fails
                    return Verdict(verdict, contract.EXIT_STRAGGLER)
                if not self._tell(s.rank, verdict):
                    out.log(f"straggler: rank {s.rank} cannot be told (no connection from it); ending the attempt")
                    return Verdict(verdict, contract.EXIT_STRAGGLER_PEER)
                self._told[s.rank] = (now, verdict)
                out.log(
                    f"straggler: told rank {s.rank} to end, so that its pod is the one that fails; this rank "
                    f"goes on (it ends the attempt itself if rank {s.rank} has not ended in {TOLD_SECONDS:g} s)"
                )
        return None
