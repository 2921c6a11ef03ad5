"""The Kubernetes backend's error type; the words for a failed connection are launcher.errors'.

Apart from `kubeapi` (which imports the kubernetes client, about a second) so that code
that only needs to raise or name a Kubernetes failure, such as the reachability check
made before a listing, stays light.
"""

from __future__ import annotations

from launcher.errors import ClusterUnreachable, LauncherError

# Statuses the server answers without having done the request: safe to repeat, even a create.
UNDONE_STATUSES = {429, 503}
# Statuses after which a write may or may not have happened.
MAYBE_DONE_STATUSES = {500, 502, 504}
# Statuses that mean the input is at fault: exit 2.
INPUT_STATUSES = {400, 401, 403, 404, 405, 409, 413, 415, 422}


class KubeError(LauncherError):
    """A Kubernetes API call that failed, in words. `status` is the HTTP status (None for a
    connection, timeout, TLS or kubeconfig failure); `reason` is the API's reason
    (AlreadyExists, Conflict, Expired, ...) or the kind of connection failure."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retryable: bool = False,
        maybe_done: bool = False,
        exit_code: int | None = None,
        hint: str | None = None,
    ):
        if exit_code is None:
            exit_code = 2 if status in INPUT_STATUSES else 1
        super().__init__(message, exit_code=exit_code, hint=hint)
        self.status = status
        self.reason = reason
        self.retryable = retryable
        self.maybe_done = maybe_done


class KubeUnreachable(KubeError, ClusterUnreachable):
    """A connection to the API server that failed before any answer (refused, timed out,
    unresolvable): the SDK's ClusterUnreachable."""
