"""Where secrets live. The local store is one JSON file of mode 0600 under LAUNCHER_HOME;
the Kubernetes store (launcher.backends.kubernetes.secrets) keeps Kubernetes Secrets."""

from __future__ import annotations

import abc
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from launcher.errors import InputError, NotFoundError, StateFileError
from launcher.secrets.kinds import Secret, SecretKind


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

    @abc.abstractmethod
    def create(self, secret: Secret, *, replace: bool = False) -> None: ...

    @abc.abstractmethod
    def delete(self, name: str) -> None: ...

    def for_run(self, names: list[str] | None) -> list[Secret]:
        """The secrets a run uses: the named ones, or all of them (mcli's default)."""
        secrets = self.list()
        if names is None:
            return _without_collisions(secrets)
        by_name = {s.name: s for s in secrets}
        missing = [n for n in names if n not in by_name]
        if missing:
            known = ", ".join(sorted(by_name)) or "none"
            raise InputError(f"secrets: no secret named {', '.join(map(repr, missing))} in {self.where} (known: {known})",
                             hint="create it with `launcher secret create ...`")
        return _without_collisions([by_name[n] for n in names])


def _without_collisions(secrets: list[Secret]) -> list[Secret]:
    from launcher.secrets.kinds import collision

    problem = collision(secrets)
    if problem:
        raise InputError(problem)
    return secrets


class LocalSecretStore(SecretStore):
    def __init__(self, home: Path):
        self.path = home / "secrets.json"
        self.where = f"the local secret store ({self.path})"

    def _corrupt(self, why: str) -> StateFileError:
        return StateFileError(f"{self.path} is corrupt ({why})",
                              hint=f"move it away and run again (mv {self.path} {self.path}.corrupt), "
                                   "then create the secrets again with `launcher secret create ...`")

    def _read(self) -> dict[str, dict]:
        try:
            raw = self.path.read_text()
        except FileNotFoundError:
            return {}
        except IsADirectoryError:
            raise self._corrupt("a directory, not a file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise StateFileError(f"{self.path}: cannot read it ({getattr(e, 'strerror', None) or e})",
                                 hint="check its permissions") from None
        try:
            data = json.loads(raw)
        except ValueError:
            raise self._corrupt("not JSON") from None
        secrets = data.get("secrets", {}) if isinstance(data, dict) else None
        if not isinstance(secrets, dict):
            raise self._corrupt('expected {"version": 1, "secrets": {NAME: {...}}}')
        for name, rec in secrets.items():
            if not (isinstance(rec, dict) and isinstance(rec.get("data"), dict)
                    and rec.get("kind") in {k.value for k in SecretKind}
                    and all(isinstance(v, str) for v in rec["data"].values())
                    and isinstance(rec.get("options", {}), dict)):
                raise self._corrupt(f"secret {name!r} is not a kind, data and options")
        return secrets

    def _write(self, secrets: dict[str, dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Create the new file 0600 from the start, then rename: never a readable moment.
        fd, tmp = tempfile.mkstemp(prefix=".secrets-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"version": 1, "secrets": secrets}, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as e:
            Path(tmp).unlink(missing_ok=True)
            raise StateFileError(f"{self.path}: cannot write it ({e.strerror or e})",
                                 hint=f"check that {self.path.parent} is writable and its disk has space") from None
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def list(self) -> list[Secret]:
        out = []
        for name, rec in sorted(self._read().items()):
            out.append(
                Secret(name=name, kind=SecretKind(rec["kind"]), data=rec["data"], options=rec.get("options", {}),
                       created_at=_created(rec.get("created_at")))
            )
        return out

    def create(self, secret: Secret, *, replace: bool = False) -> None:
        secrets = self._read()
        if secret.name in secrets and not replace:
            raise InputError(f"a secret named {secret.name!r} already exists", hint="delete it first, or pass --replace")
        created = secret.created_at or datetime.now(timezone.utc)
        secrets[secret.name] = {"kind": secret.kind.value, "data": secret.data, "options": secret.options,
                                "created_at": created.isoformat()}
        self._write(secrets)

    def delete(self, name: str) -> None:
        secrets = self._read()
        if name not in secrets:
            raise NotFoundError(f"no secret named {name!r} in {self.where}")
        del secrets[name]
        self._write(secrets)


def _created(value) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if value else None
    except (TypeError, ValueError):
        return None
