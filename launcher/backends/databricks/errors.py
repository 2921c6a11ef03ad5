"""The one boundary between databricks-sdk and the user: every exception the SDK raises
(its DatabricksError family, a configuration it cannot resolve, a host it cannot reach, the
retries it gave up on) becomes a LauncherError here, in one set of words, and nowhere else.
A message names the workspace and what the launcher was doing, and carries the server's
own text; never a token (the SDK's messages hold none, and neither do ours)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from launcher.errors import ClusterUnreachable, InputError, LauncherError, NotFoundError, connection_failure


class DatabricksApiError(LauncherError):
    """The workspace refused or failed a call that its retries did not get past. Exit 1."""

    def __init__(self, message: str, *, error_code: str | None = None, status: int | None = None, **kw):
        super().__init__(message, **kw)
        self.error_code = error_code
        self.status = status


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


@contextmanager
def calls(where: str, doing: str, *, configuring: bool = False) -> Iterator[None]:
    """Run SDK calls; raise what they raise as a LauncherError naming `where` (the workspace)
    and `doing` ('submitting run x'). `configuring`: the client is being made, and a
    ValueError is the SDK's word for a configuration it cannot resolve (elsewhere it is a bug)."""
    import requests
    from databricks.sdk import errors

    try:
        yield
    except LauncherError:
        raise
    except (errors.Unauthenticated, errors.PermissionDenied) as e:
        raise InputError(
            f"{where} refused the credentials while {doing}: {_first_line(e)}",
            hint="check the profile's token (DATABRICKS_TOKEN, ~/.databrickscfg, or its credentials_secret)",
        ) from None
    except (errors.NotFound, errors.ResourceDoesNotExist) as e:
        raise NotFoundError(f"{where}: not found while {doing}: {_first_line(e)}") from None
    except errors.DatabricksError as e:
        raise DatabricksApiError(
            f"{where} answered {getattr(e, 'error_code', None) or type(e).__name__} while {doing}: {_first_line(e)}",
            error_code=getattr(e, "error_code", None),
        ) from None
    except (requests.ConnectionError, requests.Timeout, TimeoutError) as e:
        failure = connection_failure(e, connecting=True)
        raise ClusterUnreachable(f"{where} could not be reached while {doing}: {failure.words}") from None
    except ValueError as e:  # the SDK's configuration: no host, no credentials it can resolve
        if not configuring:
            raise
        raise InputError(
            f"{where}: databricks-sdk could not configure a client: {_first_line(e)}",
            hint="set host in the profile and a token (DATABRICKS_TOKEN, a ~/.databrickscfg profile, "
            "or credentials_secret naming a `launcher secret create databricks` secret)",
        ) from None
