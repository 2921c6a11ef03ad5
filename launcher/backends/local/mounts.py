"""mcli's fixed paths on the local backend: /mnt/config and each file secret's mount path.

mcli (and our Kubernetes backend) mount the run's config at /mnt/config, so a command
may hard-code `/mnt/config/parameters.yaml`, and a file secret created with
`--mount-path /secrets/creds` is read at `/secrets/creds/secret`. A local run gets
the same paths in one of two ways, chosen at submit:

- namespace: each rank starts in a private mount namespace (as root, or through an
  unprivileged user namespace) where the run's config directory is bind-mounted at
  /mnt/config and each file secret's directory at its mount path. Nothing is mounted
  on the host. As root, missing mount points are created by the supervisor before the
  first rank starts, recorded in the run's mountpoints.json, and removed (the empty
  directories it created, deepest first, never one that was there before) when the run
  ends, unless another mount namespace still mounts something there (another run's ranks).
- rewrite: where no private namespace is possible (not Linux, user namespaces
  disabled, a mount point that cannot be created), those absolute paths are rewritten
  in the command, the parameters and env_variables to the run's own directories, and
  the rank log says so in one `[launcher]` line.

LAUNCHER_LOCAL_MOUNTS=rewrite forces the second way (for platforms where the first
fails late, and for tests); the default is `auto`.

Either way, where a mount namespace can be had at all, each rank sees the local secret
store's directory ($LAUNCHER_HOME/secrets) covered by an empty, read-only tmpfs (`hidden`):
a run gets the secrets it is given, in its environment and at its mount paths, and cannot
read the others from the store (a `secrets: []` run, none). With the paths rewritten the
rank still enters a namespace of its own for this, with nothing else mounted. The rank's
command runs without capabilities in it (a user namespace, as any user but root): it
cannot unmount the cover, and the mounts are locked in any namespace it makes below.

The rank launcher is this module run as a program: `python -m
launcher.backends.local.mounts PLAN -- ARGV...` enters the namespace, mounts, and
execs ARGV (the entrypoint) with the same pid, so the supervisor's signals reach it.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.pod import contract

MODE_ENV = "LAUNCHER_LOCAL_MOUNTS"
CONFIG_MOUNT = "/mnt/config"
PLAN_FILE = "mounts.json"
RANK_SPEC_FILE = "spec.ranks.json"
RANK_PLAN_FILE = "plan.ranks.json"
CREATED_FILE = "mountpoints.json"

NAMESPACE, REWRITE = "namespace", "rewrite"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8


@dataclass
class MountPlan:
    mode: str
    binds: list[tuple[str, str]] = field(default_factory=list)
    """(directory on this machine, the absolute path the run sees it at)"""
    reason: str | None = None
    """Why the paths are rewritten instead of mounted."""
    hidden: list[str] = field(default_factory=list)
    """Directories the ranks see covered by an empty read-only tmpfs (the secret store's)."""
    unhidden: str | None = None
    """Why there are none: no mount namespace can be had here."""

    @property
    def namespaced(self) -> bool:
        """Whether each rank runs in a mount namespace of its own (`launcher exec` joins it)."""
        return self.mode == NAMESPACE or bool(self.hidden)

    def seen_as(self, host_dir: str) -> str:
        """Where the run's processes find `host_dir`."""
        if self.mode == NAMESPACE:
            for source, target in self.binds:
                if source == host_dir:
                    return target
        return host_dir

    def note(self) -> str:
        pairs = ", ".join(f"{t} -> {s}" for s, t in self.binds)
        if self.mode == NAMESPACE:
            text = f"private mount namespace: {pairs}"
        else:
            text = (
                f"no private mount namespace here ({self.reason}): rewrote these paths in the command, "
                f"parameters and env_variables: {pairs}"
            )
        if self.hidden:
            return f"{text}; hidden from the run: {', '.join(self.hidden)}"
        if self.unhidden:
            return f"{text}; the secret store is NOT hidden from the run ({self.unhidden})"
        return text

    def save(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "mode": self.mode,
                    "binds": self.binds,
                    "reason": self.reason,
                    "hidden": self.hidden,
                    "unhidden": self.unhidden,
                }
            )
        )

    @classmethod
    def load(cls, path: Path) -> MountPlan | None:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls(
            raw["mode"],
            [tuple(b) for b in raw["binds"]],
            raw.get("reason"),
            list(raw.get("hidden") or []),
            raw.get("unhidden"),
        )


