"""Server-side validation the real API server does, where our manifests could be wrong:
object names, label keys and values, pod specs (containers, images, volumes and their
mounts, env names, restartPolicy), Job specs (podFailurePolicy rules, Indexed
completions, the 63-character job-name label) and Services. Messages follow the API
server's wording: `<Kind>.<group> "<name>" is invalid: <field>: <reason>`.
"""

from __future__ import annotations

import re

from tests.fakes.kube.common import invalid

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

Causes = list[tuple[str, str]]


def check_dns_subdomain(value: str, field: str, causes: Causes) -> None:
    if len(value) > 253:
        causes.append((field, f"Invalid value: {value!r}: must be no more than 253 characters"))
    elif not DNS_SUBDOMAIN.match(value):
        causes.append(
            (
                field,
                f"Invalid value: {value!r}: a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                "character",
            )
        )


def check_dns_label(value: str, field: str, causes: Causes, *, rfc1035: bool = False) -> None:
    if len(value) > 63:
        causes.append((field, f"Invalid value: {value!r}: must be no more than 63 characters"))
    elif not (DNS_1035 if rfc1035 else DNS_LABEL).match(value):
        kind = "RFC 1035 label" if rfc1035 else "RFC 1123 label"
        causes.append(
            (
                field,
                f"Invalid value: {value!r}: a lowercase {kind} must consist of lower case "
                "alphanumeric characters or '-'",
            )
        )


def check_labels(labels: dict | None, field: str, causes: Causes) -> None:
    for key, value in (labels or {}).items():
        prefix, _, name = key.rpartition("/")
        if (
            (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)))
            or len(name) > 63
            or not QUALIFIED_NAME.match(name)
        ):
            causes.append(
                (
                    field,
                    f"Invalid value: {key!r}: name part must consist of alphanumeric characters, "
                    "'-', '_' or '.', and must be no more than 63 characters",
                )
            )
        if not isinstance(value, str):
            causes.append((f"{field}", f"Invalid value: {value!r}: label values must be strings"))
        elif len(value) > 63:
            causes.append((field, f"Invalid value: {value!r}: must be no more than 63 characters"))
        elif not LABEL_VALUE.match(value):
            causes.append(
                (
                    field,
                    f"Invalid value: {value!r}: a valid label must be an empty string or consist of "
                    "alphanumeric characters, '-', '_' or '.'",
                )
            )


def check_metadata(obj: dict, causes: Causes, *, rfc1035: bool = False) -> None:
    meta = obj.get("metadata") or {}
    if rfc1035:
        check_dns_label(meta.get("name", ""), "metadata.name", causes, rfc1035=True)
    else:
        check_dns_subdomain(meta.get("name", ""), "metadata.name", causes)
    check_labels(meta.get("labels"), "metadata.labels", causes)
    size = sum(len(k) + len(str(v)) for k, v in (meta.get("annotations") or {}).items())
    if size > 256 * 1024:
        causes.append(("metadata.annotations", "Too long: must have at most 262144 bytes"))


def check_pod_spec(spec: dict | None, field: str, causes: Causes, *, restart_policies: tuple[str, ...]) -> None:
    spec = spec or {}
    containers = spec.get("containers") or []
    if not containers:
        causes.append((f"{field}.containers", "Required value"))
    volumes = {}
    for i, v in enumerate(spec.get("volumes") or []):
        name = v.get("name", "")
        check_dns_label(name, f"{field}.volumes[{i}].name", causes)
        if name in volumes:
            causes.append((f"{field}.volumes[{i}].name", f'Duplicate value: "{name}"'))
        volumes[name] = v
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            where = f"{field}.{group}[{i}]"
            name = c.get("name", "")
            if not name:
                causes.append((f"{where}.name", "Required value"))
            else:
                check_dns_label(name, f"{where}.name", causes)
            if name in names:
                causes.append((f"{where}.name", f'Duplicate value: "{name}"'))
            names.add(name)
            if not c.get("image"):
                causes.append((f"{where}.image", "Required value"))
            for j, e in enumerate(c.get("env") or []):
                if not ENV_NAME.match(e.get("name", "")):
                    causes.append(
                        (
                            f"{where}.env[{j}].name",
                            f"Invalid value: {e.get('name')!r}: a valid "
                            "environment variable name must consist of alphabetic characters, digits, '_', "
                            "'-', or '.', and must not start with a digit",
                        )
                    )
            paths: set[str] = set()
            for j, m in enumerate(c.get("volumeMounts") or []):
                if m.get("name") not in volumes:
                    causes.append((f"{where}.volumeMounts[{j}].name", f"Not found: {m.get('name')!r}"))
                if not m.get("mountPath"):
                    causes.append((f"{where}.volumeMounts[{j}].mountPath", "Required value"))
                elif m["mountPath"] in paths:
                    causes.append(
                        (f"{where}.volumeMounts[{j}].mountPath", f"Invalid value: {m['mountPath']!r}: must be unique")
                    )
                paths.add(m.get("mountPath", ""))
    policy = spec.get("restartPolicy", "Always")
    if "restartPolicy" not in spec and "Always" not in restart_policies:
        causes.append(
            (f"{field}.restartPolicy", "Required value: valid values: " + ", ".join(f'"{p}"' for p in restart_policies))
        )
    elif policy not in restart_policies:
        causes.append(
            (
                f"{field}.restartPolicy",
                f"Unsupported value: {policy!r}: supported values: " + ", ".join(f'"{p}"' for p in restart_policies),
            )
        )
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            check_dns_label(spec[key], f"{field}.{key}", causes)


