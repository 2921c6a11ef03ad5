"""The Kubernetes backend: a run is a ConfigMap and a JobSet (see render.py), as in
Kubeflow Trainer v2; a cluster that serves no JobSet is refused, naming the command
that installs it.

Objects and attempts
--------------------
The ConfigMap <run> is the run's durable record: the submitted spec, the
parameters, and annotations listing the secrets it uses (names, kinds, options;
never values), the attempts that already ended, and a final status when the
launcher itself ended the run (stop, or a container that can never start).

The JobSet <run> runs the attempts: its controller restarts the whole group on a
failure (failurePolicy), with no launcher watching, and its headless Service <run>
gives rank 0 the name <run>-node-0-0.<run>. The record and the code snapshot carry an
owner reference to the JobSet, so `kubectl delete jobset <run>` cleans up (the record
not where the profile sets ttl_seconds_after_finished: it outlives the JobSet the
cluster deletes). A stop keeps the record, and the stopped attempt's log with it
(keptlogs.py); a restart (`run -r`) creates a new JobSet from the record's spec.

Where each part lives
---------------------
This class is a thin facade over the Backend contract:

  * submit.py     create the JobSet, the record and the code snapshot (all or nothing);
  * observe.py    read a run's objects; status.py says what they mean (reads never write);
  * watch.py      status changes from informers (informer.py);
  * follow.py     one-shot and followed logs of every rank (logs.py reads one pod);
  * lifecycle.py  stop, restart, update and delete;
  * kubeapi.py    the client: the one place that talks HTTP and maps its errors.
"""

from __future__ import annotations

import builtins
import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.backends.base import Backend, LogLine, Plan, Run
from launcher.backends.capabilities import (
    ClusterProbe,
    ClusterReport,
    CodeSnapshots,
    Exec,
    Feature,
    FreeGpus,
    GpuUsage,
    GpuUsageReport,
    ImageProbe,
    ImagePull,
    PortForward,
    QueueUsage,
    QueueUsageReport,
    Restartable,
    Updatable,
)
from launcher.backends.kubernetes.profiles import (
    RUNTIME_IMAGE,
    ClusterProfile,
    Placement,
    load_profile,
    resolve_placement,
)
from launcher.backends.kubernetes.render import dry_run, no_jobset_error, plan_run

# The parts that talk to the API server import the kubernetes client (about a second):
# they are imported when first used, so that a dry-run, which never contacts a cluster,
# does not pay for it.
if TYPE_CHECKING:
    from launcher.backends.kubernetes.kubeapi import KubeApi
    from launcher.backends.kubernetes.secrets import KubernetesSecretStore
    from launcher.backends.listing import RunQuery
    from launcher.config import Profile
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec


JOBSET_UPDATE_REFUSAL = (
    "JobSet's failurePolicy (maxRestarts) is immutable once the JobSet exists (its CRD refuses the "
    "change), and the JobSet controller, not the launcher, restarts the group"
)


# Runs observed at once by a limited listing: a page of 50 is one batch; a status filter
# that keeps few asks for the next.
MIN_BATCH, MAX_BATCH = 50, 200


def newest_first(runs: list[Run]) -> list[Run]:
    """Newest first; runs created in the same second (the API server's resolution) by name,
    descending, as the local state orders them and a limited listing's pages come."""
    return sorted(runs, key=lambda r: (r.created_at.timestamp() if r.created_at else 0, r.name), reverse=True)