def plan_mounts(config_dir: Path, secret_dirs: dict[str, Path], hidden: Sequence[Path] = ()) -> MountPlan:
    """The plan for a run: its config dir at /mnt/config, and secret_dirs (mount path ->
    directory holding the secret's files), relative mount paths aside; `hidden` (existing
    directories: the secret store's) covered wherever a mount namespace can be had."""
    binds = [(str(config_dir), CONFIG_MOUNT)]
    binds += [(str(src), os.path.normpath(target)) for target, src in secret_dirs.items() if os.path.isabs(target)]
    covered = [str(h) for h in hidden]
    problem = namespace_problem([t for _, t in binds])
    if problem is None:
        return MountPlan(NAMESPACE, binds, hidden=covered)
    unhidden = _namespace_impossible() if covered else None
    if unhidden:
        return MountPlan(REWRITE, binds, problem, unhidden=unhidden)
    return MountPlan(REWRITE, binds, problem, hidden=covered)


def _refused_by_settings() -> str | None:
    """Why the mode setting or the platform rules out mount namespaces, or None."""
    mode = os.environ.get(MODE_ENV, "auto")
    if mode == REWRITE:
        return f"{MODE_ENV}=rewrite"
    if mode != "auto":
        return f"{MODE_ENV}={mode!r} is not auto or rewrite"
    if not sys.platform.startswith("linux"):
        return f"mount namespaces are Linux-only, this is {sys.platform}"
    return None


def _namespace_impossible() -> str | None:
    """Why no rank can have a mount namespace here at all, whatever it mounts, or None."""
    return _refused_by_settings() or _probe()


def namespace_problem(targets: list[str]) -> str | None:
    """Why the ranks cannot get a private mount namespace with these mount points, or None."""
    refused = _refused_by_settings()
    if refused is not None:
        return refused
    for t in targets:
        if os.path.isdir(t):
            continue
        if os.geteuid() != 0:
            return f"{t} does not exist and only root may create it"
        parent = _existing_ancestor(t)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            return f"{t} does not exist and cannot be created in {parent}"
    return _probe()


def _existing_ancestor(path: str) -> str:
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enter_namespace() -> None:
    """Unshare the mount namespace (inside a user namespace when not root), keeping this
    process's uid and gid, and stop mounts propagating back to the host."""
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(libc.unshare(_CLONE_NEWNS), "unshare")
    else:
        _check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS), "unshare")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")


def _bind(source: str, target: str) -> None:
    if not os.path.isdir(target):
        os.makedirs(target, exist_ok=True)  # root only: namespace_problem refused the rest
    _check(
        _libc().mount(source.encode(), target.encode(), None, _MS_BIND | _MS_REC, None),
        f"bind-mounting {source} at {target}",
    )


def _cover(target: str) -> None:
    """An empty read-only tmpfs over `target`: what was there cannot be read, listed or
    written through this namespace."""
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    _check(_libc().mount(b"tmpfs", target.encode(), b"tmpfs", flags, b"size=4k,mode=0500"), f"hiding {target}")


def create_mount_points(run_root: Path) -> None:
    """Create the missing mount points of a namespace plan on this machine (as root), and
    record each directory created, so that remove_mount_points takes away those only."""
    plan = MountPlan.load(run_root / PLAN_FILE)
    if plan is None or plan.mode != NAMESPACE:
        return
    record = run_root / CREATED_FILE
    created = _created(record)
    for _, target in plan.binds:
        missing = []
        path = target
        while not os.path.lexists(path):
            missing.append(path)
            path = os.path.dirname(path)
        for path in reversed(missing):  # the shallowest first
            try:
                os.mkdir(path, 0o755)
            except FileExistsError:
                continue  # another run made it a moment ago: it is not ours to remove
            created.append(path)
            _write_atomically(record, json.dumps(created))


def remove_mount_points(run_root: Path) -> None:
    """Remove the mount points create_mount_points made for a run that has ended: each
    directory it recorded, deepest first, if it is empty and no mount namespace mounts
    anything there (removing it would unmount another run's secrets from under its ranks).
    Safe to call again: what is gone is skipped."""
    record = run_root / CREATED_FILE
    created = _created(record)
    if not created:
        return
    mounted = _mount_points_elsewhere()
    kept = []
    for path in sorted(created, key=len, reverse=True):
        if path in mounted:
            kept.append(path)
            continue
        try:
            os.rmdir(path)
        except FileNotFoundError:
            continue
        except OSError:  # not empty (someone put a file there), or busy: it stays
            kept.append(path)
    if kept:
        _write_atomically(record, json.dumps(sorted(kept, key=len)))
    else:
        record.unlink(missing_ok=True)


def _created(record: Path) -> list[str]:
    try:
        return [p for p in json.loads(record.read_text()) if isinstance(p, str)]
    except (OSError, ValueError, TypeError):
        return []


