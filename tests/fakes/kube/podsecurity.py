"""Pod Security admission, as the API server's built-in PodSecurity plugin enforces the Pod
Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards).

A namespace labelled `pod-security.kubernetes.io/enforce: baseline` or `restricted` (with an
optional `...enforce-version: v1.N`, default latest) refuses a Pod that breaks its level with
the real server's 403:

    pods "x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation
    != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ...

One `reason (detail)` per failed check: the baseline level's checks, then the restricted
level's, each level in the order of the checks' ids, the restricted capabilities and
seccomp checks replacing the baseline ones. As the real plugin does, a workload whose pod
template would be refused (here a Job, the one built-in workload kind the fake serves) is
admitted with a `Warning: would violate PodSecurity ...` response header; a custom
resource (a JobSet) is not looked at. The pods its controller then creates are refused,
and the Job controller records why (jobs.py: FailedCreate). A namespace whose enforce
label is not a level is refused; labelling a namespace warns of its existing pods that
the new level would refuse, as `kubectl label ns` shows. Pod updates are not checked (a
pod's security fields are immutable).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.fakes.kube.common import ApiError, invalid

if TYPE_CHECKING:
    from tests.fakes.kube.store import Store

ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
LEVELS = ("privileged", "baseline", "restricted")

WARNINGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("admission_warnings", default=None)
"""The HTTP layer sets a list while it serves a request: admission's warnings go into its
`Warning` headers. Controllers' own writes have none (the real ones only log them)."""

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

Check = Callable[[dict, dict], "tuple[str, str] | None"]
"""(pod metadata, pod spec) -> (reason, detail) of a failed check, None where it passes."""


def _quote(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _plural(one: str, many: str, n: int) -> str:
    return one if n == 1 else many


def _containers(spec: dict) -> list[dict]:
    return [c for g in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(g) or []]


def _sc(obj: dict) -> dict:
    return obj.get("securityContext") or {}


def _windows(spec: dict) -> bool:
    return ((spec.get("os") or {}).get("name")) == "windows"


def _named(what: str, names: list[str]) -> str:
    return f"{_plural(what, what + 's', len(names))} {_quote(names)}"


# --- baseline --------------------------------------------------------------------------------
def _app_armor(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = []
    prefix = "container.apparmor.security.beta.kubernetes.io/"
    for key, value in sorted((meta.get("annotations") or {}).items()):
        if key.startswith(prefix) and value != "runtime/default" and not value.startswith("localhost/"):
            bad.append(value)
    for obj in (spec, *_containers(spec)):
        kind = (_sc(obj).get("appArmorProfile") or {}).get("type")
        if kind is not None and kind not in ("RuntimeDefault", "Localhost"):
            bad.append(kind)
    if not bad:
        return None
    return _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad)), _quote(sorted(set(bad)))


