"""Where the launcher keeps its state, and the cluster profiles in config.yaml.

    $LAUNCHER_HOME/config.yaml
        current: local            # the profile `launcher run` uses by default
        clusters:
          my-gke:
            backend: kubernetes
            context: gke_proj_zone_name
            namespace: training
            ...                   # backend-specific settings

The profile `local` (the embedded local backend) always exists; a `local` entry
under clusters holds its settings:

        clusters:
          local:
            allow_host_packages: true   # let apt_packages install on this machine

Profile names follow RFC 1123 (lowercase letters, digits and '-'): they become
Kubernetes label values and parts of resource names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from launcher import debug, homefile
from launcher.errors import InputError, NotFoundError, os_error_words

if TYPE_CHECKING:
    from pydantic import BaseModel

LOCAL = "local"
"""The built-in profile's name; its backend is the one of the same name."""
DEFAULT_BACKEND = "kubernetes"
"""The backend of a clusters entry that names none."""
PROFILE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_profile_name(name: object) -> str | None:
    """Why `name` cannot name a cluster profile (RFC 1123 label), or None."""
    if not isinstance(name, str) or not PROFILE_NAME.match(name) or len(name) > 63:
        return (
            f"cluster profile names are lowercase letters, digits and '-', starting and ending with a "
            f"letter or digit, at most 63 characters (RFC 1123), got {name!r}"
        )
    return None


def launcher_home() -> Path:
    home = Path(os.environ.get("LAUNCHER_HOME") or Path.home() / ".launcher")
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        raise InputError(
            f"LAUNCHER_HOME {home} is not a directory",
            hint="point LAUNCHER_HOME at a directory, or move the file away and run again",
        ) from None
    except OSError as e:
        raise InputError(
            f"LAUNCHER_HOME {home}: cannot create it: {os_error_words(e)}",
            hint="point LAUNCHER_HOME at a writable directory",
        ) from None
    if not home.is_dir():
        raise InputError(
            f"LAUNCHER_HOME {home} is not a directory",
            hint="point LAUNCHER_HOME at a directory, or move the file away and run again",
        )
    homefile.keep_private(home, 0o700)
    return home


@dataclass
class Profile:
    name: str
    backend: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Config:
    current: str = LOCAL
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)

    def profiles(self) -> list[Profile]:
        out = [Profile(LOCAL, LOCAL, dict(self.clusters.get(LOCAL) or {}))]
        for name, settings in self.clusters.items():
            if name != LOCAL:
                out.append(Profile(name, settings.get("backend", DEFAULT_BACKEND), dict(settings)))
        return out

    def profile(self, name: str | None = None) -> Profile:
        name = name or self.current
        for p in self.profiles():
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.profiles())
        raise NotFoundError(
            f"no cluster profile named {name!r} (known: {known})", hint="add one with `launcher cluster add`"
        )


def config_path() -> Path:
    return launcher_home() / "config.yaml"


def load_config() -> Config:
    path = config_path()
    return _parse_config(path, homefile.read(path))


def update_config(change: Callable[[Config], None]) -> None:
    """Apply `change` to the profiles in config.yaml and save them, under the file's lock
    (homefile.update): two `cluster add` at once both land. `change` may raise to leave the
    file as it is."""
    path = config_path()

    def rewrite(raw: bytes | None) -> bytes:
        import yaml

        config = _parse_config(path, raw)
        change(config)
        return yaml.safe_dump({"current": config.current, "clusters": config.clusters}, sort_keys=False).encode()

    homefile.update(path, rewrite)


def _parse_config(path: Path, raw: bytes | None) -> Config:
    if raw is None:
        return Config()
    debug.count(debug.CONFIG_READ, str(path))
    hint = f"mend it, or move it away (mv {path} {path}.bad) and add the profiles again with `launcher cluster add`"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not YAML text: byte {e.start} is not UTF-8 (a binary file?)", hint=hint) from None
    import yaml  # here, not at the top: most commands on a machine without profiles never parse YAML

    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not valid YAML: {str(e).splitlines()[0]}", hint=hint) from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: must be a mapping")
    clusters = doc.get("clusters") or {}
    if not isinstance(clusters, dict):
        raise InputError(f"{path}: clusters must be a mapping of name to settings")
    for name, settings in clusters.items():
        problem = check_profile_name(name)
        if problem:
            raise InputError(f"{path}: clusters: {problem}", hint="rename it in that file")
        if not isinstance(settings, dict):
            raise InputError(f"{path}: clusters.{name} must be a mapping")
    # Each profile's settings, its backend included, are its backend's profile model's to check
    # (validate_profile, when the profile is opened): the one place they are validated.
    return Config(current=str(doc.get("current") or LOCAL), clusters=clusters)


M = TypeVar("M", bound="BaseModel")


def validate_profile(model: type[M], profile: Profile) -> M:
    """The profile's settings as its backend's pydantic profile model (`model`), its name
    included: the one validation of a profile, done when it is opened. A bad field is a
    one-line InputError naming it in config.yaml."""
    from pydantic import ValidationError

    debug.count(debug.PROFILE_LOAD, profile.name)
    try:
        return model.model_validate(
            {**profile.settings, "name": profile.name},
            context={"config": True},
        )
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise InputError(f"config.yaml: clusters.{profile.name}{'.' + where if where else ''}: {err['msg']}") from None