def _raise(kind: str, obj: dict, causes: Causes, group: str = "") -> None:
    if causes:
        raise invalid(kind, (obj.get("metadata") or {}).get("name", ""), causes, group)


def qos_class(pod_spec: dict) -> str:
    """The pod's QoS class as the API server sets status.qosClass (Kubernetes' GetPodQOS,
    documented at concepts/workloads/pods/pod-qos): only cpu and memory count, summed over
    the containers and init containers. No request or limit anywhere: BestEffort. Every
    container with cpu and memory limits, and the requests equal to them (a limit alone is
    also its request): Guaranteed. Anything else: Burstable."""
    from kubernetes.utils import parse_quantity

    requests: dict[str, object] = {}
    limits: dict[str, object] = {}
    guaranteed = True
    for container in [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        own_limits = {
            k: parse_quantity(v)
            for k, v in (resources.get("limits") or {}).items()
            if k in ("cpu", "memory") and parse_quantity(v) > 0
        }
        own_requests = {
            k: parse_quantity(v)
            for k, v in (resources.get("requests") or {}).items()
            if k in ("cpu", "memory") and parse_quantity(v) > 0
        }
        own_requests = {**own_limits, **own_requests}  # the API server defaults a request to its limit
        for total, own in ((requests, own_requests), (limits, own_limits)):
            for k, v in own.items():
                total[k] = total.get(k, 0) + v
        if set(own_limits) != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def validate_pod(obj: dict, old: dict | None = None) -> None:
    """Defaults (a new pod is Pending; restartPolicy Always; its QoS class) and validation."""
    if old is None:
        obj["status"] = {"phase": "Pending", **(obj.get("status") or {})}
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        obj["status"]["qosClass"] = qos_class(spec)
    causes: Causes = []
    check_metadata(obj, causes)
    check_pod_spec(obj.get("spec"), "spec", causes, restart_policies=("Always", "OnFailure", "Never"))
    _raise("Pod", obj, causes)


def validate_job(job: dict) -> None:
    causes: Causes = []
    check_metadata(job, causes)
    name = job["metadata"].get("name", "")
    if len(name) > 63:
        # The name becomes the job-name label on every pod.
        causes.append(("metadata.name", f"Invalid value: {name!r}: must be no more than 63 characters"))
    spec = job.get("spec") or {}
    tmpl = spec.get("template") or {}
    check_labels((tmpl.get("metadata") or {}).get("labels"), "spec.template.metadata.labels", causes)
    check_pod_spec(tmpl.get("spec"), "spec.template.spec", causes, restart_policies=("OnFailure", "Never"))
    for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or value < (1 if key == "activeDeadlineSeconds" else 0)):
            causes.append((f"spec.{key}", f"Invalid value: {value!r}: must be greater than or equal to 0"))
    if spec.get("completionMode") not in (None, "Indexed", "NonIndexed"):
        causes.append(
            (
                "spec.completionMode",
                f'Unsupported value: {spec["completionMode"]!r}: supported values: "NonIndexed", "Indexed"',
            )
        )
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    policy = spec.get("podFailurePolicy")
    if policy is not None:
        _check_pod_failure_policy(policy, tmpl.get("spec") or {}, causes)
    _raise("Job", job, causes, "batch")


