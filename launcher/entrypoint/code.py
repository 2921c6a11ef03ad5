"""The run's code snapshot (launcher.pod.code_archive), laid over the rank's working directory:
over the first git_repo's clone where the spec has one (before its pip_install runs), else
over the working directory before the integrations run.

The snapshot comes from a file the backend placed (the local run's directory, a mounted
ConfigMap or Secret) or from the profile's code_store, fetched with the stdlib clients of the
log archive (launcher.entrypoint.archive_stores) and the credentials of code_store_secret. Its
sha256 must match the plan's digest: a mismatch stops the rank with contract.EXIT_SETUP.
"""

from __future__ import annotations

from pathlib import Path

from launcher.entrypoint import log as out
from launcher.pod.code_archive import SnapshotError, unpack


class CodeRefused(Exception):
    """The snapshot cannot be fetched, or does not match the plan's digest."""


def _fetch(code: dict, env: dict[str, str]) -> bytes:
    if not code.get("file"):
        from launcher.entrypoint.archive_stores import open_pod_store

        where, _, name = code["url"].rpartition("/")
        try:
            return open_pod_store(where, env).get(name)
        except Exception as e:  # noqa: BLE001 - every store's failure says the same: no snapshot
            raise CodeRefused(f"cannot fetch the code snapshot {code['url']}: {e}") from None
    try:
        return Path(code["file"]).read_bytes()
    except OSError as e:
        raise CodeRefused(f"cannot read the code snapshot {code['file']}: {e.strerror or e}") from None


def lay_code(code: dict, target: Path, env: dict[str, str]) -> None:
    """Fetch the snapshot, check its digest and unpack it over `target`."""
    data = _fetch(code, env)
    try:
        count = unpack(data, target, code["digest"])
    except SnapshotError as e:
        raise CodeRefused(str(e)) from None
    except OSError as e:
        raise CodeRefused(f"cannot unpack the code snapshot into {target}: {e.strerror or e}") from None
    out.log(f"code: {count} file(s) of snapshot {code['digest'][:19]} laid over {target}")
