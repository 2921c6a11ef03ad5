"""Scripted trouble for the fake API server: error answers, lost responses, slow or
unreachable servers, and 410 Gone on watches. See the package docstring for the API."""

from __future__ import annotations

import contextlib
import fnmatch
import socket
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields

# Node faults (`--fault node=NAME,kind=KIND[,taint=true]`): what a GPU operator's health check
# sets on a bad node (a condition; by default no taint, so the scheduler still places pods there
# and only a launcher that leaves the node out avoids it; with taint=true also the taint of a
# checker that cordons), and the line the kernel logs, which the node's containers print
# before they fail.
NODE_FAULTS = {
    "xid": {
        "condition": {"type": "GpuXid", "reason": "XidError"},
        "line": "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus",
        # With taint=true: what a health checker that also cordons sets (no launcher pod tolerates it).
        "taint": {"key": "nvidia.com/gpu-unhealthy", "value": "xid-79", "effect": "NoSchedule"},
    },
}

# Pod faults (`--fault pod=GLOB|rank=N,kind=KIND`): what a rank's container suffers once it
# runs. hang: its processes stop (SIGSTOP; runc: `runc pause`, the cgroup freezer); slow: its
# CPU is throttled (runc: `runc update --cpu-quota`, a CFS quota of SLOW_CPU_SHARE of one CPU;
# processes: a SIGSTOP/SIGCONT duty cycle of that share, every SLOW_CPU_PERIOD); oom: it is OOM-killed (SIGKILL, then
# the terminated state a kubelet reports for the kernel's OOM kill: reason OOMKilled, exit
# code 137; no memory limit is set, the kill is the fake's).
POD_FAULT_KINDS = ("hang", "slow", "oom")
SLOW_CPU_SHARE = 0.1
"""The share of one CPU a `slow` container gets."""
SLOW_CPU_PERIOD = 0.02
"""Seconds of each throttling period (the CFS period): short, so that steps of a few ms are
slowed each alike rather than one step in five by a whole period."""

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "log")


@dataclass
class FaultRule:
    """Answer requests that match (verb, resource[, name]) badly, `times` times."""

    verb: str | None = None
    """get, list, watch, create, update, patch, delete, deletecollection or log; None: any."""
    resource: str | None = None
    """The plural as in the URL (pods, jobs, configmaps, services, secrets, events, jobsets); None: any."""
    status: int | None = None
    """Answer with this HTTP status and a Status body (on a watch, 410 comes as an ERROR event
    in a 200 stream, as a real server sends it)."""
    lose_response: bool = False
    """Carry the request out (a create commits), then close the connection with no reply."""
    after_commit: bool = False
    """With status: carry the request out first, then answer with that status (a 504 from a
    gateway that gave up on a write that happened)."""
    delay: float = 0.0
    """Hold the request this many seconds before anything else (a slow server)."""
    times: int = 1
    """How many matching requests this rule affects; 0: every one until cleared."""
    name: str | None = None
    """Only requests for this object name."""
    labels: str | None = None
    """Only requests whose labelSelector contains this text (e.g. one informer's list)."""
    message: str | None = None
    """The Status message; a stock one for the code when None."""
    fired: int = 0
    """How many requests it has affected so far."""
    id: int = 0

    def __post_init__(self) -> None:
        if self.verb is not None and self.verb not in VERBS:
            raise ValueError(f"fault verb must be one of {VERBS}, not {self.verb!r}")
        if self.status is None and not self.lose_response and not self.delay:
            raise ValueError("a fault needs status, lose_response or delay")
        if self.after_commit and self.status is None:
            raise ValueError("after_commit needs a status")

    def matches(self, verb: str, resource: str, name: str | None, labels: str = "") -> bool:
        return (
            (self.verb is None or self.verb == verb)
            and (self.resource is None or self.resource == resource)
            and (self.name is None or self.name == name)
            and (self.labels is None or self.labels in labels)
            and (self.times <= 0 or self.fired < self.times)
        )

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class PodFault:
    """A fault for the next `times` main containers started in pods that match (by name
    glob or by rank, the job-completion index), `after` seconds after each starts."""

    kind: str
    pod: str | None = None
    """An fnmatch glob of pod names; None: any pod (of the rank, where rank is given)."""
    rank: int | None = None
    """The pod's batch.kubernetes.io/job-completion-index (a run's node rank)."""
    after: float = 0.0
    times: int = 1
    """How many containers it strikes; 0: every one that matches."""
    fired: int = 0

    def __post_init__(self) -> None:
        if self.kind not in POD_FAULT_KINDS:
            raise ValueError(f"pod fault kind must be one of {', '.join(POD_FAULT_KINDS)}, not {self.kind!r}")
        if self.pod is None and self.rank is None:
            raise ValueError("a pod fault names a pod (a glob of pod names) or a rank")
        if self.after < 0 or self.times < 0:
            raise ValueError("a pod fault's after and times are not negative")

    def matches(self, pod: dict) -> bool:
        meta = pod.get("metadata") or {}
        index = (meta.get("annotations") or {}).get("batch.kubernetes.io/job-completion-index")
        return (
            (self.times <= 0 or self.fired < self.times)
            and (self.pod is None or fnmatch.fnmatchcase(meta.get("name", ""), self.pod))
            and (self.rank is None or index == str(self.rank))
        )