def _check_pod_failure_policy(policy: dict, pod_spec: dict, causes: Causes) -> None:
    if pod_spec.get("restartPolicy") != "Never":
        causes.append(
            ("spec.podFailurePolicy", "Invalid value: only allowed when the pod template's restartPolicy is Never")
        )
    containers = {c.get("name") for g in ("initContainers", "containers") for c in pod_spec.get(g) or []}
    for i, rule in enumerate(policy.get("rules") or []):
        where = f"spec.podFailurePolicy.rules[{i}]"
        if rule.get("action") not in ("FailJob", "FailIndex", "Ignore", "Count"):
            causes.append(
                (
                    f"{where}.action",
                    f"Unsupported value: {rule.get('action')!r}: supported values: "
                    '"Count", "FailIndex", "FailJob", "Ignore"',
                )
            )
        codes, conds = rule.get("onExitCodes"), rule.get("onPodConditions")
        if codes is not None and conds is not None:
            causes.append((where, "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"))
        elif codes is None and conds is None:
            causes.append((where, "Invalid value: specifying one of OnExitCodes and OnPodConditions is required"))
        if codes is not None:
            op, values = codes.get("operator"), codes.get("values") or []
            if op not in ("In", "NotIn"):
                causes.append(
                    (f"{where}.onExitCodes.operator", f'Unsupported value: {op!r}: supported values: "In", "NotIn"')
                )
            if not values:
                causes.append((f"{where}.onExitCodes.values", "Invalid value: at least one value is required"))
            for j, v in enumerate(values):
                if op == "In" and v == 0:
                    causes.append(
                        (f"{where}.onExitCodes.values[{j}]", "Invalid value: 0: must not be 0 for the In operator")
                    )
                if j and values[j - 1] == v:
                    causes.append((f"{where}.onExitCodes.values[{j}]", f"Duplicate value: {v}"))
                elif j and values[j - 1] > v:
                    causes.append((f"{where}.onExitCodes.values[{j}]", f"Invalid value: {v}: must be ordered"))
            if codes.get("containerName") and codes["containerName"] not in containers:
                causes.append(
                    (
                        f"{where}.onExitCodes.containerName",
                        f"Invalid value: {codes['containerName']!r}: "
                        "must be one of the container or initContainer names in the pod template",
                    )
                )
        for j, pc in enumerate(conds or []):
            if not pc.get("type"):
                causes.append((f"{where}.onPodConditions[{j}].type", "Required value"))
            if pc.get("status", "True") not in ("True", "False", "Unknown"):
                causes.append((f"{where}.onPodConditions[{j}].status", f"Unsupported value: {pc['status']!r}"))


def validate_service(obj: dict, old: dict | None = None) -> None:
    causes: Causes = []
    check_metadata(obj, causes, rfc1035=True)
    spec = obj.get("spec") or {}
    for i, p in enumerate(spec.get("ports") or []):
        if not isinstance(p.get("port"), int) or not 0 < p["port"] < 65536:
            causes.append(
                (f"spec.ports[{i}].port", f"Invalid value: {p.get('port')!r}: must be between 1 and 65535, inclusive")
            )
        if len(spec.get("ports") or []) > 1 and not p.get("name"):
            causes.append((f"spec.ports[{i}].name", "Required value"))
    _raise("Service", obj, causes)


def validate_data(kind: str):
    def check(obj: dict, old: dict | None = None) -> None:
        causes: Causes = []
        check_metadata(obj, causes)
        size = 0
        for field in ("data", "binaryData", "stringData"):
            for key, value in (obj.get(field) or {}).items():
                if not CONFIG_KEY.match(key) or len(key) > 253:
                    causes.append(
                        (
                            f"{field}[{key}]",
                            f"Invalid value: {key!r}: a valid config key must consist "
                            "of alphanumeric characters, '-', '_' or '.'",
                        )
                    )
                size += len(value or "")
        if size > 1024 * 1024 * (4 / 3 if kind == "Secret" else 1):
            causes.append(("data", "Too long: must have at most 1048576 bytes"))
        _raise(kind, obj, causes)
        if kind == "Secret" and obj.get("stringData"):
            import base64

            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(value.encode()).decode()

    return check
