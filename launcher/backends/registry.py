"""The one table of backends: a profile's `backend` names a row, and a row names all the rest
launcher needs to know of that backend (its class, its profile model, the cheap reach check,
its `cluster add` options), each as "module:attribute", imported only when a profile of it is
opened (so `launcher --help` stays light). A third backend is one folder under
launcher/backends/ and one row here. What each backend can do is its class's (UNSUPPORTED).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from launcher.config import Profile, launcher_home, validate_profile
from launcher.errors import InputError

if TYPE_CHECKING:
    from launcher.backends.base import Backend


@dataclass(frozen=True)
class Option:
    """One `launcher cluster add` option of a backend: --FLAG sets the profile's setting of
    the same name (dashes as underscores)."""

    flag: str
    help: str
    choices: tuple[str, ...] | None = None
    default: str | None = None
    path: bool = False
    """A file: recorded as an absolute path."""
    integer: bool = False
    """A whole number: recorded as one (the profile's model checks its range)."""

    @property
    def setting(self) -> str:
        return self.flag.replace("-", "_")


@dataclass(frozen=True)
class Row:
    backend: str
    """module:Class of the Backend."""
    profile: str
    """module:Model: the pydantic model of a profile's settings, validated once when it is opened
    (config.validate_profile) and handed to the class's open()."""
    reachable: str | None = None
    """module:function(profile name, raw settings) that raises a LauncherError naming the
    profile when its service cannot be reached (see kubernetes/reach.py); None: always."""
    namespace: str | None = None
    """module:function(raw settings) -> where a profile's runs go, for `cluster list`, read offline."""
    pin: str | None = None
    """module:function(profile name, raw settings) -> (settings, warning): what keeps a profile
    where it points now (Kubernetes: its kubeconfig context and namespace), which `cluster add`
    stores, and for a profile that lacks them a warning saying how to pin it (None: pinned),
    read offline. None: a profile of this backend always points at one place."""
    add: tuple[Option, ...] = field(default=())
    """`cluster add --backend NAME` options; none: its profiles are not added that way."""


BACKENDS: dict[str, Row] = {
    "local": Row("launcher.backends.local.backend:LocalBackend", "launcher.backends.local.profile:LocalProfile"),
    "kubernetes": Row(
        "launcher.backends.kubernetes.backend:KubernetesBackend",
        "launcher.backends.kubernetes.profiles:ClusterProfile",
        reachable="launcher.backends.kubernetes.reach:check_reachable",
        namespace="launcher.backends.kubernetes.reach:profile_namespace",
        pin="launcher.backends.kubernetes.reach:pin",
        add=(
            Option("context", "kubeconfig context (default: the kubeconfig's current context)."),
            Option(
                "namespace",
                "Namespace runs and secrets go to (default: the context's, as kubectl takes it; else default).",
            ),
            Option("kubeconfig", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).", path=True),
            Option("service-account", "Service account the run's pods use."),
            Option("image", "Image for specs that name none."),
            Option(
                "gpu-labels",
                "Node labels the shipped gpu_types select on: NVIDIA GPU Feature Discovery, "
                "GKE or Karpenter (default: gfd).",
                choices=("gfd", "gke", "karpenter"),
                default="gfd",
            ),
            Option("default-gpu-type", "gpu_type for specs that ask for GPUs without one."),
            Option("queue", "Kueue LocalQueue for this cluster's runs."),
            Option(
                "entrypoint-mode",
                "zipapp (default): run the entrypoint with the image's own python3; "
                "inject: copy the launcher's runtime into any image (one without Python "
                "too); image: the image has the launcher.",
                choices=("zipapp", "inject", "image"),
            ),
            Option("runtime-image", "The runtime image inject mode copies from (default: the pinned release)."),
            Option(
                "retention-days",
                "Each submit deletes the finished runs that ended more than this many days ago "
                "(default: keep every run until `launcher delete`).",
                integer=True,
            ),
            Option(
                "retention-logs",
                "What retention does with a pruned run's log archive in the log_store (default: keep).",
                choices=("keep", "delete"),
            ),
        ),
    ),
    "databricks": Row(
        "launcher.backends.databricks.backend:DatabricksBackend",
        "launcher.backends.databricks.profile:DatabricksProfile",
        reachable="launcher.backends.databricks.reach:check_reachable",
        add=(
            Option("host", "Workspace URL (default: what databricks-sdk resolves, e.g. DATABRICKS_HOST)."),
            Option("config-profile", "A ~/.databrickscfg profile to sign in with."),
            Option("credentials-secret", "A `databricks` secret of ours (host and token) to sign in with."),
            Option(
                "compute-mode",
                "job_cluster (default): a new GPU job cluster per run; serverless: serverless GPU compute.",
                choices=("job_cluster", "serverless"),
            ),
            Option("spark-version", "Runtime of the job clusters (default: 15.4.x-gpu-ml-scala2.12)."),
            Option("log-volume", "A /Volumes/... path that cluster log delivery writes the runs' logs to."),
            Option(
                "workspace-dir", "Workspace folder for each run's driver, plan and record (default: /Shared/launcher)."
            ),
            Option(
                "custom-images",
                "true where the workspace takes a cluster docker_image (Container Services).",
                choices=("true", "false"),
            ),
        ),
    ),
}


def _attribute(where: str) -> Any:
    module, _, attribute = where.partition(":")
    return getattr(importlib.import_module(module), attribute)


def row(name: str) -> Row:
    """The row of the backend named `name`; an unknown one is an InputError naming the known."""
    found = BACKENDS.get(name)
    if found is None:
        raise InputError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    return found


def _row(profile: Profile) -> Row:
    found = BACKENDS.get(profile.backend)
    if found is None:
        raise InputError(
            f"config.yaml: clusters.{profile.name}.backend must be one of {', '.join(BACKENDS)}, "
            f"got {profile.backend!r}"
        )
    return found


def backend_class(name: str) -> type[Backend]:
    """The class of the backend named `name` (imported now)."""
    return _attribute(row(name).backend)


def runs_on_a_cluster(name: str) -> bool:
    """Whether the backend named `name` runs on a cluster (it probes one), not on this machine."""
    from launcher.backends.capabilities import Feature

    return Feature.CLUSTER_PROBE not in backend_class(name).UNSUPPORTED


def is_cluster(profile: Profile) -> bool:
    """Whether the profile's backend runs on a cluster, not on this machine: what `cluster
    check` checks and `compute.cluster: auto` places on."""
    _row(profile)
    return runs_on_a_cluster(profile.backend)


def open_backend(profile: Profile) -> Backend:
    """The profile's backend, its settings validated once as its profile model; it contacts
    nothing yet."""
    found = _row(profile)
    model = validate_profile(_attribute(found.profile), profile)
    backend = _attribute(found.backend).open(model, launcher_home())
    backend.prices = dict(getattr(model, "price_per_gpu_hour", None) or {})
    return backend


def check_reachable(profile: Profile) -> None:
    """Raise a LauncherError naming the profile when its service cannot be reached at all;
    cheap, and done before the backend is asked anything (see kubernetes/reach.py). May block
    for a connect timeout (half a second)."""
    reachable = _row(profile).reachable
    if reachable is not None:
        check: Callable[[str, dict], None] = _attribute(reachable)
        check(profile.name, profile.settings)


def profile_namespace(profile: Profile) -> str | None:
    """Where the profile's runs go (a Kubernetes namespace), read offline; None where its
    backend has no such place."""
    namespace = _row(profile).namespace
    return _attribute(namespace)(profile.settings) if namespace is not None else None


def pin(profile: Profile) -> tuple[dict[str, Any], str | None]:
    """The settings that keep the profile where it points now, and a warning saying how to
    pin it where it stores none of them (Row.pin); read offline."""
    pinner = _row(profile).pin
    return _attribute(pinner)(profile.name, profile.settings) if pinner is not None else ({}, None)
