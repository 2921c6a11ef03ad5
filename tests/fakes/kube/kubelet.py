"""The kubelet: runs each bound pod's containers as local processes.

For every pod bound to a node it
  * materialises its volumes under a per-pod directory: emptyDir, configMap and secret
    (items, defaultMode, mode); a missing ConfigMap/Secret or key is a FailedMount event
    and the pod waits, as on a real node;
  * resolves env (value, secretKeyRef, configMapKeyRef, fieldRef); a missing Secret or key
    is CreateContainerConfigError; images in `faults.bad_images` are ErrImagePull;
  * runs the initContainers in order, each to completion, then the containers; a failed
    init container fails the pod (init containers are not restarted); a container is
    restarted in place as restartPolicy OnFailure or Always asks (restartCount,
    lastState, a short CrashLoopBackOff; the last instance's log stays for ?previous);
  * timestamps each output line (stdout and stderr together) for pods/log;
  * writes the pod and container statuses a kubelet writes (Pending/Running/Succeeded/
    Failed, waiting/running/terminated with exit codes, PodScheduled, Initialized, Ready);
  * on a node with a fault (`faults.node_faults`, FakeKube.fault_node),
    runs each main container as a shell that prints the fault's kernel line and exits 1;
  * strikes the main containers of pods that a pod fault matches (`faults.pod_faults`,
    FakeKube.fault_pod), `after` seconds into their life: hang stops every process of the
    container (SIGSTOP; runc: `runc pause`) until the pod is deleted; slow throttles its CPU
    (runc: a CFS quota through `runc update`; processes: a SIGSTOP/SIGCONT duty cycle) to
    faults.SLOW_CPU_SHARE of one CPU; oom SIGKILLs it and reports it terminated with reason
    OOMKilled and exit code 137, as the kubelet reports the kernel's OOM kill;
  * on deletion sends SIGTERM to each process group, SIGKILL after the grace period, then
    removes the pod; `evict` sets DisruptionTarget first, as preemption does.

Where containers run. When the process is root and `unshare --mount` works, each
container runs in a private mount namespace with every volume bind-mounted at its
mountPath (configMap and secret volumes and readOnly mounts read-only), so absolute
paths such as /launcher or /mnt/config exist inside the pod and nowhere else. Missing
mount points are created as empty directories on the host and left there (another
fake's pods may be using them as mount points).
Otherwise (`isolation_skip_reason` says why) the old simulation applies: mount paths in
env values are rewritten to the pod's directory.

Images. `images` maps image-reference globs to directories. A container whose image
matches runs with a clean environment (the pod's env, HOSTNAME, HOME and PATH=<dir>/bin
only), as a container of that image would. Any other image runs on the host's PATH with
`python`/`python3` as this interpreter and LAUNCHER_GRACE_SECONDS=2.

Network gaps: there is no cluster DNS and every pod shares the loopback, so MASTER_ADDR
(and each rank's host in LAUNCHER_RANK_HOSTS) is 127.0.0.1 and each Job gets its own free
MASTER_PORT and LAUNCHER_PROGRESS_PORT.
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.kube.common import ApiError, now_ns, rfc3339
from tests.fakes.kube.faults import SLOW_CPU_PERIOD, SLOW_CPU_SHARE, Faults
from tests.fakes.kube.jobs import CONTROLLER_UID
from tests.fakes.kube.store import Store, record_event

UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"
# Runs inside the new mount namespace: bind each (source, target, rw|ro), then exec the command.
MOUNT_SCRIPT = r'''set -e
while [ "$1" != "--" ]; do
  /bin/mount --bind "$1" "$2"
  if [ "$3" = ro ]; then /bin/mount -o remount,bind,ro "$2"; fi
  shift 3
done
shift
exec "$@"'''


@dataclass
class Container:
    name: str = "main"
    proc: subprocess.Popen | None = None
    lines: list[tuple[int, str]] = field(default_factory=list)
    done: bool = False
    started_ns: int | None = None
    exit_code: int | None = None
    term_sent: float | None = None
    restarts: int = 0
    previous: list[tuple[int, str]] | None = None
    """The lines of the instance before the last restart (pods/log?previous=true)."""
    env: dict[str, str] = field(default_factory=dict)
    """The process's whole environment and working directory, for pods/exec."""
    cwd: str = ""
    runtime_id: str = ""
    """The runc container's id (runtime runc, runc.py); empty in process mode."""
    reason: str | None = None
    message: str | None = None
    """The terminated state's reason (None: Completed or Error) and message, as the runtime reports them."""
    paused: bool = False
    """Its processes are stopped (a `hang` pod fault): a SIGKILL must reach them anyway."""
    oom_killed: bool = False
    """An `oom` pod fault killed it: it ends OOMKilled with exit code 137."""