class KubernetesBackend(
    Backend,
    Restartable,
    Updatable,
    Exec,
    PortForward,
    GpuUsageReport,
    QueueUsageReport,
    ClusterProbe,
    ImageProbe,
    CodeSnapshots,
):
    name = "kubernetes"
    # Restart: a new JobSet from the record's spec (lifecycle.restart_run). Exec and port-forward:
    # pods/exec and pods/portforward of the rank's pod (podexec.py). Update: the live attempt's
    # Job takes a new activeDeadlineSeconds; JobSet's failurePolicy cannot change.
    UNSUPPORTED = {
        Feature.UPDATE_MAX_RETRIES: JOBSET_UPDATE_REFUSAL,
        Feature.UPDATE_PRIORITY: "a pod's priority is fixed when it is created (priorityClassName cannot change "
        "on a pod, nor in a Job's pod template; Kueue reads the priority class when it "
        "creates the run's workload)",
        Feature.LOCAL_ARTIFACTS: "its runs' logs and artifacts lie in the cluster's pods and log store",
        Feature.TRACKER_METRICS: "no experiment tracker is read for its runs (the metric records in their logs are)",
        Feature.ON_DEMAND_COMPUTE: "its runs go to the cluster's nodes (their free GPUs are counted)",
    }

    def __init__(self, profile: Profile | ClusterProfile, home: Path | None = None):
        self.profile = profile if isinstance(profile, ClusterProfile) else load_profile(profile)
        self.home = home
        self._api: KubeApi | None = None
        self._placement_of: tuple[tuple[str, str], Placement] | None = None

    @classmethod
    def open(cls, profile: ClusterProfile, home: Path) -> KubernetesBackend:
        return cls(profile, home)

    def _placement(self, spec: RunSpec) -> Placement:
        """The spec's placement on this profile, resolved once: check, plan and submit of
        one run share it."""
        key = (spec.name, spec.compute.model_dump_json())
        if self._placement_of is None or self._placement_of[0] != key:
            self._placement_of = (key, resolve_placement(spec, self.profile))
        return self._placement_of[1]

    def check(self, spec: RunSpec) -> list[str]:
        """Everything rendering refuses (a gpu_type the profile lacks, GPUs that do not fit
        its nodes, a name too long for the pods' hostnames, an unknown priority, labels),
        in the form the profile records, and its warnings; submit renders again in the form
        the cluster serves. And what no pod's exec of the command takes (check_exec)."""
        warnings = plan_run(spec, self.profile, [], placement=self._placement(spec)).warnings
        self.check_exec(spec, [])
        return warnings

    def secret_store(self) -> KubernetesSecretStore:
        from launcher.backends.kubernetes.secrets import KubernetesSecretStore

        return KubernetesSecretStore(self.profile, api=self.api)  # one client for the run and its secrets

    def probe(self) -> ClusterReport:
        """Whether the cluster serves JobSet (which every run needs) and Kueue, asked with quick
        retries (`cluster add` must not wait long on an unreachable cluster)."""
        from launcher.backends.kubernetes.discovery import serves_jobset
        from launcher.backends.kubernetes.kubeapi import QUICK_RETRY, KubeApi
        from launcher.backends.kubernetes.kueue import use_served_version

        api = KubeApi(self.profile, retry=QUICK_RETRY)
        try:
            jobset = serves_jobset(api)
            serves = {"JobSet": jobset}
            if self.profile.queue:
                serves["Kueue"] = use_served_version(api) is not None
            return ClusterReport(serves, [] if jobset else [no_jobset_error(self.profile.name)])
        finally:
            api.close()

    def place(self) -> str | None:
        """The API server's URL (from the kubeconfig, as the profile's context names it) and
        the namespace: two profiles on one cluster and namespace list the same runs and count
        the same nodes. None where the kubeconfig cannot be read simply (in-cluster, a
        KUBECONFIG list): a place of its own, as before."""
        from launcher.backends.kubernetes.reach import place

        return place(self.profile.kubeconfig, self.profile.context, self.profile.namespace)

    def profile_warnings(self) -> list[str]:
        if RUNTIME_IMAGE in self.run_images():
            return [
                f"runtime_image {RUNTIME_IMAGE} is the package's default, which is published nowhere: "
                "inject mode's init container cannot pull it from a real cluster. Publish it (a v<version> tag "
                "on a GitHub fork runs .github/workflows/release.yml; or build images/runtime/Dockerfile) and "
                "set runtime_image (`cluster add NAME --runtime-image IMAGE --replace`); "
                "`launcher cluster check NAME` tries the pull"
            ]
        return []

    def run_images(self) -> list[str]:
        """Inject mode's runtime image (its init container), in every pod of every run."""
        return [self.profile.runtime_image] if self.profile.entrypoint_mode == "inject" else []

    def probe_image(self, image: str, *, timeout: float = 60.0) -> ImagePull:
        """One pod with the image, the runtime image's pull policy and the pull secrets a run's
        pods get (every docker-registry secret stored here), deleted after (pull.py)."""
        from launcher.backends.kubernetes.kubeapi import QUICK_RETRY, KubeApi
        from launcher.backends.kubernetes.pull import probe_image
        from launcher.backends.kubernetes.secrets import KubernetesSecretStore

        api = KubeApi(self.profile, retry=QUICK_RETRY)
        try:
            stored = KubernetesSecretStore(self.profile, api=api).list()
            return probe_image(
                api,
                self.profile,
                image,
                pull_policy=self.profile.runtime_image_pull_policy,
                pull_secrets=stored,
                timeout=timeout,
            )
        finally:
            api.close()

    def gpu_types(self) -> list[str]:
        """The gpu_type names a spec may ask for on this cluster."""
        return sorted(self.profile.all_gpu_types())

    def gpu_usage(self) -> list[GpuUsage]:
        """Every node's allocatable GPUs by gpu_type, less the requests of the pods bound to
        it, in every namespace (usage.py)."""
        from launcher.backends.kubernetes.usage import gpu_usage

        return gpu_usage(self.api, self.profile)

    def queue_usage(self) -> list[QueueUsage]:
        """The ClusterQueue of the profile's Kueue queue: its GPU quota, usage and what waits (kueue.py)."""
        if not self.profile.queue:
            return []
        from launcher.backends.kubernetes.kueue import queue_usage
        from launcher.backends.kubernetes.profiles import GPU_RESOURCE

        resources = {GPU_RESOURCE} | {t.resource for t in self.profile.all_gpu_types().values() if t.resource}
        return queue_usage(self.api, self.profile.queue, resources)

    def free_gpus(self, spec: RunSpec) -> FreeGpus:
        """The free GPUs of the gpu_type the spec resolves to here: the ClusterQueue's free
        quota where the profile has a queue and Kueue serves it, else the nodes' (quota.py)."""
        from launcher.backends.kubernetes.quota import free_gpus

        return free_gpus(self.api, self.profile, self._placement(spec))

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            from launcher.backends.kubernetes.kubeapi import KubeApi

            self._api = KubeApi(self.profile)
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def plan(self, spec: RunSpec, secrets: list[Secret] | None = None, *, code=None) -> Plan:
        # From the profile alone: no API call.
        return dry_run(spec, self.profile, secrets, placement=self._placement(spec), code=code)

    def code_limit(self) -> int:
        from launcher.backends.kubernetes.render import CODE_LIMIT
        from launcher.pod.code_archive import DEFAULT_LIMIT

        return DEFAULT_LIMIT if self.profile.code_store else CODE_LIMIT

    def submit(self, spec: RunSpec, secrets: list[Secret], *, code=None) -> Run:
        from launcher.backends.kubernetes.submit import submit_run

        secrets = self._with_log_store_secret(secrets)
        from launcher.backends.kubernetes.render import code_in_store

        if code is not None and code_in_store(spec, self.profile):
            secrets = self._with_store_secret(
                secrets, "code_store", self.profile.code_store, self.profile.code_store_secret
            )
        self.check_secrets(spec, secrets)
        run = submit_run(self.api, spec, secrets, placement=self._placement(spec), code=code)
        if self.profile.retention_days is not None:
            run.warnings.extend(self._prune_history())
        return run

    def _prune_history(self) -> builtins.list[str]:
        """The profile's retention (retention.py), after a submit: a page of the finished runs
        past retention_days deleted. Its failure is a warning: the run is submitted."""
        from launcher.backends.kubernetes.retention import prune
        from launcher.errors import LauncherError

        profile = self.profile
        assert profile.retention_days is not None
        try:
            prune(self.api, profile.retention_days, delete_logs=profile.retention_logs == "delete")
        except LauncherError as e:
            return [f"retention_days: the finished runs older than {profile.retention_days} days were not pruned: {e}"]
        return []

    def _with_log_store_secret(self, secrets: list[Secret]) -> list[Secret]:
        """The run's secrets and the profile's log_store_secret, which every rank needs to
        write its log archive (and which is masked in its logs like the others)."""
        return self._with_store_secret(secrets, "log_store", self.profile.log_store, self.profile.log_store_secret)

    def _with_store_secret(
        self, secrets: list[Secret], field: str, store: str | None, name: str | None
    ) -> list[Secret]:
        """The run's secrets and the secret of the profile's `field` store (log_store's, or
        code_store's, which every rank needs to fetch the code snapshot)."""
        if not store or not name or any(s.name == name for s in secrets):
            return secrets
        from launcher.errors import InputError

        found = [s for s in self.secret_store().list() if s.name == name]
        if not found:
            raise InputError(
                f"config.yaml: clusters.{self.profile.name}.{field}_secret: no secret named "
                f"{name!r} in {self.profile.where}",
                hint=f"create a secret of that name (`launcher secret create ... --cluster "
                f"{self.profile.name}`), or remove {field}_secret from the profile",
            )
        from launcher.secrets.kinds import collision

        problem = collision([*secrets, found[0]])
        if problem:
            raise InputError(
                f"config.yaml: clusters.{self.profile.name}.{field}_secret: {problem}, or make "
                f"{field}_secret the run's own secret"
            )
        return [*secrets, found[0]]

    def get(self, name: str) -> Run:
        from launcher.backends.kubernetes.observe import observe
        from launcher.backends.kubernetes.status import derive

        return derive(observe(self.api, name))[0]  # a read: nothing is written

    def list(self, query: RunQuery | None = None) -> list[Run]:
        """The runs `query` wants, newest first. Without a limit, every run in one look
        (observe_all). With one, the candidates come newest first a window of time at a
        time (history.newest_names: the records' and JobSets' metadata by their
        creation-time labels), are chosen by name and time, and only they are observed, a
        batch at a time by a `launcher.dev/run in (...)` selector, until `query.wanted` match."""
        from launcher.backends.kubernetes.attempts import ts
        from launcher.backends.kubernetes.history import newest_names
        from launcher.backends.kubernetes.kubeapi import QUICK_RETRY
        from launcher.backends.kubernetes.observe import observe_all, runs_selector
        from launcher.backends.kubernetes.status import derive
        from launcher.backends.listing import RunQuery

        query = query or RunQuery()
        # A listing is one look (often across many profiles): it fails fast rather than wait on a cluster.
        if query.wanted is None:
            runs = newest_first([derive(o)[0] for o in observe_all(self.api, QUICK_RETRY)])
            return [r for r in runs if query.matches(r)]
        selector = runs_selector(sorted(query.ids) if query.ids else None)
        candidates = (
            name
            for at, name in newest_names(self.api, selector, QUICK_RETRY)
            if query.matches_name(name) and query.matches_created(ts(at))
        )
        out: list[Run] = []
        batch = min(max(query.wanted, MIN_BATCH), MAX_BATCH)
        while True:
            chunk = list(itertools.islice(candidates, batch))
            if not chunk:
                return out
            place = {name: i for i, name in enumerate(chunk)}  # newest first, ties by name
            observed = [derive(o)[0] for o in observe_all(self.api, QUICK_RETRY, chunk)]
            for run in sorted(observed, key=lambda r: place.get(r.name, len(place))):
                if query.matches(run):
                    out.append(run)
                    if query.full(len(out)):
                        return out

    def watch(self, name: str, *, poll_seconds: float = 0.5) -> Iterator[Run]:
        from launcher.backends.kubernetes.watch import watch_run

        return watch_run(self.api, name, poll_seconds=poll_seconds)

    def logs(
        self,
        name: str,
        *,
        rank: int | None = None,
        attempt: int | None = None,
        tail: int | None = None,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[LogLine]:
        from launcher.backends.kubernetes.follow import run_logs

        return run_logs(
            self.api, name, rank=rank, attempt=attempt, tail=tail, follow=follow, previous=previous, cancel=cancel
        )

    def _rank_pod(self, name: str, rank: int) -> str:
        from launcher.backends.kubernetes.podexec import rank_pod
        from launcher.errors import InputError

        pod = rank_pod(self.api, name, rank)
        if pod is None:
            run = self.get(name)  # a run that does not exist says so here
            raise InputError(
                f"run {name} has no running pod for rank {rank} (the run is {run.status}"
                f"{'' if rank < run.nodes else f'; it has {run.nodes} rank(s)'})",
                hint=f"`launcher describe {name}` shows its pods",
            )
        return pod

    def exec(self, name: str, argv: builtins.list[str], *, rank: int = 0, tty: bool = False) -> int:
        """argv in the main container of rank `rank`'s running pod (pods/exec)."""
        from launcher.backends.kubernetes.podexec import exec_in_pod

        return exec_in_pod(self.api, self._rank_pod(name, rank), argv, tty=tty)

    def port_forward(
        self,
        name: str,
        *,
        rank: int,
        local_port: int,
        remote_port: int,
        ready: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """127.0.0.1:local_port to remote_port of rank `rank`'s pod (pods/portforward); the pod is
        found once, as kubectl port-forward does."""
        from launcher.backends.kubernetes.podexec import forward_port

        forward_port(
            self.api, self._rank_pod(name, rank), local_port=local_port, remote_port=remote_port, ready=ready, stop=stop
        )

    def stop(self, name: str) -> Run:
        from launcher.backends.kubernetes.lifecycle import stop_run

        return stop_run(self.api, name)

    def restart(self, name: str) -> Run:
        from launcher.backends.kubernetes.lifecycle import restart_run

        return restart_run(self.api, name, lambda spec, attempt, off: self._render_again(name, spec, attempt, off))

    def _render_again(
        self, name: str, kept: dict, attempt: int, exclude_nodes: tuple[str, ...] = ()
    ) -> tuple[dict, dict[str, str]]:
        """The JobSet of attempt `attempt` and the record's data, rendered by this user's backend
        from the spec the record keeps, validated again, with the secrets of those names stored
        here now (a secret deleted since is refused, as at submit)."""
        from pydantic import ValidationError

        from launcher.backends.kubernetes import keys
        from launcher.backends.kubernetes.attempts import record_json
        from launcher.backends.kubernetes.profiles import resolve_placement
        from launcher.errors import InputError
        from launcher.spec.models import RunSpec

        try:
            spec = RunSpec.model_validate(kept)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(
                f"run {name} cannot be restarted: the spec its record keeps does not validate "
                f"({where}: {first['msg']})",
                hint=f"submit a fixed copy: `launcher run --clone {name}`",
            ) from None
        if spec.name != name:
            raise InputError(f"run {name} cannot be restarted: its record's spec names another run ({spec.name!r})")
        used = [r["name"] for r in record_json(self.api.get("ConfigMap", name), keys.RECORD_SECRETS, [])]
        stored = {s.name: s for s in self.secret_store().list()}
        missing = [n for n in used if n not in stored]
        if missing:
            raise InputError(
                f"run {name} cannot be restarted: it uses secret {missing[0]!r}, which is no longer stored "
                f"in {self.profile.where}",
                hint="create it again (`launcher secret create ...`) and restart",
            )
        secrets = self._with_log_store_secret([stored[n] for n in used])
        self.check(spec)
        self.check_secrets(spec, secrets)
        rendered = plan_run(
            spec,
            self.profile,
            secrets,
            placement=resolve_placement(spec, self.profile),
            attempt=attempt,
            exclude_nodes=exclude_nodes,
        )
        configmap, jobset = rendered.manifests
        return jobset, configmap["data"]

    def update(
        self,
        name: str,
        *,
        max_duration: float | None = None,
        priority: str | None = None,
        max_retries: int | None = None,
    ) -> Run:
        from launcher.backends.kubernetes.lifecycle import update_run

        changes = {
            k: v
            for k, v in (("max_duration", max_duration), ("priority", priority), ("max_retries", max_retries))
            if v is not None
        }
        return update_run(self.api, name, changes, lambda run: self.refuse_update(run, changes))

    def delete(self, name: str) -> None:
        from launcher.backends.kubernetes.lifecycle import delete_run

        delete_run(self.api, name)