def parse_fault(text: str) -> tuple[str, dict]:
    """`--fault` text: ("node", {node, kind, taint}) for node=NAME,kind=xid[,taint=true], or ("pod", PodFault
    fields) for pod=GLOB|rank=N,kind=hang|slow|oom[,after=S][,times=N]. ValueError says why not."""
    parts = text.split(",")
    fields = dict(part.split("=", 1) for part in parts if "=" in part)
    if len(fields) != len(parts):
        raise ValueError(f"expected KEY=VALUE pairs separated by commas, got {text!r}")
    if "node" in fields:
        if not {"node", "kind"} <= set(fields) <= {"node", "kind", "taint"}:
            raise ValueError(f"expected node=NAME,kind=KIND[,taint=true], got {text!r}")
        if fields.setdefault("taint", "false") not in ("true", "false"):
            raise ValueError(f"a node fault's taint is true or false, got {fields['taint']!r}")
        if fields["kind"] not in NODE_FAULTS:
            raise ValueError(
                f"a node fault's kind must be one of {', '.join(sorted(NODE_FAULTS))}, got {fields['kind']!r}"
            )
        return "node", fields
    if "kind" not in fields or not set(fields) <= {"pod", "rank", "kind", "after", "times"}:
        raise ValueError(f"expected node=NAME,kind=xid or pod=GLOB|rank=N,kind=KIND[,after=S][,times=N], got {text!r}")
    try:
        out: dict = {"kind": fields["kind"], "pod": fields.get("pod")}
        if "rank" in fields:
            out["rank"] = int(fields["rank"])
        if "after" in fields:
            out["after"] = float(fields["after"].removesuffix("s"))
        if "times" in fields:
            out["times"] = int(fields["times"])
    except ValueError:
        raise ValueError(f"rank and times are integers, after a number of seconds: {text!r}") from None
    PodFault(**out)  # checks the kind and the rest
    return "pod", out