@dataclass
class PodRuntime:
    uid: str
    dir: Path
    containers: dict[str, Container] = field(default_factory=dict)  # init and regular, by name
    stopping: bool = False
    finished: bool = False


@functools.lru_cache(maxsize=1)
def isolation_check() -> str | None:
    """Why containers cannot run in private mount namespaces here (None: they can)."""
    if os.geteuid() != 0:
        return "not root: containers share the host's mounts (mount paths are rewritten in env)"
    try:
        r = subprocess.run([UNSHARE, "--mount", "--propagation", "private", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare unavailable: {e}"
    if r.returncode != 0:
        return f"unshare --mount failed: {r.stderr.decode(errors='replace').strip()}"
    return None


class Kubelet:
    def __init__(
        self,
        store: Store,
        faults: Faults,
        *,
        log_resolution_ns: int = 1_000,
        grace_seconds: float = 3.0,
        images: dict[str, str] | None = None,
        isolate: bool | None = None,
        runtime: str = "process",
        image_users: dict[str, str] | None = None,
    ):
        self.store, self.faults = store, faults
        self.log_resolution_ns = log_resolution_ns
        self.grace_seconds = grace_seconds
        self.images = {glob: Path(d).resolve() for glob, d in (images or {}).items()}
        self.isolation_skip_reason = isolation_check() if isolate in (None, True) else "isolation turned off"
        if isolate and self.isolation_skip_reason:
            raise RuntimeError(f"container isolation asked for but unavailable: {self.isolation_skip_reason}")
        self.isolated = self.isolation_skip_reason is None
        self.root = Path(tempfile.mkdtemp(prefix="fake-kubelet-"))
        self.runc = None
        """The runc runtime (runc.py) with runtime="runc": `images` are then root filesystems."""
        if runtime == "runc":
            from tests.fakes.kube.runc import RuncRuntime

            self.runc = RuncRuntime(self.root / "runc", self.images, image_users)
        elif image_users:
            raise ValueError("image users need the runc runtime")
        elif runtime != "process":
            raise ValueError(f"unknown runtime {runtime!r} (process, runc)")
        self.runtimes: dict[str, PodRuntime] = {}
        self.containers: dict[str, Container] = {}
        """The first regular container of each pod, by pod uid (what most tests read)."""
        self.ports: dict[str, int] = {}
        store.finalizing = self.finalizing

    # --- what the rest of the fake asks -----------------------------------------------------
    def finalizing(self, pod: dict) -> bool:
        rt = self.runtimes.get(pod["metadata"]["uid"])
        return bool(rt and any(c.proc and c.proc.poll() is None for c in rt.containers.values())) or bool(
            rt and not rt.finished and not rt.stopping and rt.containers
        )

    def container(self, pod: dict, name: str | None) -> Container | None:
        rt = self.runtimes.get(pod["metadata"]["uid"])
        if rt is None:
            return None
        return rt.containers.get(name or pod["spec"]["containers"][0]["name"])

    def exec_argv(self, c: Container, command: list[str]) -> list[str]:
        """argv that runs `command` inside running container c, as the runtime's exec does: in its
        mount namespace (when containers have one), with its environment (c.env) and working dir."""
        # A bare name is looked up on c.env's PATH (subprocess, or nsenter, does), as the container's own.
        if c.runtime_id and self.runc is not None:
            return self.runc.exec_argv(c.runtime_id, command)
        if not self.isolated:
            return command
        return [NSENTER, f"--target={c.proc.pid}", "--mount", f"--wd={c.cwd}", "--", *command]

    def evict(
        self,
        ns: str,
        name: str,
        reason: str = "PreemptionByScheduler",
        message: str = "Preempted in order to admit critical pod",
    ) -> None:
        """DisruptionTarget on the pod, then SIGKILL of its processes (exit 137)."""
        with self.store.lock:
            pod = self.store.objects[("Pod", ns, name)]

            def mark(p):
                p["status"].setdefault("conditions", []).append(
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": rfc3339(),
                    }
                )

            self.store.update("Pod", ns, name, mark)
            rt = self.runtimes.get(pod["metadata"]["uid"])
            if rt:
                rt.stopping = True
                live = [c for c in rt.containers.values() if c.proc and c.proc.poll() is None]
            else:
                live = []
        for c in live:
            self._kill(c, signal.SIGKILL)

    def close(self) -> None:
        with self.store.lock:
            live = [
                c for rt in self.runtimes.values() for c in rt.containers.values() if c.proc and c.proc.poll() is None
            ]
            for rt in self.runtimes.values():
                rt.stopping = True
        for c in live:
            self._kill(c, signal.SIGKILL)
        for p in [c.proc for c in live if c.proc]:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.runc is not None:
            self.runc.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill(self, c: Container, sig: int) -> None:
        if c.runtime_id and self.runc is not None:
            self.runc.kill(c.runtime_id, sig)
            if c.paused and sig == signal.SIGKILL:
                self.runc.resume(c.runtime_id)  # a frozen cgroup's tasks die only once thawed
        if c.proc is not None and (not c.runtime_id or sig == signal.SIGKILL):
            _kill(c.proc, sig)  # a SIGKILL also ends `runc run` itself, and what a stuck runc left

    # --- the sync loop ------------------------------------------------------------------------
    def sync(self) -> None:
        with self.store.lock:
            for (kind, ns, name), pod in list(self.store.objects.items()):
                if kind == "Pod" and pod["spec"].get("nodeName") and (kind, ns, name) in self.store.objects:
                    self._sync_pod(pod)

    def _sync_pod(self, pod: dict) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        rt = self.runtimes.get(meta["uid"])
        if meta.get("deletionTimestamp"):
            if rt is not None:
                rt.stopping = True
                live = [c for c in rt.containers.values() if c.proc and c.proc.poll() is None]
                grace = min(float(meta.get("deletionGracePeriodSeconds", 30)), self.grace_seconds)
                for c in live:
                    if c.term_sent is None:
                        c.term_sent = time.monotonic()
                        self._kill(c, signal.SIGKILL if grace <= 0 else signal.SIGTERM)
                    elif time.monotonic() - c.term_sent > grace:
                        self._kill(c, signal.SIGKILL)
                if live or not (rt.finished or not rt.containers):
                    return
            self.store.remove("Pod", ns, name)
            return
        if pod["status"].get("phase") in ("Succeeded", "Failed") or rt is not None:
            return
        self._start(pod)

    # --- starting a pod -----------------------------------------------------------------------
    def _waiting(self, pod: dict, reason: str, message: str, *, group: str = "containerStatuses") -> None:
        def mark(p):
            for cs in p["status"].get(group, []):
                cs["state"] = {"waiting": {"reason": reason, "message": message}}

        cur = (pod["status"].get(group) or [{}])[0].get("state", {}).get("waiting", {})
        if cur.get("reason") != reason or cur.get("message") != message:
            self.store.update("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"], mark)

    def _start(self, pod: dict) -> None:
        if self.faults.hold_pods:
            return
        _ns, spec = pod["metadata"]["namespace"], pod["spec"]
        inits, mains = spec.get("initContainers") or [], spec["containers"]
        first_group = "initContainerStatuses" if inits else "containerStatuses"
        for ct in (*inits, *mains):
            if ct["image"] in self.faults.bad_images:
                self._waiting(
                    pod,
                    "ErrImagePull",
                    f'failed to pull and unpack image "{ct["image"]}": not found',
                    group=first_group,
                )
                return
        pod_dir = self.root / pod["metadata"]["uid"]
        volumes = self._volumes(pod, pod_dir)
        if volumes is None:
            return
        plans = []
        for ct in (*inits, *mains):
            env = self._env(pod, ct, first_group)
            if env is None:
                return
            plans.append((ct, env))
        rt = PodRuntime(uid=pod["metadata"]["uid"], dir=pod_dir)
        for ct in (*inits, *mains):
            rt.containers[ct["name"]] = Container(name=ct["name"])
        self.runtimes[rt.uid] = rt
        self.containers[rt.uid] = rt.containers[mains[0]["name"]]
        threading.Thread(
            target=self._run_pod,
            args=(pod, rt, volumes, plans, len(inits)),
            name=f"pod-{pod['metadata']['name']}",
            daemon=True,
        ).start()

    def _volumes(self, pod: dict, pod_dir: Path) -> dict[str, tuple[Path, bool]] | None:
        """Each volume's host directory and whether it is read-only; None if one cannot mount yet."""
        ns = pod["metadata"]["namespace"]
        out: dict[str, tuple[Path, bool]] = {}
        files: list[tuple[Path, bytes, int]] = []
        for vol in pod["spec"].get("volumes") or []:
            host = pod_dir / "volumes" / vol["name"]
            if "configMap" in vol or "secret" in vol:
                is_cm = "configMap" in vol
                conf = vol["configMap"] if is_cm else vol["secret"]
                ref = conf.get("name") if is_cm else conf.get("secretName")
                src = self.store.objects.get(("ConfigMap" if is_cm else "Secret", ns, ref))
                what = "configmap" if is_cm else "secret"
                if src is None:
                    if conf.get("optional"):
                        out[vol["name"]] = (host, True)
                        continue
                    record_event(
                        self.store,
                        pod,
                        "Warning",
                        "FailedMount",
                        f'MountVolume.SetUp failed for volume "{vol["name"]}" : {what} "{ref}" not found',
                        "kubelet",
                    )
                    return None
                data = (
                    {k: v.encode() for k, v in (src.get("data") or {}).items()}
                    if is_cm
                    else {k: base64.b64decode(v) for k, v in (src.get("data") or {}).items()}
                )
                if is_cm:
                    data.update({k: base64.b64decode(v) for k, v in (src.get("binaryData") or {}).items()})
                items = conf.get("items") or [{"key": k, "path": k} for k in data]
                mode = conf.get("defaultMode", 0o644)
                for it in items:
                    if it["key"] not in data:
                        record_event(
                            self.store,
                            pod,
                            "Warning",
                            "FailedMount",
                            f'MountVolume.SetUp failed for volume "{vol["name"]}" : '
                            f"{what} references non-existent config key: {it['key']}",
                            "kubelet",
                        )
                        return None
                    files.append((host / it["path"], data[it["key"]], it.get("mode", mode)))
                out[vol["name"]] = (host, True)
            elif "emptyDir" in vol:
                out[vol["name"]] = (host, False)
            else:
                record_event(
                    self.store,
                    pod,
                    "Warning",
                    "FailedMount",
                    f'volume "{vol["name"]}": this fake kubelet mounts emptyDir, configMap and secret volumes only',
                    "kubelet",
                )
                return None
        for host, _ in out.values():
            host.mkdir(parents=True, exist_ok=True)
        for path, content, mode in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(mode)
        return out

    def _env(self, pod: dict, ct: dict, group: str) -> dict[str, str] | None:
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for source in ct.get("envFrom") or []:
            ref = source.get("configMapRef") or source.get("secretRef")
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            obj = self.store.objects.get((kind, ns, ref["name"]))
            if obj is None:
                if ref.get("optional"):
                    continue
                self._waiting(
                    pod, "CreateContainerConfigError", f'{kind.lower()} "{ref["name"]}" not found', group=group
                )
                return None
            for k, v in (obj.get("data") or {}).items():
                env[source.get("prefix", "") + k] = v if kind == "ConfigMap" else base64.b64decode(v).decode()
        for e in ct.get("env", []):
            if "value" in e:
                env[e["name"]] = _expand(e["value"], env)
                continue
            src = e.get("valueFrom") or {}
            ref = src.get("secretKeyRef") or src.get("configMapKeyRef")
            if ref:
                kind = "Secret" if "secretKeyRef" in src else "ConfigMap"
                obj = self.store.objects.get((kind, ns, ref["name"]))
                if obj is None or ref["key"] not in (obj.get("data") or {}):
                    if ref.get("optional"):
                        continue
                    self._waiting(
                        pod,
                        "CreateContainerConfigError",
                        f'{kind.lower()} "{ref["name"]}" not found'
                        if obj is None
                        else f"couldn't find key {ref['key']} in {kind} {ns}/{ref['name']}",
                        group=group,
                    )
                    return None
                raw = obj["data"][ref["key"]]
                env[e["name"]] = base64.b64decode(raw).decode() if kind == "Secret" else raw
            elif "fieldRef" in src:
                env[e["name"]] = _field(pod, src["fieldRef"]["fieldPath"])
            else:
                env[e["name"]] = ""
        return env

    # --- running a pod ------------------------------------------------------------------------
    def _run_pod(self, pod: dict, rt: PodRuntime, volumes: dict, plans: list, n_init: int) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        try:
            for i, (ct, env) in enumerate(plans[:n_init]):
                if rt.stopping:
                    return
                c = rt.containers[ct["name"]]
                if not self._spawn(pod, rt, ct, env, volumes, c, group="initContainerStatuses", index=i):
                    return self._finish(pod, rt, "Failed")
                self._pump(c)
                self._set_terminated(ns, name, "initContainerStatuses", i, c)
                if c.exit_code != 0:
                    return self._finish(pod, rt, "Failed")
            mains = plans[n_init:]
            if rt.stopping:
                return
            policy = pod["spec"].get("restartPolicy", "Always")
            runs = [
                threading.Thread(target=self._run_container, args=(pod, rt, ct, env, volumes, i, policy), daemon=True)
                for i, (ct, env) in enumerate(mains)
            ]
            for t in runs:
                t.start()
            for t in runs:
                t.join()
            ok = all(rt.containers[ct["name"]].exit_code == 0 for ct, _ in mains)
            self._finish(pod, rt, "Succeeded" if ok else "Failed")
        finally:
            rt.finished = True
            with self.store.lock:
                self.store.changed.notify_all()

    def _run_container(
        self, pod: dict, rt: PodRuntime, ct: dict, env: dict, volumes: dict, index: int, policy: str
    ) -> None:
        """Run one container, restarting it in place (restartCount, lastState, a short
        CrashLoopBackOff) as restartPolicy OnFailure or Always asks."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        c = rt.containers[ct["name"]]
        while True:
            if not self._spawn(pod, rt, ct, env, volumes, c, group="containerStatuses", index=index):
                return
            self._pump(c)
            again = policy == "Always" or (policy == "OnFailure" and c.exit_code != 0)
            if rt.stopping or not again:
                self._set_terminated(ns, name, "containerStatuses", index, c)
                return
            self._set_terminated(ns, name, "containerStatuses", index, c, restarting=True)
            backoff = time.monotonic() + min(0.5 * 2**c.restarts, 5.0)
            while time.monotonic() < backoff and not rt.stopping:
                time.sleep(0.05)
            if rt.stopping:
                return
            with self.store.lock:
                c.previous, c.lines = c.lines, []
                c.proc, c.done, c.exit_code, c.term_sent = None, False, None, None
                c.runtime_id, c.reason, c.message = "", None, None
                c.paused, c.oom_killed = False, False
                c.restarts += 1

    def _spawn(
        self,
        pod: dict,
        rt: PodRuntime,
        ct: dict,
        env: dict[str, str],
        volumes: dict,
        c: Container,
        *,
        group: str,
        index: int,
    ) -> bool:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        fault = self.faults.node_faults.get(pod["spec"].get("nodeName") or "")
        if fault and group == "containerStatuses":
            from tests.fakes.kube.faults import NODE_FAULTS

            # The node's GPU is gone: the program fails at once, with the kernel's line in its log.
            line = NODE_FAULTS[fault]["line"]
            ct = {**ct, "command": ["/bin/sh", "-c", f"echo '{line}' >&2; exit 1"], "args": []}
        image_dir = self._image_dir(ct["image"]) if self.runc is None else None
        mounts = []  # (host source, mountPath, read-only)
        for m in ct.get("volumeMounts") or []:
            host, ro = volumes[m["name"]]
            src = host / m["subPath"] if m.get("subPath") else host
            if m.get("subPath") and not src.exists():
                src.mkdir(parents=True)
            mounts.append((src, m["mountPath"], ro or bool(m.get("readOnly"))))
        env = dict(env)
        if not self.isolated:
            # No private mounts: point mount paths inside env values at the pod's directory.
            for var, value in env.items():
                for _, path, _ in sorted(mounts, key=lambda m: len(m[1]), reverse=True):
                    value = value.replace(path, str(next(s for s, p, _ in mounts if p == path)))
                env[var] = value
        env["MASTER_ADDR"] = "127.0.0.1"
        if "LAUNCHER_RANK_HOSTS" in env:  # each rank's host name, as MASTER_ADDR is rank 0's
            env["LAUNCHER_RANK_HOSTS"] = "127.0.0.1"
        job_uid = (pod["metadata"].get("labels") or {}).get(CONTROLLER_UID, pod["metadata"]["uid"])
        if "MASTER_PORT" in env:
            env["MASTER_PORT"] = str(self.ports.setdefault(job_uid, _free_port()))
        if "LAUNCHER_PROGRESS_PORT" in env:  # the port rank 0's entrypoint listens on for the others
            env["LAUNCHER_PROGRESS_PORT"] = str(self.ports.setdefault(f"{job_uid}/progress", _free_port()))
        workdir = rt.dir / "work"
        workdir.mkdir(parents=True, exist_ok=True)
        hostname = pod["spec"].get("hostname") or name
        argv = list(ct.get("command") or []) + list(ct.get("args") or [])
        if image_dir is not None:
            base = {"PATH": str(image_dir / "bin"), "HOME": str(workdir), "HOSTNAME": hostname}
            if argv and "/" not in argv[0]:
                found = shutil.which(argv[0], path=base["PATH"])
                if found is None:
                    return self._spawn_failed(
                        ns, name, group, index, c, ct, f'exec: "{argv[0]}": executable file not found in $PATH'
                    )
        else:
            base = {
                "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "/usr/bin:/bin")]),
                "HOME": str(workdir),
                "LANG": "C.UTF-8",
                "HOSTNAME": hostname,
                "LAUNCHER_GRACE_SECONDS": "2",
            }
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
        if not argv:
            return self._spawn_failed(
                ns, name, group, index, c, ct, "no command specified (the fake has no image entrypoints)"
            )
        cwd = ct.get("workingDir") if ct.get("workingDir") and os.path.isdir(ct["workingDir"]) else str(workdir)
        if self.isolated and mounts and self.runc is None:
            binds: list[str] = []
            for src, path, ro in mounts:
                try:
                    self._mountpoint(Path(path), is_file=src.is_file())
                except OSError as e:
                    return self._spawn_failed(ns, name, group, index, c, ct, f"cannot make mount point {path}: {e}")
                binds += [str(src), path, "ro" if ro else "rw"]
            argv = [
                UNSHARE,
                "--mount",
                "--propagation",
                "private",
                "/bin/sh",
                "-c",
                MOUNT_SCRIPT,
                "sh",
                *binds,
                "--",
                *argv,
            ]
        if self.runc is not None:
            from tests.fakes.kube.runc import ConfigError, StartError

            try:
                prepared = self.runc.prepare(pod, ct, env, volumes, hostname=hostname, workdir=workdir)
            except StartError as e:
                return self._spawn_failed(ns, name, group, index, c, ct, str(e))
            except ConfigError as e:
                self._waiting(pod, "CreateContainerConfigError", str(e), group=group)
                # A real kubelet keeps the pod Pending and tries again: it never fails it for this.
                while not rt.stopping:
                    time.sleep(0.1)
                return False
            argv, cwd, base, env, c.runtime_id = prepared.argv, prepared.cwd, prepared.env, {}, prepared.container_id
        if rt.stopping:
            return False
        try:
            c.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**base, **env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            return self._spawn_failed(ns, name, group, index, c, ct, str(e))
        c.env, c.cwd = {**base, **env}, cwd
        c.started_ns = now_ns()
        started = rfc3339(c.started_ns)

        def running(p):
            if group == "containerStatuses":
                p["status"]["phase"] = "Running"
                p["status"].setdefault("podIP", f"10.0.0.{random.randint(2, 250)}")
                _condition(p, "Initialized", "True")
                _condition(p, "Ready", "True")
                _condition(p, "ContainersReady", "True")
            else:
                _condition(
                    p,
                    "Initialized",
                    "False",
                    "ContainersNotInitialized",
                    "containers with incomplete status: [" + ct["name"] + "]",
                )
            p["status"].setdefault("startTime", started)
            p["status"].setdefault("hostIP", "127.0.0.1")
            statuses = p["status"].setdefault(group, [])
            while len(statuses) <= index:
                statuses.append({"name": ct["name"], "image": ct["image"], "restartCount": 0})
            statuses[index].update(
                name=ct["name"],
                image=ct["image"],
                imageID=f"fake://{ct['image']}",
                ready=group == "containerStatuses",
                started=True,
                restartCount=c.restarts,
                containerID=f"fake://{c.proc.pid}",
                state={"running": {"startedAt": started}},
            )

        self._update(ns, name, running)
        fault = self.faults.take_pod_fault(pod) if group == "containerStatuses" else None
        if fault is not None:
            threading.Thread(
                target=self._strike, args=(c, c.proc, fault.kind, fault.after), name=f"fault-{name}", daemon=True
            ).start()
        return True

    # --- pod faults (faults.POD_FAULT_KINDS) ----------------------------------------------------
    def _strike(self, c: Container, proc: subprocess.Popen, kind: str, after: float) -> None:
        """`after` seconds into the container's life (if it still runs), its pod fault."""
        deadline = time.monotonic() + after
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return
            time.sleep(0.05)
        with self.store.lock:
            if proc.poll() is not None or c.proc is not proc:
                return
            if kind == "oom":
                c.oom_killed = True
            elif kind == "hang":
                c.paused = True
        if kind == "oom":
            self._kill(c, signal.SIGKILL)
        elif kind == "hang":
            if c.runtime_id and self.runc is not None:
                self.runc.pause(c.runtime_id)
            else:
                _signal_all(proc.pid, signal.SIGSTOP)
        elif c.runtime_id and self.runc is not None:
            self.runc.throttle(c.runtime_id, SLOW_CPU_SHARE, SLOW_CPU_PERIOD)
        else:
            # No cgroup to throttle a host process with: stop and continue it, so that it runs
            # SLOW_CPU_SHARE of each period (what a CFS quota does, coarser).
            from launcher.pod.reaper import descendants

            pids, listed = [proc.pid], 0.0
            while proc.poll() is None:
                if time.monotonic() - listed > 0.5:  # reading /proc each period would eat the share
                    pids, listed = [proc.pid, *descendants(proc.pid)], time.monotonic()
                _signal_pids(pids, signal.SIGSTOP)
                time.sleep(SLOW_CPU_PERIOD * (1 - SLOW_CPU_SHARE))
                _signal_pids(pids, signal.SIGCONT)
                time.sleep(SLOW_CPU_PERIOD * SLOW_CPU_SHARE)

    def _spawn_failed(self, ns: str, name: str, group: str, index: int, c: Container, ct: dict, message: str) -> bool:
        c.done = True
        c.exit_code = 128

        def mark(p):
            statuses = p["status"].setdefault(group, [])
            while len(statuses) <= index:
                statuses.append({"name": ct["name"], "image": ct["image"], "restartCount": 0})
            statuses[index]["state"] = {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": message,
                    "startedAt": rfc3339(),
                    "finishedAt": rfc3339(),
                }
            }

        self._update(ns, name, mark)
        return False

    def _pump(self, c: Container) -> None:
        res = self.log_resolution_ns
        # Closed here, not whenever the garbage collector gets to it: a descriptor freed at a random
        # moment broke test_kube_api's test of a fake started past descriptor 1024.
        with c.proc.stdout:
            for raw in iter(c.proc.stdout.readline, b""):
                text = raw.decode("utf-8", errors="replace").rstrip("\n")
                with self.store.lock:
                    c.lines.append((now_ns() // res * res, text))
                    self.store.changed.notify_all()
        code = c.proc.wait()
        code = code if code >= 0 else 128 - code
        if c.runtime_id and self.runc is not None:
            code, c.reason, c.message = self.runc.finished(c.runtime_id, code, [text for _, text in c.lines])
        if c.oom_killed:
            code, c.reason, c.message = 137, "OOMKilled", None  # what the kubelet reports of the kernel's OOM kill
        with self.store.lock:
            c.exit_code = code
            c.done = True
            self.store.changed.notify_all()

    def _set_terminated(
        self, ns: str, name: str, group: str, index: int, c: Container, *, restarting: bool = False
    ) -> None:
        started, finished = rfc3339(c.started_ns), rfc3339()

        def mark(p):
            cs = p["status"][group][index]
            term = {
                "terminated": {
                    "exitCode": c.exit_code,
                    "reason": c.reason or ("Completed" if c.exit_code == 0 else "Error"),
                    "startedAt": started,
                    "finishedAt": finished,
                    "containerID": cs.get("containerID", ""),
                    **({"message": c.message} if c.message else {}),
                }
            }
            if restarting:
                cs.update(
                    ready=False,
                    started=False,
                    lastState=term,
                    restartCount=c.restarts + 1,
                    state={
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off restarting failed container {c.name} in pod {name}",
                        }
                    },
                )
            else:
                cs.update(ready=False, started=False, state=term)

        self._update(ns, name, mark)

    def _finish(self, pod: dict, rt: PodRuntime, phase: str) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

        def mark(p):
            p["status"]["phase"] = phase
            _condition(p, "Ready", "False", "PodCompleted" if phase == "Succeeded" else "PodFailed")
            _condition(p, "ContainersReady", "False", "PodCompleted" if phase == "Succeeded" else "PodFailed")
            for cs in p["status"].get("containerStatuses", []):
                if "waiting" in (cs.get("state") or {}):
                    # A container that never ran (its init container failed): what a kubelet reports.
                    cs["state"] = {"waiting": {"reason": "PodInitializing"}} if phase != "Failed" else cs["state"]

        self._update(ns, name, mark)

    def _update(self, ns: str, name: str, fn) -> None:
        try:
            self.store.update("Pod", ns, name, fn)
        except ApiError:
            pass  # the pod is gone already

    def _image_dir(self, image: str) -> Path | None:
        for glob, directory in self.images.items():
            if fnmatch.fnmatchcase(image, glob):
                return directory
        return None

    def _mountpoint(self, path: Path, *, is_file: bool) -> None:
        """Make sure a mount point exists on the host. What it creates stays (empty) after
        the fake stops: another process's pods may have it as a mount point."""
        with self.store.lock:
            missing = []
            p = path if not is_file else path.parent
            while not p.exists():
                missing.append(p)
                p = p.parent
            for d in reversed(missing):
                d.mkdir(exist_ok=True)
            if is_file and not path.exists():
                path.touch()


def _condition(pod: dict, type_: str, status: str, reason: str = "", message: str = "") -> None:
    conds = pod["status"].setdefault("conditions", [])
    for c in conds:
        if c["type"] == type_:
            if c["status"] != status:
                c.update(status=status, lastTransitionTime=rfc3339())
            if reason:
                c.update(reason=reason, message=message)
            return
    cond = {"type": type_, "status": status, "lastTransitionTime": rfc3339()}
    if reason:
        cond.update(reason=reason, message=message)
    conds.append(cond)


def _kill(proc: subprocess.Popen, sig: int) -> None:
    """Signal the container's process group. A SIGKILL ends every process below it too, as
    a container's PID namespace ends with its first process (the entrypoint runs the
    command in a process group of its own, which killpg alone would leave running)."""
    from launcher.pod.reaper import descendants

    below = descendants(proc.pid) if sig == signal.SIGKILL else []
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _signal_all(pid: int, sig: int) -> None:
    """Signal a container's first process and every process below it."""
    from launcher.pod.reaper import descendants

    done: set[int] = set()
    for _ in range(5):  # a process forked while the others were being stopped: stop it too
        pids = [p for p in (pid, *descendants(pid)) if p not in done]
        if not pids:
            return
        _signal_pids(pids, sig)
        done.update(pids)


def _signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _expand(value: str, env: dict[str, str]) -> str:
    """$(VAR) references to earlier env entries, as the kubelet expands them."""
    import re

    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def _field(pod: dict, path: str) -> str:
    import re

    m = re.match(r"metadata\.(annotations|labels)\['([^']+)'\]", path)
    if m:
        return (pod["metadata"].get(m.group(1)) or {}).get(m.group(2), "")
    return {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "status.podIP": pod["status"].get("podIP", ""),
        "metadata.uid": pod["metadata"]["uid"],
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.hostIP": "127.0.0.1",
    }.get(path, "")
