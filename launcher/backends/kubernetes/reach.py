"""Can a profile's API server be reached at all? Asked, from the raw profile, before a
look across every profile (`get runs`, a run looked for everywhere, the dashboard)
loads the profile model or the kubernetes client.

Those looks ask every profile at once. Loading pydantic and the official client costs
most of a second of CPU, so a profile whose server refuses the connection or never
answers (a cluster that is down, a VPN that is off) would cost that, then its connect
timeout. One TCP connect with the listing's connect timeout settles it first: an
unreachable profile costs only the timeout, in parallel with the others.

The same plain read gives a profile without `namespace` its context's namespace, as
kubectl takes it (context_namespace).

The check is best-effort. It reads the server (or the kubeconfig's proxy-url) from
the kubeconfig with plain YAML; anything it cannot read (no kubeconfig, a missing
context, a merged KUBECONFIG list, in-cluster config) is left to the client, whose
loader gives the precise error.
"""

from __future__ import annotations

import codecs
import copy
import os
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import yaml

from launcher import debug
from launcher.backends.kubernetes.errors import KubeUnreachable
from launcher.errors import connection_failure

# A connect to a host name looks up the idna codec, which imports it the first time: here,
# then, in the thread that imports reach.py, not in a look's threads (registry.ask_each).
codecs.lookup("idna")

DEFAULT_KUBECONFIG = "~/.kube/config"
# The connect timeout of a look across every profile (`get runs`, the dashboard).
LIST_CONNECT_TIMEOUT = 0.5
# Past this, a file is left to the client's loader (a kubeconfig is a few kB).
MAX_KUBECONFIG = 1 << 20
DEFAULT_NAMESPACE = "default"
# Where a pod finds its own namespace (in-cluster configuration), as client-go reads it.
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def kubeconfig_path(kubeconfig: str | None) -> str | None:
    """The kubeconfig a profile uses: its own, else $KUBECONFIG, else ~/.kube/config
    where it exists; None means in-cluster configuration."""
    if kubeconfig:
        return os.path.expanduser(kubeconfig)
    if os.environ.get("KUBECONFIG"):
        return os.environ["KUBECONFIG"]
    default = os.path.expanduser(DEFAULT_KUBECONFIG)
    return default if os.path.exists(default) else None


def _named(entries: object, name: object, key: str) -> dict | None:
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name and isinstance(entry.get(key), dict):
            return entry[key]
    return None


_read: dict[str, tuple[tuple[int, int], Any]] = {}
_read_lock = threading.Lock()


def read_kubeconfig(path: str) -> dict[str, Any] | None:
    """The kubeconfig file at `path` as plain YAML, or None where it is not simply a
    readable mapping (the client's loader then gives the precise error). The reachability
    check and the client both need it: it is read once per process while the file stays
    unchanged (same mtime and size), and each caller gets its own copy (the client's
    loader may refresh a token in it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    version = (st.st_mtime_ns, st.st_size)
    with _read_lock:  # one read, however many profiles share the file
        cached = _read.get(path)
        if cached is None or cached[0] != version:
            config = None
            if st.st_size <= MAX_KUBECONFIG:
                debug.count(debug.KUBECONFIG_READ, path)
                try:
                    with open(path, encoding="utf-8") as f:
                        config = yaml.safe_load(f.read())
                except (OSError, UnicodeDecodeError, yaml.YAMLError):
                    config = None
            cached = _read[path] = (version, config if isinstance(config, dict) else None)
    return copy.deepcopy(cached[1])


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace kubectl would use for this kubeconfig and context (None: the current
    context): the context's `namespace`; in-cluster, the pod's own namespace. None where
    neither says one. A KUBECONFIG list is merged as kubectl merges it: the first file
    that sets current-context, and the first that defines the context, win."""
    path = kubeconfig_path(kubeconfig)
    if path is None:
        try:
            with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None
    configs = _kubeconfigs(path)
    if context is None:
        context = _current_context(configs)
    for config in configs:
        entry = _named(config.get("contexts"), context, "context")
        if entry is not None:
            namespace = entry.get("namespace")
            return namespace if isinstance(namespace, str) and namespace else None
    return None


def _kubeconfigs(path: str) -> list[dict[str, Any]]:
    """The files of a kubeconfig path (a KUBECONFIG list too) that read as kubeconfigs, in order."""
    return [c for c in (read_kubeconfig(p) for p in path.split(os.pathsep) if p) if c is not None]


def _current_context(configs: list[dict[str, Any]]) -> str | None:
    current = next((c["current-context"] for c in configs if c.get("current-context")), None)
    return current if isinstance(current, str) else None