def _capabilities_baseline(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad_containers, bad_caps = [], []
    for c in _containers(spec):
        added = [a for a in (_sc(c).get("capabilities") or {}).get("add") or [] if a not in BASELINE_CAPABILITIES]
        if added:
            bad_containers.append(c["name"])
            bad_caps += [a for a in added if a not in bad_caps]
    if not bad_containers:
        return None
    return "non-default capabilities", (
        f"{_named('container', bad_containers)} must not include {_quote(bad_caps)} in securityContext.capabilities.add"
    )


def _host_namespaces(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    return ("host namespaces", ", ".join(bad)) if bad else None


def _host_path(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = [v["name"] for v in spec.get("volumes") or [] if "hostPath" in v]
    return ("hostPath volumes", _named("volume", bad)) if bad else None


def _host_ports(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad_containers, ports = [], []
    for c in _containers(spec):
        own = [str(p["hostPort"]) for p in c.get("ports") or [] if p.get("hostPort")]
        if own:
            bad_containers.append(c["name"])
            ports += own
    if not bad_containers:
        return None
    n = len(bad_containers)
    return "hostPort", (
        f"{_named('container', bad_containers)} {_plural('uses', 'use', n)} "
        f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(ports)}"
    )


def _host_process(meta: dict, spec: dict) -> tuple[str, str] | None:
    pod = bool((_sc(spec).get("windowsOptions") or {}).get("hostProcess"))
    bad = [c["name"] for c in _containers(spec) if (_sc(c).get("windowsOptions") or {}).get("hostProcess")]
    if not pod and not bad:
        return None
    who = " and ".join(w for w in ("pod" if pod else "", _named("container", bad) if bad else "") if w)
    return "hostProcess", f"{who} must not set securityContext.windowsOptions.hostProcess=true"


def _privileged(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("privileged")]
    if not bad:
        return None
    return "privileged", f"{_named('container', bad)} must not set securityContext.privileged=true"


def _proc_mount(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("procMount") not in (None, "Default")]
    if not bad:
        return None
    return "procMount", f'{_named("container", bad)} must not set securityContext.procMount to "Unmasked"'


def _se_linux(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = []
    for who, obj in (("pod", spec), *((f'container "{c["name"]}"', c) for c in _containers(spec))):
        opts = _sc(obj).get("seLinuxOptions") or {}
        if opts.get("type", "") not in SELINUX_TYPES or opts.get("user") or opts.get("role"):
            bad.append(who)
    return ("seLinuxOptions", f"{', '.join(bad)} set forbidden securityContext.seLinuxOptions") if bad else None


def _seccomp_unconfined(spec: dict) -> list[str]:
    details = []
    if (_sc(spec).get("seccompProfile") or {}).get("type") == "Unconfined":
        details.append('pod must not set securityContext.seccompProfile.type to "Unconfined"')
    bad = [c["name"] for c in _containers(spec) if (_sc(c).get("seccompProfile") or {}).get("type") == "Unconfined"]
    if bad:
        details.append(f'{_named("container", bad)} must not set securityContext.seccompProfile.type to "Unconfined"')
    return details


def _seccomp_baseline(meta: dict, spec: dict) -> tuple[str, str] | None:
    details = _seccomp_unconfined(spec)
    return ("seccompProfile", "; ".join(details)) if details else None


def _sysctls(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad = [s.get("name", "") for s in _sc(spec).get("sysctls") or [] if s.get("name") not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


# --- restricted ------------------------------------------------------------------------------
def _allow_privilege_escalation(meta: dict, spec: dict) -> tuple[str, str] | None:
    if _windows(spec):
        return None
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return "allowPrivilegeEscalation != false", (
        f"{_named('container', bad)} must set securityContext.allowPrivilegeEscalation=false"
    )


def _capabilities_restricted(meta: dict, spec: dict) -> tuple[str, str] | None:
    if _windows(spec):
        return None
    no_drop, bad_add, added = [], [], []
    for c in _containers(spec):
        caps = _sc(c).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            no_drop.append(c["name"])
        own = [a for a in caps.get("add") or [] if a != "NET_BIND_SERVICE"]
        if own:
            bad_add.append(c["name"])
            added += [a for a in own if a not in added]
    details = []
    if no_drop:
        details.append(f'{_named("container", no_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if bad_add:
        details.append(
            f"{_named('container', bad_add)} must not include {_quote(added)} in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def _restricted_volumes(meta: dict, spec: dict) -> tuple[str, str] | None:
    bad, kinds = [], []
    for v in spec.get("volumes") or []:
        source = [k for k in v if k != "name"]
        kind = source[0] if source else "unknown"
        if kind not in RESTRICTED_VOLUMES:
            bad.append(v["name"])
            if kind not in kinds:
                kinds.append(kind)
    if not bad:
        return None
    n = len(bad)
    return "restricted volume types", (
        f"{_named('volume', bad)} {_plural('uses', 'use', n)} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} {_quote(kinds)}"
    )


def _run_as_non_root(meta: dict, spec: dict) -> tuple[str, str] | None:
    details = []
    pod = _sc(spec).get("runAsNonRoot")
    if pod is False:
        details.append("pod must not set securityContext.runAsNonRoot=false")
    explicit = [c["name"] for c in _containers(spec) if _sc(c).get("runAsNonRoot") is False]
    implicit = [c["name"] for c in _containers(spec) if _sc(c).get("runAsNonRoot") is None and pod is not True]
    if explicit:
        details.append(f"{_named('container', explicit)} must not set securityContext.runAsNonRoot=false")
    if implicit and pod is not False:
        details.append(f"pod or {_named('container', implicit)} must set securityContext.runAsNonRoot=true")
    return ("runAsNonRoot != true", "; ".join(details)) if details else None


def _run_as_user(meta: dict, spec: dict) -> tuple[str, str] | None:
    details = []
    if _sc(spec).get("runAsUser") == 0:
        details.append("pod must not set runAsUser=0")
    bad = [c["name"] for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    if bad:
        details.append(f"{_named('container', bad)} must not set runAsUser=0")
    return ("runAsUser=0", "; ".join(details)) if details else None


def _seccomp_restricted(meta: dict, spec: dict) -> tuple[str, str] | None:
    if _windows(spec):
        return None
    details = _seccomp_unconfined(spec)
    pod_set = (_sc(spec).get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    unset = [c["name"] for c in _containers(spec) if not (_sc(c).get("seccompProfile") or {}).get("type")]
    if unset and not pod_set:
        details.append(
            f"pod or {_named('container', unset)} must set securityContext.seccompProfile.type to "
            '"RuntimeDefault" or "Localhost"'
        )
    return ("seccompProfile", "; ".join(details)) if details else None


BASELINE: list[Check] = [
    _app_armor,
    _capabilities_baseline,
    _host_namespaces,
    _host_path,
    _host_ports,
    _host_process,
    _privileged,
    _proc_mount,
    _se_linux,
    _seccomp_baseline,
    _sysctls,
]
RESTRICTED: list[Check] = [
    _allow_privilege_escalation,
    _capabilities_restricted,
    _restricted_volumes,
    _run_as_non_root,
    _run_as_user,
    _seccomp_restricted,
]
OVERRIDDEN = {_capabilities_baseline, _seccomp_baseline}
"""Baseline checks that the restricted level replaces with its own, stricter ones."""


def violations(level: str, meta: dict, spec: dict) -> list[str]:
    """`reason (detail)` of each check the pod fails at `level`, in the real plugin's order."""
    if level == "baseline":
        checks = BASELINE
    elif level == "restricted":
        checks = [c for c in BASELINE if c not in OVERRIDDEN] + RESTRICTED
    else:
        return []
    out = []
    for check in checks:
        failed = check(meta, spec)
        if failed:
            reason, detail = failed
            out.append(f"{reason} ({detail})" if detail else reason)
    return out


def namespace_level(store: Store, ns: str) -> tuple[str, str]:
    """(level, "level:version") a namespace enforces; ("privileged", ...) without the label."""
    obj = store.objects.get(("Namespace", "", ns)) or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    level = labels.get(ENFORCE, "privileged")
    return level, f"{level}:{labels.get(ENFORCE_VERSION) or 'latest'}"


def _warn(message: str) -> None:
    warnings = WARNINGS.get()
    if warnings is not None:
        warnings.append(message)


def pods(store: Store, validate: Callable[[dict, dict | None], None]) -> Callable[[dict, dict | None], None]:
    """The Pod admission: validation, then the namespace's Pod Security level on create."""

    def admit(pod: dict, old: dict | None) -> None:
        validate(pod, old)
        if old is not None:
            return
        meta = pod["metadata"]
        level, named = namespace_level(store, meta.get("namespace") or "default")
        failed = violations(level, meta, pod.get("spec") or {})
        if failed:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{meta["name"]}" is forbidden: violates PodSecurity "{named}": {", ".join(failed)}',
                {"name": meta["name"], "kind": "pods"},
            )

    return admit


def workloads(store: Store, admit_job: Callable[[dict, dict | None], None]) -> Callable[[dict, dict | None], None]:
    """The Job admission: its own, then a warning where its pods would be refused."""

    def admit(job: dict, old: dict | None) -> None:
        admit_job(job, old)
        template = (job.get("spec") or {}).get("template") or {}
        level, named = namespace_level(store, job["metadata"].get("namespace") or "default")
        failed = violations(level, template.get("metadata") or {}, template.get("spec") or {})
        if failed:
            _warn(f'would violate PodSecurity "{named}": {", ".join(failed)}')

    return admit


def namespaces(store: Store) -> Callable[[dict, dict | None], None]:
    """The Namespace admission: a valid enforce level; a changed one warns of the namespace's
    pods that it would refuse."""

    def admit(ns: dict, old: dict | None) -> None:
        labels = (ns.get("metadata") or {}).get("labels") or {}
        level = labels.get(ENFORCE)
        if level is not None and level not in LEVELS:
            raise invalid(
                "Namespace",
                ns["metadata"]["name"],
                [
                    (
                        f"metadata.labels[{ENFORCE}]",
                        f'Invalid value: "{level}": must be one of privileged, baseline, restricted',
                    )
                ],
            )
        before = ((old or {}).get("metadata") or {}).get("labels") or {}
        if old is None or level is None or before.get(ENFORCE) == level:
            return
        name = ns["metadata"]["name"]
        named = f"{level}:{labels.get(ENFORCE_VERSION) or 'latest'}"
        refused = []
        for (kind, n, pod_name), pod in sorted(store.objects.items()):
            if kind == "Pod" and n == name:
                failed = violations(level, pod["metadata"], pod.get("spec") or {})
                if failed:
                    refused.append(f"{pod_name}: {', '.join(f.split(' (')[0] for f in failed)}")
        if refused:
            _warn(f'existing pods in namespace "{name}" violate the new PodSecurity enforce level "{named}"')
            for line in refused:
                _warn(line)

    return admit


def warning_header(message: str) -> str:
    """An RFC 7234 Warning header value, as the API server sends admission warnings."""
    escaped = message.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'
