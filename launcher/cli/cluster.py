"""`launcher cluster add|check|list|use`: the cluster profiles in $LAUNCHER_HOME/config.yaml.

A profile names a kubeconfig context and namespace (and GPU node labels, a Kueue
queue...); `launcher run --cluster NAME` or the current profile sends runs there.
The profile `local` (this machine) always exists.
"""

from __future__ import annotations

import click

from launcher.cli.common import FAIL, OK, WARN, dump, info, print_table, warn


@click.group()
def cluster() -> None:
    """Add, check, list and choose cluster profiles."""


@cluster.command("add")
@click.argument("name")
@click.option("--context", help="kubeconfig context (default: the kubeconfig's current context).")
@click.option("--namespace",
              help="Namespace runs and secrets go to (default: the context's, as kubectl takes it; else default).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).")
@click.option("--service-account", help="Service account the run's pods use.")
@click.option("--image", help="Image for specs that name none.")
@click.option("--gpu-labels", type=click.Choice(["gfd", "gke", "karpenter"]), default="gfd", show_default=True,
              help="Node labels the shipped gpu_types select on: NVIDIA GPU Feature Discovery, GKE or Karpenter.")
@click.option("--default-gpu-type", help="gpu_type for specs that ask for GPUs without one.")
@click.option("--queue", help="Kueue LocalQueue for this cluster's runs.")
@click.option("--entrypoint-mode", type=click.Choice(["zipapp", "inject", "image"]),
              help="zipapp (default): run the entrypoint with the image's own python3; inject: copy the "
                   "launcher's runtime into any image (one without Python too); image: the image has the launcher.")
@click.option("--runtime-image", help="The runtime image inject mode copies from (default: the pinned release).")
@click.option("--jobset/--no-jobset", default=None,
              help="Whether the cluster serves JobSet (default: ask the cluster).")
@click.option("--use", "make_current", is_flag=True, help="Make it the current profile.")
@click.option("--replace", is_flag=True, help="Replace a profile of the same name.")
def add(name, context, namespace, kubeconfig, service_account, image, gpu_labels, default_gpu_type, queue,
        entrypoint_mode, runtime_image, jobset, make_current, replace):
    """Add a Kubernetes cluster profile NAME. Edit config.yaml for gpu_types and priority classes."""
    import os

    from launcher.backends.capabilities import Feature
    from launcher.backends.registry import open_backend
    from launcher.config import LOCAL, Profile, check_profile_name, config_path, load_config, update_config
    from launcher.errors import InputError

    problem = check_profile_name(name)
    if problem:
        raise InputError(problem)
    if name == LOCAL:
        raise InputError("the profile 'local' is built in; pick another name")

    def refuse_a_repeat(clusters: dict) -> None:
        if name in clusters and not replace:
            raise InputError(f"a cluster profile named {name!r} already exists", hint="pass --replace to overwrite it")

    refuse_a_repeat(load_config().clusters)  # before asking the cluster; asked again under the lock
    settings = {"backend": "kubernetes", "context": context, "namespace": namespace,
                "kubeconfig": os.path.abspath(os.path.expanduser(kubeconfig)) if kubeconfig else None,
                "service_account": service_account, "image": image, "gpu_labels": gpu_labels,
                "default_gpu_type": default_gpu_type, "queue": queue, "entrypoint_mode": entrypoint_mode,
                "runtime_image": runtime_image}
    settings = {k: v for k, v in settings.items() if v is not None}
    backend = open_backend(Profile(name, "kubernetes", settings))  # validates every field
    if default_gpu_type and default_gpu_type not in backend.gpu_types():
        raise InputError(f"--default-gpu-type: unknown gpu_type {default_gpu_type!r} "
                         f"(known: {', '.join(backend.gpu_types())})")
    if jobset is None and backend.supports(Feature.CLUSTER_PROBE):
        jobset = _detect_jobset(name, backend)
    if jobset is not None:
        settings["jobset"] = jobset

    def add_profile(config) -> None:
        refuse_a_repeat(config.clusters)
        config.clusters[name] = settings
        if make_current:
            config.current = name

    update_config(add_profile)
    click.echo(f"{OK} Added cluster {name} (namespace {backend.profile.namespace}) to {config_path()}"
               + (" and made it current" if make_current else ""))
    if jobset is not None:
        info("JobSet: served; failed attempts restart in the cluster" if jobset else
             "JobSet: not served; retries happen only while a reconciler runs (`launcher reconcile "
             "--watch`, docs/reconciler.yaml; see docs/kubernetes.md to install JobSet)")
    for warning in backend.profile_warnings():
        warn(f"cluster {name}: {warning}")


