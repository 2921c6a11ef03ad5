"""Where secrets live. The local store is one JSON file of mode 0600 in a directory of its
own, $LAUNCHER_HOME/secrets/ (0700), which every local run's ranks see covered by an empty,
read-only directory (launcher.backends.local.mounts): a run gets the secrets it is given, not
the store. The Kubernetes store (launcher.backends.kubernetes.secrets) keeps Kubernetes Secrets."""

from __future__ import annotations

import abc
import builtins
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from launcher import homefile
from launcher.errors import InputError, NotFoundError, StateFileError
from launcher.secrets.kinds import Secret, SecretKind, check_record, collision


class SecretStore(abc.ABC):
    where: str = ""

    @abc.abstractmethod
    def list(self) -> list[Secret]:
        """Every secret, values included (callers never print them)."""

    def get(self, name: str) -> Secret:
        for s in self.list():
            if s.name == name:
                return s
        raise NotFoundError(f"no secret named {name!r} in {self.where}")

    def names(self) -> builtins.list[str]:
        """The names of every secret (a store may answer without reading, or checking, the values)."""
        return [s.name for s in self.list()]

    @abc.abstractmethod
    def create(self, secret: Secret, *, replace: bool = False) -> None: ...

    @abc.abstractmethod
    def delete(self, name: str) -> None: ...

    def for_run(self, names: builtins.list[str] | None) -> builtins.list[Secret]:
        """The secrets a run uses: the named ones, or all of them (mcli's default)."""
        secrets = self.list()
        if names is None:
            return _without_collisions(secrets)
        by_name = {s.name: s for s in secrets}
        missing = [n for n in names if n not in by_name]
        if missing:
            known = ", ".join(sorted(by_name)) or "none"
            raise InputError(
                f"secrets: no secret named {', '.join(map(repr, missing))} in {self.where} (known: {known})",
                hint="create it with `launcher secret create ...`",
            )
        return _without_collisions([by_name[n] for n in names])

    def create_run_secret(self, run: str, names: builtins.list[str] | None) -> builtins.list[str]:
        """Create run `run`'s own Secret from the named secrets (None: all of them), for the
        manifests of an offline dry-run that reference it; the names of those it could not
        carry. Only a store that keeps its secrets beside the runs, in their cluster, can."""
        raise InputError(
            f"the secrets of {self.where} are given to each run when it starts: a run has no Secret of its own there"
        )


def _without_collisions(secrets: list[Secret]) -> list[Secret]:
    problem = collision(secrets)
    if problem:
        raise InputError(problem)
    return secrets


STORE_DIR = "secrets"
STORE_FILE = "secrets.json"


