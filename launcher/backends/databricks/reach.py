"""Can a profile's workspace be reached at all? Asked from the raw profile, before a look
across every profile (`get runs`, the dashboard) loads databricks-sdk: the SDK retries a
refused connection for its whole retry_timeout_seconds, so a workspace that is away would
hold every look that long. One TCP connect with the listing's timeout settles it first.
A profile without `host` (the SDK resolves one) is left to the SDK."""

from __future__ import annotations

import codecs
import socket
from urllib.parse import urlsplit

from launcher.errors import ClusterUnreachable, connection_failure

codecs.lookup("idna")  # here, not in a look's threads (see kubernetes/reach.py)

LIST_CONNECT_TIMEOUT = 0.5


def check_reachable(name: str, settings: dict, *, timeout: float = LIST_CONNECT_TIMEOUT) -> None:
    """Raise ClusterUnreachable naming profile `name` when its host refuses or does not take
    a TCP connection within `timeout` seconds. `settings`: the raw clusters.<name> entry."""
    host = settings.get("host")
    if not isinstance(host, str) or not host:
        return
    try:
        url = urlsplit(host if "://" in host else f"https://{host}")
        address = (url.hostname or "", url.port or (443 if url.scheme == "https" else 80))
    except ValueError:
        return  # the profile model names what is wrong with it
    try:
        socket.create_connection(address, timeout=timeout).close()
    except OSError as e:
        failure = connection_failure(e, connecting=True)
        raise ClusterUnreachable(f"cluster {name}: cannot reach the workspace: {failure.words} ({host})") from None