def current_context(kubeconfig: str | None) -> str | None:
    """The kubeconfig's current context, as kubectl takes it (a KUBECONFIG list: the first
    file that sets one); None in-cluster, or where none is set."""
    path = kubeconfig_path(kubeconfig)
    return _current_context(_kubeconfigs(path)) if path is not None else None


def pin(name: str, settings: dict) -> tuple[dict[str, str], str | None]:
    """What keeps profile `name` where it points now, read offline: its context (the
    kubeconfig's current one where it names none) and that context's namespace, as
    settings to store; and, for a profile that stores neither, a warning saying how to pin
    it (None when it is pinned). `cluster add` stores them: a profile that names no
    context follows `kubectl config use-context` elsewhere, and its runs drop out of sight."""
    kubeconfig = settings.get("kubeconfig") if isinstance(settings.get("kubeconfig"), str) else None
    context = settings.get("context") if isinstance(settings.get("context"), str) else None
    pinned: dict[str, str] = {}
    if context is None:
        current = current_context(kubeconfig)
        if current is not None:
            pinned["context"] = current
    pinned["namespace"] = profile_namespace({**settings, **pinned})
    missing = {k: v for k, v in pinned.items() if settings.get(k) != v}
    if "context" not in missing:  # a pinned context: its namespace, as kubectl takes it, stays put
        return pinned, None
    entries = " and ".join(f"`{k}: {v}`" for k, v in missing.items())
    return pinned, (
        f"not pinned: it follows the kubeconfig's current context (now {pinned['context']}, namespace "
        f"{pinned['namespace']}), so a `kubectl config use-context` sends its runs and listings elsewhere; "
        f"pin it by adding {entries} under clusters.{name} in config.yaml"
    )


def profile_namespace(settings: dict) -> str:
    """Where a profile's runs and secrets go: its `namespace`, else its kubeconfig context's
    (context_namespace), else default. `settings` is the raw `clusters.<name>` entry."""
    if isinstance(settings.get("namespace"), str) and settings["namespace"]:
        return settings["namespace"]
    kubeconfig, context = settings.get("kubeconfig"), settings.get("context")
    return (
        context_namespace(
            kubeconfig if isinstance(kubeconfig, str) else None, context if isinstance(context, str) else None
        )
        or DEFAULT_NAMESPACE
    )


def server_address(kubeconfig: str | None, context: str | None) -> tuple[str, str, int] | None:
    """(the server URL, the host and port a connection goes to) from the kubeconfig, or
    None where it cannot be read simply."""
    path = kubeconfig_path(kubeconfig)
    if path is None or os.pathsep in path:
        return None
    config = read_kubeconfig(path)
    if config is None:
        return None
    context_entry = _named(config.get("contexts"), context or config.get("current-context"), "context")
    cluster = _named(config.get("clusters"), (context_entry or {}).get("cluster"), "cluster")
    if not cluster or not isinstance(cluster.get("server"), str):
        return None
    server: str = cluster["server"]
    proxy = cluster.get("proxy-url")
    target = proxy if isinstance(proxy, str) else server
    try:
        parts = urlsplit(target)
        port = parts.port or {"https": 443, "http": 80, "socks5": 1080, "socks5h": 1080}.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return server, parts.hostname, port


def place(kubeconfig: str | None, context: str | None, namespace: str) -> str | None:
    """A key for one namespace of one API server (KubernetesBackend.place): the server's URL,
    its scheme and host in lower case and its port spelled out, and the namespace. The URL,
    not the cluster's own identity (kube-system's uid), because it is read offline: a look
    across profiles asks each place once, so it must know them before it asks. Two URLs of
    one server are two places. None where the kubeconfig cannot be read simply."""
    address = server_address(kubeconfig, context)
    if address is None:
        return None
    parts = urlsplit(address[0])
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())
    except ValueError:
        return None
    path = parts.path.rstrip("/")
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{port}{path} namespace {namespace}"


def check_reachable(name: str, settings: dict, *, timeout: float = LIST_CONNECT_TIMEOUT) -> None:
    """Raise a KubeUnreachable (a ClusterUnreachable) naming profile `name` when its server (or proxy) refuses or
    does not take a TCP connection within `timeout` seconds. `settings` is the raw
    `clusters.<name>` entry of config.yaml, not yet validated."""
    kubeconfig, context = settings.get("kubeconfig"), settings.get("context")
    address = server_address(
        kubeconfig if isinstance(kubeconfig, str) else None, context if isinstance(context, str) else None
    )
    if address is None:
        return
    server, host, port = address
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        what, reason = connection_failure(e, connecting=True)
        raise KubeUnreachable(
            f"cluster {name}: cannot reach the API server: {what} ({server})", reason=reason, retryable=True
        ) from None
