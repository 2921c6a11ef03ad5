"""The kubelet's runc runtime: each container in a real OCI container (`--runtime runc`).

Per container the kubelet (kubelet.py) asks `prepare` for the argv of a foreground
`runc run` whose stdio is the pod log's pipe (no console: runc passes its own stdio
through), then waits for it; `runc run` exits with the container's status (128+signal
when killed). Signals go through `runc kill`; pods/exec is `runc exec`, with the
container's own environment, user and working directory; after exit the termination
log is read back and `runc delete --force` removes what is left.

The OCI bundle (config.json generated here, under the kubelet's directory):
  * process: command+args, the pod's env, workingDir, the user from securityContext
    (runAsUser/runAsGroup, fsGroup and supplementalGroups as additional gids), else the
    image's USER (--image-user REF_GLOB=UID[:GID]; root by default),
    capabilities as containerd grants them (add/drop; none effective for a non-root
    user), noNewPrivileges from allowPrivilegeEscalation: false;
  * namespaces pid, mount, ipc, uts; the network namespace is the host's, so ranks meet
    on 127.0.0.1 as in process mode (no cluster DNS);
  * root: the image's root filesystem. By default (no --image glob matches) that is the
    host's root, bound read-only, with the host's /tmp bound read-write on top (test
    directories and the kubelet's own, as process mode shares them) and python/python3
    as this interpreter, LAUNCHER_GRACE_SECONDS=2, as in process mode. A matching
    --image REF_GLOB=ROOTFS gets an overlay of ROOTFS with a per-container upper
    directory: writable, and the cached image never changes. A --image DIR with bin/ but no
    etc/ or usr/ is a directory image: the host's root with PATH=DIR/bin, as process mode;
  * mounts as a kubelet lays them out: configMap and secret volumes in the atomic-writer
    layout (`..<timestamp>/` with the files, `..data` -> it, each key -> `..data/key`),
    read-only; emptyDirs read-write, mode 0777 as the kubelet makes them (medium Memory: a tmpfs of sizeLimit in each
    container that mounts it, so not shared between containers); fsGroup makes the
    volumes' files group-owned and group-readable (setgid directories) as the kubelet's
    SetVolumeOwnership does; /etc/hosts, /etc/hostname, /etc/resolv.conf; and the
    terminationMessagePath (default /dev/termination-log) bound from a host file that is
    read back (4096 bytes at most; FallbackToLogsOnError: the log's last 80 lines) into
    the terminated state's `message`.
Mount points missing from the host's root are made on the host (empty directories, left
there), as process mode makes them.
Pod faults (kubelet.py): `runc pause`/`resume` for hang, `runc update --cpu-quota` for slow.
Gaps: no cgroup limits (requests and limits are not enforced), no seccomp profile, no
image pulls (an image is a directory), no user namespaces.
"""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RUNC = shutil.which("runc") or "/usr/sbin/runc"
TERMINATION_MESSAGE_LIMIT = 4096
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What containerd grants a container by default (oci.WithDefaultSpec's capability set).
DEFAULT_CAPABILITIES = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
]
# Host paths bound read-write over the read-only host root: what process mode shares with tests.
HOST_WRITABLE = ("/tmp",)


class StartError(Exception):
    """The container cannot start: the kubelet's StartError (exit 128) with this message."""


class ConfigError(Exception):
    """The kubelet's CreateContainerConfigError (the container waits) with this message."""