class LocalSecretStore(SecretStore):
    def __init__(self, home: Path):
        self.dir = home / STORE_DIR
        """The store's own directory: a local run's ranks see it empty (the one thing hidden,
        so it holds nothing else)."""
        self.path = self.dir / STORE_FILE
        self.legacy_path = home / STORE_FILE
        """Where launchers before the store had its directory kept it: moved in at first use."""
        self.where = f"the local secret store ({self.path})"

    def ensure_dir(self) -> Path:
        """The store's directory, made (0700) if need be, with a store left at the old place
        (LAUNCHER_HOME/secrets.json) moved into it, so that no run can read that one either."""
        try:
            self.dir.mkdir(mode=0o700, exist_ok=True)
            homefile.keep_private(self.dir, 0o700)  # one made by hand with 0755
        except OSError as e:
            raise StateFileError(
                f"{self.dir}: cannot create it ({e.strerror or e})", hint="check its permissions"
            ) from None
        if os.path.lexists(self.legacy_path) and not os.path.lexists(self.path):
            try:
                os.rename(self.legacy_path, self.path)
            except FileNotFoundError:
                pass  # another command moved it a moment ago
            except OSError as e:
                raise StateFileError(
                    f"{self.legacy_path}: cannot move it into {self.dir} ({e.strerror or e})",
                    hint=f"move it there yourself: mv {self.legacy_path} {self.path}",
                ) from None
            Path(f"{self.legacy_path}.lock").unlink(missing_ok=True)
        return self.dir

    def _corrupt(self, why: str) -> StateFileError:
        return StateFileError(
            f"{self.path} is corrupt ({why})",
            hint=f"move it away and run again (mv {self.path} {self.path}.corrupt), "
            "then create the secrets again with `launcher secret create ...`",
        )

    def _parse(self, raw: bytes | None) -> dict[str, dict]:
        """The stored records by name, each a kind, data and options: what the file must be
        for any command to change it. What a run needs of each record is check_record's."""
        if raw is None:
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:  # its message would quote a byte of the file
            raise self._corrupt("not valid JSON: it is not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise self._corrupt(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except ValueError:  # a number past Python's digit limit: its message says no place
            raise self._corrupt("not valid JSON: a number in it has too many digits") from None
        secrets = data.get("secrets", {}) if isinstance(data, dict) else None
        if not isinstance(secrets, dict):
            raise self._corrupt('expected {"version": 1, "secrets": {NAME: {...}}}')
        for name, rec in secrets.items():
            if not (
                isinstance(rec, dict)
                and isinstance(rec.get("data"), dict)
                and rec.get("kind") in {k.value for k in SecretKind}
                and all(isinstance(v, str) for v in rec["data"].values())
                and isinstance(rec.get("options", {}), dict)
            ):
                raise self._corrupt(f"secret {name!r} is not a kind, data and options")
        return secrets

    def _read(self) -> dict[str, dict]:
        if os.path.lexists(self.legacy_path):
            try:
                self.ensure_dir()
            except StateFileError:  # a read-only home: still readable where it is
                return self._parse(homefile.read(self.legacy_path))
        return self._parse(homefile.read(self.path))

    def _update(self, change: Callable[[dict[str, dict]], None]) -> None:
        """Change the records under the file's lock (homefile.update): a concurrent create
        or delete is never lost."""

        def rewrite(raw: bytes | None) -> bytes:
            secrets = self._parse(raw)
            change(secrets)
            return json.dumps({"version": 1, "secrets": secrets}, indent=1, sort_keys=True).encode()

        self.ensure_dir()
        homefile.update(self.path, rewrite, mode=0o600)

    def list(self) -> list[Secret]:
        out = []
        for name, rec in sorted(self._read().items()):
            secret = Secret(
                name=name,
                kind=SecretKind(rec["kind"]),
                data=rec["data"],
                options=rec.get("options", {}),
                created_at=_created(rec.get("created_at")),
            )
            problem = check_record(secret)
            if problem:  # say which record and how to mend it, rather than fail in every run
                raise StateFileError(
                    f"{self.path}: secret {name!r}: {problem}",
                    hint=f"delete it with `launcher secret delete {name}` and create it again "
                    f"with `launcher secret create {secret.kind.value} ...`",
                )
            out.append(secret)
        return out

    def names(self) -> builtins.list[str]:
        return sorted(self._read())

    def create(self, secret: Secret, *, replace: bool = False) -> None:
        def add(secrets: dict[str, dict]) -> None:
            if secret.name in secrets and not replace:
                raise InputError(
                    f"a secret named {secret.name!r} already exists", hint="delete it first, or pass --replace"
                )
            created = secret.created_at or datetime.now(UTC)
            secrets[secret.name] = {
                "kind": secret.kind.value,
                "data": secret.data,
                "options": secret.options,
                "created_at": created.isoformat(),
            }

        self._update(add)

    def delete(self, name: str) -> None:
        def remove(secrets: dict[str, dict]) -> None:
            if name not in secrets:
                raise NotFoundError(f"no secret named {name!r} in {self.where}")
            del secrets[name]

        self._update(remove)


def _created(value) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None