@dataclass
class Faults:
    """The faults of one fake cluster; the same methods work against the program through
    `RemoteFaults` (tests/fakes/kube/client.py)."""

    gone_watches: int = 0
    """Answer this many watch requests with a 410 Gone ERROR event."""
    drop_logs_after: int | None = None
    """Cut the next follow log stream abruptly after this many lines."""
    drop_logs_count: int = 1
    """How many log streams drop_logs_after cuts."""
    drop_finished_reads: bool = False
    """Also cut one-shot (not follow) reads, as a proxy or a kubelet restart can."""
    garble_log_stamps: int = 0
    """Send this many log lines with a timestamp no kubelet writes (month 13), for a client's
    line parser to fail on."""
    api_errors: int = 0
    """Answer this many requests (but never watches or logs) with 503."""
    bad_images: set[str] = field(default_factory=set)
    """Images whose pull fails (ErrImagePull, then ImagePullBackOff)."""
    hold_pods: bool = False
    """Keep scheduled pods in ContainerCreating."""
    node_faults: dict[str, str] = field(default_factory=dict)
    """Node name -> a NODE_FAULTS kind: the containers started there print its line and exit 1
    (FakeKube.fault_node also sets the node's condition)."""
    pod_faults: list[PodFault] = field(default_factory=list)
    """Faults for the main containers of matching pods (FakeKube.fault_pod)."""
    rules: list[FaultRule] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _next_id: int = 1
    _connections: object | None = field(default=None, repr=False)  # the server's Listener

    # --- the helper API (stable: other tests build on it) ---------------------------------
    def inject(
        self,
        verb: str | None = None,
        resource: str | None = None,
        *,
        status: int | None = None,
        times: int = 1,
        lose_response: bool = False,
        delay: float = 0.0,
        name: str | None = None,
        labels: str | None = None,
        message: str | None = None,
        after_commit: bool = False,
    ) -> FaultRule:
        """Add a rule; the first matching rule that still has `times` left fires."""
        rule = FaultRule(
            verb=verb,
            resource=resource,
            status=status,
            times=times,
            lose_response=lose_response,
            delay=delay,
            name=name,
            labels=labels,
            message=message,
            after_commit=after_commit,
        )
        with self._lock:
            rule.id = self._next_id
            self._next_id += 1
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Drop every rule and end any refusal or stall of connections."""
        with self._lock:
            self.rules.clear()
        if self._connections is not None:
            self._connections.restore()

    def list_rules(self) -> list[FaultRule]:
        with self._lock:
            return [FaultRule(**{f.name: getattr(r, f.name) for f in fields(r)}) for r in self.rules]

    def set(self, **values) -> None:
        """Set the simple knobs above (gone_watches=3, hold_pods=True, bad_images=[...])."""
        for key, value in values.items():
            if key.startswith("_") or key in ("rules", "pod_faults") or not hasattr(self, key):
                raise ValueError(f"no fault knob {key!r}")
            setattr(self, key, set(value) if key == "bad_images" else value)

    def refuse_connections(self, seconds: float) -> None:
        """Close the listening socket for `seconds` (clients get connection refused), then
        listen again on the same port. Open connections are cut."""
        self._listener().refuse(seconds)

    def stall_connections(self, seconds: float) -> None:
        """For `seconds`, accept connections but read and answer nothing (clients time out
        reading); requests already in flight finish."""
        self._listener().stall(seconds)

    # --- for the HTTP layer ----------------------------------------------------------------
    def take(self, verb: str, resource: str, name: str | None, labels: str = "") -> FaultRule | None:
        with self._lock:
            if verb == "watch" and self.gone_watches > 0:
                self.gone_watches -= 1
                return FaultRule(verb="watch", resource=resource, status=410, fired=1)
            for rule in self.rules:
                if rule.matches(verb, resource, name, labels):
                    rule.fired += 1
                    return rule
            if self.api_errors > 0 and verb not in ("watch", "log"):
                self.api_errors -= 1
                return FaultRule(status=503, message="the server is currently unable to handle the request", fired=1)
        return None

    def take_pod_fault(self, pod: dict) -> PodFault | None:
        """The first pod fault that matches this pod and has times left, counted as fired."""
        with self._lock:
            for fault in self.pod_faults:
                if fault.matches(pod):
                    fault.fired += 1
                    return fault
        return None

    def take_log_drop(self, follow: bool) -> int | None:
        with self._lock:
            if (follow or self.drop_finished_reads) and self.drop_logs_after is not None and self.drop_logs_count > 0:
                self.drop_logs_count -= 1
                return self.drop_logs_after
        return None

    def take_garbled_stamp(self) -> bool:
        with self._lock:
            if self.garble_log_stamps > 0:
                self.garble_log_stamps -= 1
                return True
        return False

    def knobs(self) -> dict:
        return {
            "gone_watches": self.gone_watches,
            "drop_logs_after": self.drop_logs_after,
            "drop_logs_count": self.drop_logs_count,
            "drop_finished_reads": self.drop_finished_reads,
            "garble_log_stamps": self.garble_log_stamps,
            "api_errors": self.api_errors,
            "bad_images": sorted(self.bad_images),
            "hold_pods": self.hold_pods,
            "node_faults": dict(self.node_faults),
            "pod_faults": [asdict(f) for f in self.pod_faults],
        }

    def _listener(self):
        if self._connections is None:
            raise RuntimeError("connection faults need a started server")
        return self._connections


@contextlib.contextmanager
def unreachable_server(mode: str = "refused") -> Iterator[str]:
    """A URL on 127.0.0.1 where no API server answers, for a kubeconfig's `server`.

    mode "refused": the port is bound but not listening, so a connect is refused at once.
    mode "stalled": the port listens with a full backlog, so a connect hangs until the
    client's connect timeout (what an unreachable IP does).
    """
    if mode not in ("refused", "stalled"):
        raise ValueError("mode is refused or stalled")
    sock = socket.socket()
    fillers: list[socket.socket] = []
    try:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        if mode == "stalled":
            sock.listen(0)
            for _ in range(3):
                c = socket.socket()
                c.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    c.connect(("127.0.0.1", port))
                fillers.append(c)
        yield f"http://127.0.0.1:{port}"
    finally:
        for c in fillers:
            c.close()
        sock.close()