@functools.lru_cache(maxsize=1)
def runc_check() -> str | None:
    """Why the runc runtime cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "not root: runc needs root to make containers"
    if not os.access(RUNC, os.X_OK):
        return "runc is not installed (apt-get install -y runc)"
    return None


@dataclass
class Prepared:
    argv: list[str]
    """What the kubelet runs, stdio piped into the pod log."""
    env: dict[str, str]
    """runc's own environment (the container's is in config.json)."""
    cwd: str
    """A host directory for runc (and for `runc exec` later)."""
    container_id: str


class RuncRuntime:
    def __init__(self, root: Path, images: dict[str, Path], image_users: dict[str, str] | None = None):
        reason = runc_check()
        if reason:
            raise RuntimeError(f"--runtime runc is unavailable: {reason}")
        self.root = root
        self.state = root / "state"  # runc --root: short, as runc's socket paths must be
        self.state.mkdir(parents=True, exist_ok=True)
        self.images = images
        self.image_users = {glob: _user(value) for glob, value in (image_users or {}).items()}
        self._layouts: set[Path] = set()
        self._owned: set[Path] = set()
        self._policies: dict[str, str | None] = {}
        # A non-root container user must reach its HOME and cwd under the kubelet's directory.
        root.parent.chmod(0o711)
        self._count = 0

    # --- what the kubelet calls -------------------------------------------------------------
    def prepare(
        self,
        pod: dict,
        ct: dict,
        env: dict[str, str],
        volumes: dict[str, tuple[Path, bool]],
        *,
        hostname: str,
        workdir: Path,
    ) -> Prepared:
        """Write the bundle of one container instance; the argv that runs it in the foreground."""
        self._count += 1
        cid = f"{pod['metadata']['uid'][:8]}-{ct['name']}-{self._count}"[:60]
        bundle = self.root / "bundles" / cid
        bundle.mkdir(parents=True)
        rootfs_dir, bin_dir = self._image_rootfs(ct["image"])
        sc = {**(pod["spec"].get("securityContext") or {}), **(ct.get("securityContext") or {})}
        pod_sc = pod["spec"].get("securityContext") or {}
        # The image's USER where the pod names no runAsUser (runAsGroup: else the image user's group).
        image_uid, image_gid = self._image_user(ct["image"])
        uid = int(sc.get("runAsUser", image_uid))
        gid = int(sc.get("runAsGroup", image_gid if "runAsUser" not in sc else 0))
        if sc.get("runAsNonRoot") and uid == 0:
            raise ConfigError(
                "container has runAsNonRoot and image will run as root "
                f"(pod: {pod['metadata']['name']!r}, container: {ct['name']})"
            )
        groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
        if "fsGroup" in pod_sc:
            groups.append(int(pod_sc["fsGroup"]))
        argv = list(ct.get("command") or []) + list(ct.get("args") or [])
        if not argv:
            raise StartError("no command specified (the fake has no image entrypoints)")
        if rootfs_dir is None:
            host_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", DEFAULT_PATH)])
            base = {
                # A directory image: its bin/ is the whole PATH, as in process mode.
                "PATH": str(bin_dir) if bin_dir else host_path,
                "HOME": str(workdir),
                "LANG": "C.UTF-8",
                "HOSTNAME": hostname,
                "LAUNCHER_GRACE_SECONDS": "2",
            }
            if argv[0] in ("python", "python3") and bin_dir is None:
                argv[0] = sys.executable
            cwd = ct.get("workingDir") or str(workdir)
            if uid != 0:
                workdir.chmod(0o1777)
            lookup_root = Path("/")
        else:
            base = {"PATH": DEFAULT_PATH, "HOME": "/root" if uid == 0 else "/", "HOSTNAME": hostname}
            cwd = ct.get("workingDir") or "/"
            lookup_root = rootfs_dir
        full_env = {**base, **env}
        if "/" not in argv[0] and _which(lookup_root, argv[0], full_env.get("PATH", "")) is None:
            raise StartError(f'exec: "{argv[0]}": executable file not found in $PATH')

        self._chown_volumes(pod_sc, volumes)
        oci_mounts = self._base_mounts(bundle, rootfs_dir)
        oci_mounts += self._etc_mounts(bundle, pod, hostname)
        by_name = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        for m in ct.get("volumeMounts") or []:
            vol, (host, ro) = by_name[m["name"]], volumes[m["name"]]
            ro = ro or bool(m.get("readOnly"))
            empty = vol.get("emptyDir")
            if empty is not None and not m.get("subPath"):
                host.chmod(0o777)  # the kubelet's emptyDir: root's, writable by any user of the pod
            if empty is not None and empty.get("medium") == "Memory" and not m.get("subPath"):
                size = empty.get("sizeLimit")
                options = ["nosuid", "nodev", "mode=1777"] + ([f"size={_bytes(size)}"] if size else [])
                oci_mounts.append(
                    {"destination": m["mountPath"], "type": "tmpfs", "source": "tmpfs", "options": options}
                )
                continue
            if "configMap" in vol or "secret" in vol:
                self._atomic_layout(host)
            src = host / m["subPath"] if m.get("subPath") else host
            if m.get("subPath") and not os.path.lexists(src):
                src.mkdir(parents=True)
            oci_mounts.append(
                {
                    "destination": m["mountPath"],
                    "type": "bind",
                    "source": str(src),
                    "options": ["rbind", "ro" if ro else "rw"],
                }
            )
        log = bundle / "termination-log"
        log.touch(mode=0o666)
        log.chmod(0o666)
        oci_mounts.append(
            {
                "destination": ct.get("terminationMessagePath") or "/dev/termination-log",
                "type": "bind",
                "source": str(log),
                "options": ["bind", "rw"],
            }
        )
        caps = _capabilities(sc.get("capabilities") or {})
        self._policies[cid] = ct.get("terminationMessagePolicy")
        config = {
            "ociVersion": "1.0.2-dev",
            "process": {
                "terminal": False,
                "user": {"uid": uid, "gid": gid, **({"additionalGids": groups} if groups else {})},
                "args": argv,
                "env": [f"{k}={v}" for k, v in full_env.items()],
                "cwd": cwd,
                "capabilities": {
                    "bounding": caps,
                    "effective": caps if uid == 0 else [],
                    "permitted": caps if uid == 0 else [],
                },
                "noNewPrivileges": sc.get("allowPrivilegeEscalation") is False,
            },
            "root": {"path": "rootfs", "readonly": bool(sc.get("readOnlyRootFilesystem")) or rootfs_dir is None},
            "hostname": hostname,
            "mounts": oci_mounts,
            "linux": {
                "namespaces": [{"type": t} for t in ("pid", "mount", "ipc", "uts")],
                "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"],
                "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
            },
        }
        (bundle / "rootfs").mkdir()
        (bundle / "config.json").write_text(json.dumps(config, indent=1))
        return Prepared(
            argv=[
                RUNC,
                "--root",
                str(self.state),
                "--log",
                str(bundle / "runc.log"),
                "--log-format",
                "json",
                "run",
                "--bundle",
                str(bundle),
                cid,
            ],
            env={"PATH": os.environ.get("PATH", DEFAULT_PATH)},
            cwd=str(bundle),
            container_id=cid,
        )

    def exec_argv(self, cid: str, command: list[str]) -> list[str]:
        """`runc exec` of command in container cid. Given a terminal (pods/exec with tty: a pty on
        its stdin), `runc exec --tty`: runc gives the process a terminal of the container's and
        passes window size changes on; otherwise runc relays plain stdio."""
        choose = 'r=$1 s=$2 id=$3; shift 3; if [ -t 0 ]; then exec "$r" --root "$s" exec --tty "$id" "$@"; fi; exec "$r" --root "$s" exec "$id" "$@"'
        return ["/bin/sh", "-c", choose, "sh", RUNC, str(self.state), cid, *command]

    def close(self) -> None:
        """Kill and delete every container still known to runc (their cgroups go with them)."""
        listed = subprocess.run(
            [RUNC, "--root", str(self.state), "list", "-q"], capture_output=True, text=True, timeout=30
        )
        for cid in listed.stdout.split():
            subprocess.run([RUNC, "--root", str(self.state), "delete", "--force", cid], capture_output=True, timeout=30)
        # A container whose `runc run` was killed outright leaves its (empty) cgroups behind.
        for cid in self._policies:
            for hierarchy in Path("/sys/fs/cgroup").glob("*"):
                with contextlib.suppress(OSError):
                    (hierarchy / cid).rmdir()

    def kill(self, cid: str, sig: int) -> None:
        subprocess.run([RUNC, "--root", str(self.state), "kill", cid, str(sig)], capture_output=True, timeout=30)

    def pause(self, cid: str) -> None:
        """Freeze the container's processes (the cgroup freezer): a `hang` pod fault."""
        self._fault_call("pause", cid)

    def resume(self, cid: str) -> None:
        # Quiet: a container that a kill already ended is no longer paused.
        subprocess.run([RUNC, "--root", str(self.state), "resume", cid], capture_output=True, timeout=30)

    def throttle(self, cid: str, share: float, period: float) -> None:
        """Limit the container to `share` of one CPU every `period` seconds (its cgroup's CFS
        quota): a `slow` pod fault."""
        us = int(period * 1_000_000)
        self._fault_call("update", "--cpu-period", str(us), "--cpu-quota", str(int(us * share)), cid)

    def _fault_call(self, *args: str) -> None:
        """runc for a pod fault, once `runc run` has made the container (a fault at its start
        comes while it does); where it fails, the fake's stderr says so (a test waits in vain otherwise)."""
        deadline = time.monotonic() + 30
        while True:
            done = subprocess.run([RUNC, "--root", str(self.state), *args], capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                return
            if "does not exist" not in done.stderr or time.monotonic() > deadline:
                print(f"fake-kube: runc {' '.join(args)} failed: {done.stderr.strip()}", file=sys.stderr)
                return
            time.sleep(0.05)

    def finished(self, cid: str, exit_code: int, lines: list[str]) -> tuple[int, str | None, str | None]:
        """After `runc run` returned: delete what is left. The exit code, a reason that overrides
        Completed/Error (StartError: runc failed before the process ran) and the termination message."""
        subprocess.run([RUNC, "--root", str(self.state), "delete", "--force", cid], capture_output=True, timeout=30)
        bundle = self.root / "bundles" / cid
        if exit_code != 0:
            error = self._start_error(bundle)
            if error:
                return 128, "StartError", error
        try:
            message = (bundle / "termination-log").read_bytes()[:TERMINATION_MESSAGE_LIMIT].decode(errors="replace")
        except OSError:
            message = ""
        if not message and exit_code != 0 and self._policies.get(cid) == "FallbackToLogsOnError":
            message = "\n".join(lines[-80:])[-2048:]
        return exit_code, None, message or None

    def _start_error(self, bundle: Path) -> str | None:
        """runc's own error, when `runc run` failed before the container's process ran."""
        try:
            text = (bundle / "runc.log").read_text(errors="replace")
        except OSError:
            return None
        for line in reversed(text.splitlines()):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("level") in ("error", "fatal"):
                return f"OCI runtime create failed: {entry.get('msg', '')}"
        return None

    # --- the bundle ---------------------------------------------------------------------------
    def _image_rootfs(self, image: str) -> tuple[Path | None, Path | None]:
        """(the image's root filesystem, None) for a --image ROOTFS with etc/ or usr/; (None, DIR/bin)
        for a directory image (bin/ only: the host's root with DIR/bin as the PATH, as process mode
        runs it); (None, None) where no glob matches: the host's root."""
        for glob, directory in self.images.items():
            if fnmatch.fnmatchcase(image, glob):
                if (directory / "etc").is_dir() or (directory / "usr").is_dir():
                    return directory, None
                if (directory / "bin").is_dir():
                    return None, directory / "bin"
                raise StartError(
                    f"image {image!r}: {directory} is neither a root filesystem nor a directory image with bin/ "
                    "(--image REF_GLOB=ROOTFS)"
                )
        return None, None

    def _image_user(self, image: str) -> tuple[int, int]:
        """The USER of an image's config (--image-user REF_GLOB=UID[:GID]); root by default."""
        for glob, user in self.image_users.items():
            if fnmatch.fnmatchcase(image, glob):
                return user
        return 0, 0

    def _base_mounts(self, bundle: Path, rootfs_dir: Path | None) -> list[dict]:
        if rootfs_dir is None:
            root = [{"destination": "/", "type": "bind", "source": "/", "options": ["rbind"]}]
            root += [{"destination": p, "type": "bind", "source": p, "options": ["rbind", "rw"]} for p in HOST_WRITABLE]
        else:
            upper, work = bundle / "upper", bundle / "work"
            upper.mkdir()
            work.mkdir()
            root = [
                {
                    "destination": "/",
                    "type": "overlay",
                    "source": "overlay",
                    "options": [f"lowerdir={rootfs_dir}", f"upperdir={upper}", f"workdir={work}"],
                }
            ]
        return [
            *root,
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {
                "destination": "/dev",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
            },
            {
                "destination": "/dev/pts",
                "type": "devpts",
                "source": "devpts",
                "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
            },
            {
                "destination": "/dev/shm",
                "type": "tmpfs",
                "source": "shm",
                "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
            },
            {
                "destination": "/dev/mqueue",
                "type": "mqueue",
                "source": "mqueue",
                "options": ["nosuid", "noexec", "nodev"],
            },
            # sysfs cannot be mounted afresh in the host's network namespace: the host's, read-only.
            {
                "destination": "/sys",
                "type": "bind",
                "source": "/sys",
                "options": ["rbind", "ro", "nosuid", "noexec", "nodev"],
            },
        ]

    def _etc_mounts(self, bundle: Path, pod: dict, hostname: str) -> list[dict]:
        """/etc/hosts, /etc/hostname and /etc/resolv.conf, as the kubelet manages them."""
        ns, sub = pod["metadata"]["namespace"], pod["spec"].get("subdomain")
        fqdn = f"{hostname}.{sub}.{ns}.svc.cluster.local\t{hostname}" if sub else hostname
        etc = bundle / "etc"
        etc.mkdir()
        # The pod shares the host's network: its address is the loopback's.
        (etc / "hosts").write_text(
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            f"127.0.0.1\t{fqdn}\n"
        )
        (etc / "hostname").write_text(hostname + "\n")
        out = [
            {"destination": f"/etc/{name}", "type": "bind", "source": str(etc / name), "options": ["bind", "ro"]}
            for name in ("hosts", "hostname")
        ]
        if Path("/etc/resolv.conf").exists():
            out.append(
                {
                    "destination": "/etc/resolv.conf",
                    "type": "bind",
                    "source": "/etc/resolv.conf",
                    "options": ["bind", "ro"],
                }
            )
        return out

    def _atomic_layout(self, vol_dir: Path) -> None:
        """Move a configMap/secret volume's files into the atomic writer's layout, once:
        `..<timestamp>/<files>`, `..data` -> that directory, and each top-level entry -> `..data/entry`."""
        if vol_dir in self._layouts or (vol_dir / "..data").exists():
            return
        self._layouts.add(vol_dir)
        stamp = ".." + datetime.datetime.now(datetime.UTC).strftime("%Y_%m_%d_%H_%M_%S.%f")
        entries = list(vol_dir.iterdir())
        (vol_dir / stamp).mkdir()
        (vol_dir / stamp).chmod(0o755)
        for entry in entries:
            entry.rename(vol_dir / stamp / entry.name)
        (vol_dir / "..data").symlink_to(stamp)
        for entry in entries:
            (vol_dir / entry.name).symlink_to(f"..data/{entry.name}")

    def _chown_volumes(self, pod_sc: dict, volumes: dict[str, tuple[Path, bool]]) -> None:
        """fsGroup: the kubelet's SetVolumeOwnership (group fsGroup, g+r or g+rw, setgid directories)."""
        if "fsGroup" not in pod_sc:
            return
        gid = int(pod_sc["fsGroup"])
        for host, ro in volumes.values():
            if host in self._owned:
                continue
            self._owned.add(host)
            mask = 0o440 if ro else 0o660
            for dirpath, _dirnames, filenames in os.walk(host):
                os.chown(dirpath, -1, gid)
                os.chmod(dirpath, os.stat(dirpath).st_mode | 0o2000 | (0o550 if ro else 0o770))
                for f in filenames:
                    p = os.path.join(dirpath, f)
                    os.chown(p, -1, gid)
                    os.chmod(p, os.stat(p).st_mode | mask)


def _user(value: str) -> tuple[int, int]:
    """UID[:GID] (numeric, as an image's USER the kubelet can check); GID defaults to UID."""
    uid, _, gid = value.partition(":")
    return int(uid), int(gid or uid)


def _capabilities(spec: dict) -> list[str]:
    def norm(c: str) -> str:
        return c if c.startswith("CAP_") else "CAP_" + c.upper()

    drop = {norm(c) for c in spec.get("drop") or []}
    caps = [] if "CAP_ALL" in drop else [c for c in DEFAULT_CAPABILITIES if c not in drop]
    return caps + [norm(c) for c in spec.get("add") or [] if norm(c) not in caps and norm(c) != "CAP_ALL"]


def _which(root: Path, name: str, path: str) -> str | None:
    """`name` on PATH inside the root filesystem `root` (symlinks resolved inside it)."""
    for d in path.split(":"):
        if not d:
            continue
        candidate = _inside(root, Path(d) / name)
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(Path(d) / name)
    return None


def _inside(root: Path, path: Path, depth: int = 0) -> Path | None:
    """Resolve `path` (absolute, as the container sees it) inside root, following symlinks there."""
    if depth > 40:
        return None
    current = root
    parts = [p for p in path.parts if p != "/"]
    for i, part in enumerate(parts):
        nxt = current / part
        if nxt.is_symlink():
            target = os.readlink(nxt)
            rest = Path(*parts[i + 1 :]) if i + 1 < len(parts) else Path()
            base = Path("/") / current.relative_to(root) if not target.startswith("/") else Path("/")
            return _inside(root, Path(os.path.normpath(base / target / rest)), depth + 1)
        current = nxt
    return current if current.exists() else None


def _bytes(quantity: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTPE]i?|[kmgtpe])?", str(quantity))
    if not m:
        raise StartError(f"sizeLimit {quantity!r} is not a quantity")
    units = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
    units.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60})
    return int(float(m.group(1)) * units[m.group(2) or ""])