def _detect_jobset(name: str, backend) -> bool | None:
    """Ask the cluster whether it serves JobSet; None (and a warning) when it cannot be asked."""
    try:
        return backend.probe()["jobset"]  # quickly: an unreachable cluster must not hold up `cluster add`
    except Exception as e:  # noqa: BLE001 - whatever the failure, the profile is still added
        warn(f"cluster {name}: could not ask whether it serves JobSet ({type(e).__name__}); "
             "submit checks again")
        return None


@cluster.command("check")
@click.argument("names", nargs=-1)
@click.option("--timeout", type=click.FloatRange(min=1), default=60, show_default=True,
              help="Seconds each image probe waits for the cluster's answer.")
@click.option("-o", "--output", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
def check(names, timeout, output):
    """Check cluster profiles NAMES (default: every cluster profile): whether the cluster
    answers, and whether it can pull the images every run needs, with one short-lived pod
    per image (deleted after). Exits 1 unless every cluster answered and pulled them all."""
    from launcher.backends.capabilities import Feature, ImagePull
    from launcher.backends.registry import is_cluster, open_backend
    from launcher.config import load_config
    from launcher.errors import LauncherError

    config = load_config()
    profiles = [config.profile(n) for n in names] if names else [p for p in config.profiles() if is_cluster(p)]
    if not profiles:
        info("no cluster profiles to check (add one with `launcher cluster add`)")
        return
    reports, failed = [], False
    for profile in profiles:
        backend = open_backend(profile)
        report = {"profile": profile.name, "reachable": None, "error": None, "serves": {}, "images": [],
                  "warnings": backend.profile_warnings()}
        try:
            if backend.supports(Feature.CLUSTER_PROBE):
                report["serves"] = backend.probe()
            report["reachable"] = True
            for image in backend.run_images() if backend.supports(Feature.IMAGE_PROBE) else []:
                try:
                    pull = backend.probe_image(image, timeout=timeout)
                except LauncherError as e:  # e.g. no permission to create pods: the question stays open
                    pull = ImagePull(image, None, f"the probe pod could not run: {e}")
                report["images"].append({"image": pull.image, "pulled": pull.pulled, "detail": pull.detail})
        except LauncherError as e:
            report.update(reachable=False, error=str(e))
        finally:
            backend.close()
        failed = failed or report["reachable"] is False or any(i["pulled"] is not True for i in report["images"])
        reports.append(report)
        if output == "text":
            _say_check(report)
    if output != "text":
        dump(reports, output)
    if failed:
        raise SystemExit(1)


def _say_check(report: dict) -> None:
    name = report["profile"]
    if report["reachable"] is False:
        click.echo(f"{FAIL} {name}: {report['error']}")
    else:
        served = ", ".join(f"{what} {'served' if on else 'not served'}" for what, on in report["serves"].items())
        click.echo(f"{OK} {name}: the cluster answers" + (f" ({served})" if served else ""))
    for pull in report["images"]:
        if pull["pulled"]:
            click.echo(f"{OK} {name}: can pull {pull['image']}")
        elif pull["pulled"] is False:
            click.echo(f"{FAIL} {name}: cannot pull {pull['image']}: {pull['detail']}")
        else:
            click.echo(f"{WARN} {name}: could not tell whether it can pull {pull['image']}: {pull['detail']}")
    if not report["images"] or not all(pull["pulled"] for pull in report["images"]):
        for warning in report["warnings"]:  # moot where the cluster pulls them all (a mirror, a preloaded image)
            warn(f"{name}: {warning}")


@cluster.command("list")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
def list_(output):
    """List cluster profiles; * marks the current one."""
    list_profiles(output)


def list_profiles(output: str) -> None:
    """`cluster list` and `get clusters`: the profiles, * marking the current one."""
    from launcher.config import load_config

    config = load_config()
    rows = []
    for p in config.profiles():
        s = p.settings
        rows.append({"name": p.name, "backend": p.backend, "current": p.name == config.current,
                     "context": s.get("context"), "namespace": _namespace(p), "queue": s.get("queue")})
    if output != "table":
        dump(rows, output)
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("", "NAME", "BACKEND", "CONTEXT", "NAMESPACE", "QUEUE"):
        table.add_column(col)
    for r in rows:
        table.add_row("*" if r["current"] else "", r["name"], r["backend"], r["context"] or "-",
                      r["namespace"] or "-", r["queue"] or "-")
    print_table(table)


def _namespace(profile) -> str | None:
    """Where a Kubernetes profile's runs go, read from the kubeconfig file without loading
    the profile model."""
    if profile.backend != "kubernetes":
        return None
    from launcher.backends.kubernetes.reach import profile_namespace

    return profile_namespace(profile.settings)


@cluster.command("use")
@click.argument("name")
def use(name):
    """Make NAME the profile `launcher run` uses by default."""
    from launcher.config import update_config

    def make_current(config) -> None:
        config.profile(name)  # NotFoundError (exit 2) listing the known ones
        config.current = name

    update_config(make_current)
    click.echo(f"{OK} Current cluster: {name}")