def _mount_points_elsewhere() -> set[str]:
    """Every path at which some mount namespace of this machine has a mount, as far as
    /proc shows (each namespace read once, through one of its processes)."""
    seen: set[str] = set()
    points: set[str] = set()
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():
            continue
        try:
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            if ns in seen:
                continue
            text = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        seen.add(ns)
        for line in text.splitlines():
            fields = line.split(" ")
            if len(fields) > 4:  # the mount point, with space, tab, newline and \ octal-escaped
                points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def _probe() -> str | None:
    """Try unsharing in a short-lived child: a container without CAP_SYS_ADMIN, or a
    kernel with user namespaces off, says no here rather than in every rank."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only reports and exits
        os.close(r)
        try:
            _enter_namespace()
            os.write(w, b"ok")
        except OSError as e:
            os.write(w, str(e).encode()[:500])
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        answer = f.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return None if answer == "ok" else (answer or "the namespace probe died")


# ---------------------------------------------------------------- rewriting


def _path_pattern(target: str) -> re.Pattern[str]:
    # Whole path components only: /mnt/config2 stays as it is.
    return re.compile(re.escape(target.rstrip("/")) + r"(?=/|$|[^\w.-])")


def rewrite_paths(value: Any, binds: list[tuple[str, str]]) -> Any:
    """`value` with every target path in its strings replaced by its source directory."""
    if isinstance(value, str):
        for source, target in sorted(binds, key=lambda b: len(b[1]), reverse=True):
            value = _path_pattern(target).sub(source.replace("\\", "\\\\"), value)
        return value
    if isinstance(value, dict):
        return {k: rewrite_paths(v, binds) for k, v in value.items()}
    if isinstance(value, list):
        return [rewrite_paths(v, binds) for v in value]
    return value


def rewrite_spec(submitted: dict[str, Any], binds: list[tuple[str, str]]) -> dict[str, Any]:
    out = dict(submitted)
    for key in ("command", "parameters", "env_variables"):
        if key in out:
            out[key] = rewrite_paths(out[key], binds)
    return out


# ---------------------------------------------------------------- the hook


@dataclass
class RankLaunch:
    argv: list[str]
    env: dict[str, str]
    note: str | None


def rank_launch(run_root: Path, argv: list[str], env: dict[str, str]) -> RankLaunch:
    """How the supervisor starts one rank: `argv` wrapped to enter the namespace, or with
    the spec (LAUNCHER_SPEC) and the plan (LAUNCHER_PLAN) swapped for path-rewritten
    copies. A run submitted before mount plans existed starts as before."""
    plan = MountPlan.load(run_root / PLAN_FILE)
    if plan is None:
        return RankLaunch(argv, env, None)
    env = dict(env)
    wrapped = [sys.executable, "-m", "launcher.backends.local.mounts", str(run_root / PLAN_FILE), "--", *argv]
    if plan.mode == NAMESPACE:
        env[contract.CONFIG_DIR] = CONFIG_MOUNT
        return RankLaunch(wrapped, env, plan.note())
    if plan.hidden:  # the paths are rewritten, and the rank still hides the store in a namespace
        argv = wrapped
    rank_spec = run_root / RANK_SPEC_FILE
    rewritten = rewrite_spec(json.loads(Path(env[contract.SPEC]).read_text()), plan.binds)
    if not rank_spec.exists():
        _write_atomically(rank_spec, json.dumps(rewritten, indent=1))
    env[contract.SPEC] = str(rank_spec)
    if env.get(contract.PLAN):
        from launcher.spec.models import RunSpec
        from launcher.spec.plan import plan_text

        rank_plan = run_root / RANK_PLAN_FILE
        if not rank_plan.exists():  # rendered from the rewritten spec, as the host renders every plan
            _write_atomically(rank_plan, plan_text(RunSpec.model_validate(rewritten)))
        env[contract.PLAN] = str(rank_plan)
    return RankLaunch(argv, env, plan.note())


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        raise SystemExit("usage: python -m launcher.backends.local.mounts PLAN -- ARGV...")
    plan_path, argv = args[0], args[2:]
    plan = MountPlan.load(Path(plan_path))
    if plan is None:
        raise SystemExit(f"[launcher] error: cannot read the mount plan {plan_path}")
    try:
        _enter_namespace()
        if plan.mode == NAMESPACE:
            for source, target in plan.binds:
                _bind(source, target)
        for target in plan.hidden:
            _cover(target)
    except OSError as e:
        if plan.mode == NAMESPACE:  # the run's paths are these mounts: it cannot go on without them
            print(f"[launcher] error: cannot set up the run's mounts: {e}", flush=True)
            raise SystemExit(contract.EXIT_SETUP) from None
        # The paths are rewritten: the run needs no mount, and goes on without the cover
        # (the log says what it can read), as where no namespace can be had at all.
        print(f"[launcher] warning: the secret store is NOT hidden from the run: {e}", flush=True)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
