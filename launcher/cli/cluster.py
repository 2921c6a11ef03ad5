"""`launcher cluster add|check|list|use`: the cluster profiles in $LAUNCHER_HOME/config.yaml.

A profile names a kubeconfig context and namespace (and GPU node labels, a Kueue
queue...); `launcher run --cluster NAME` or the current profile sends runs there.
The profile `local` (this machine) always exists.
"""

from __future__ import annotations

from typing import Any, TypedDict

import click

from launcher.cli.common import FAIL, OK, WARN, dump, info, print_table, warn


class ImageCheck(TypedDict):
    """One image's pull, as `cluster check -o json` prints it."""

    image: str
    pulled: bool | None
    detail: str


class CheckReport(TypedDict):
    """One profile's `cluster check`, as `-o json` prints it."""

    profile: str
    reachable: bool | None
    error: str | None
    serves: dict[str, bool]
    problems: list[str]
    images: list[ImageCheck]
    warnings: list[str]
    unpinned: str | None
    """How to pin a profile that stores no context (registry.pin); None: it is pinned."""


class ProfileRow(TypedDict, total=False):
    """One profile, as `cluster list -o json` prints it (`id` with --ids)."""

    id: str
    name: str
    backend: str
    current: bool
    context: Any
    namespace: str | None
    queue: Any


@click.group()
def cluster() -> None:
    """Add, check, list and choose cluster profiles."""


def _add_options(command):
    """`cluster add`'s options: --backend, then each backend row's own (registry.Option), each
    once: two backends that take the same setting share its flag."""
    from launcher.backends.registry import BACKENDS, Option

    seen: dict[str, Option] = {}
    for _name, row in BACKENDS.items():
        for option in row.add:
            seen.setdefault(option.flag, option)
    for option in reversed(list(seen.values())):
        kind = (
            click.Choice(list(option.choices))
            if option.choices
            else click.Path(dir_okay=False)
            if option.path
            else click.INT
            if option.integer
            else None
        )
        command = click.option(f"--{option.flag}", option.setting, type=kind, help=option.help)(command)
    adders = [name for name, row in BACKENDS.items() if row.add]
    return click.option(
        "--backend", type=click.Choice(adders), default=adders[0], show_default=True, help="The backend of the profile."
    )(command)


@cluster.command("add")
@click.argument("name")
@_add_options
@click.option("--use", "make_current", is_flag=True, help="Make it the current profile.")
@click.option("--replace", is_flag=True, help="Replace a profile of the same name.")
def add(name, backend, make_current, replace, **options):
    """Add a cluster profile NAME of a backend (default: Kubernetes), from its options below,
    and ask the cluster what it serves: one that serves no JobSet is added, and the command
    that installs JobSet is printed (exit 2). Edit config.yaml for the rest (gpu_types,
    priority classes)."""
    import os

    from launcher.backends.capabilities import Feature
    from launcher.backends.registry import open_backend, pin, row
    from launcher.config import LOCAL, Profile, check_profile_name, config_path, load_config, update_config
    from launcher.errors import InputError

    problem = check_profile_name(name)
    if problem:
        raise InputError(problem)
    if name == LOCAL:
        raise InputError("the profile 'local' is built in; pick another name")
    own = {o.setting: o for o in row(backend).add}
    foreign = [k for k, v in options.items() if v is not None and k not in own]
    if foreign:
        raise InputError(f"--{foreign[0].replace('_', '-')} is no option of a {backend} profile")

    def refuse_a_repeat(clusters: dict) -> None:
        if name in clusters and not replace:
            raise InputError(f"a cluster profile named {name!r} already exists", hint="pass --replace to overwrite it")

    refuse_a_repeat(load_config().clusters)  # before asking the cluster; asked again under the lock
    given: dict = {"backend": backend}
    for setting, option in own.items():
        value = options.get(setting)
        if value is None:
            value = option.default
        if value is not None:
            given[setting] = os.path.abspath(os.path.expanduser(value)) if option.path else value
    # Where the profile points now (its context and namespace), stored, so that it keeps
    # pointing there whatever becomes current later; in the options' order.
    pinned, _ = pin(Profile(name, backend, given))
    settings = {"backend": backend}
    for setting in own:
        if setting in given or setting in pinned:
            settings[setting] = given.get(setting, pinned.get(setting))
    for setting, value in pinned.items():
        settings.setdefault(setting, value)
    opened = open_backend(Profile(name, backend, settings))  # validates every field
    report = _probe(name, opened) if opened.supports(Feature.CLUSTER_PROBE) else None

    def add_profile(config) -> None:
        refuse_a_repeat(config.clusters)
        config.clusters[name] = settings
        if make_current:
            config.current = name

    update_config(add_profile)
    from launcher.backends.registry import profile_namespace

    namespace = profile_namespace(Profile(name, backend, settings))
    click.echo(
        f"{OK} Added cluster {name}"
        + (f" (namespace {namespace})" if namespace else "")
        + f" to {config_path()}"
        + (" and made it current" if make_current else "")
    )
    if report is not None:
        info(_served(report.serves) + " (asked the cluster)")
    for warning in opened.profile_warnings():
        warn(f"cluster {name}: {warning}")
    if report is not None and report.problems:
        for problem in report.problems:
            click.echo(f"{FAIL} {problem}", err=True)
        raise SystemExit(2)


def _served(serves: dict[str, bool]) -> str:
    return ", ".join(f"{what} {'served' if on else 'not served'}" for what, on in serves.items())


def _probe(name: str, backend):
    """What the cluster serves (a ClusterReport); None (and a warning) when it cannot be asked."""
    try:
        return backend.probe()  # quickly: an unreachable cluster must not hold up `cluster add`
    except Exception as e:  # noqa: BLE001 - whatever the failure, the profile is still added
        warn(f"cluster {name}: could not ask what it serves ({type(e).__name__}); `launcher run` asks again")
        return None


@cluster.command("check")
@click.argument("names", nargs=-1)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=60,
    show_default=True,
    help="Seconds each image probe waits for the cluster's answer.",
)
@click.option("-o", "--output", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
def check(names, timeout, output):
    """Check cluster profiles NAMES (default: every cluster profile): whether the cluster
    answers, and whether it can pull the images every run needs, with one short-lived pod
    per image (deleted after), and whether it serves what runs need (JobSet). Exits 1
    unless every cluster answered, serves it, and pulled them all."""
    from launcher.backends.capabilities import ClusterProbe, Feature, ImageProbe, ImagePull
    from launcher.backends.registry import is_cluster, open_backend, pin
    from launcher.config import load_config
    from launcher.errors import LauncherError

    config = load_config()
    profiles = [config.profile(n) for n in names] if names else [p for p in config.profiles() if is_cluster(p)]
    if not profiles:
        info("no cluster profiles to check (add one with `launcher cluster add`)")
        return
    reports: list[CheckReport] = []
    failed = False
    for profile in profiles:
        backend = open_backend(profile)
        report: CheckReport = {
            "profile": profile.name,
            "reachable": None,
            "error": None,
            "serves": {},
            "problems": [],
            "images": [],
            "warnings": backend.profile_warnings(),
            "unpinned": pin(profile)[1],
        }
        try:
            if backend.supports(Feature.CLUSTER_PROBE):
                assert isinstance(backend, ClusterProbe)  # check_declaration: a supported feature's mixin is a base
                found = backend.probe()
                report["serves"], report["problems"] = found.serves, found.problems
            report["reachable"] = True
            if backend.supports(Feature.IMAGE_PROBE):
                assert isinstance(backend, ImageProbe)  # as above
                for image in backend.run_images():
                    try:
                        pull = backend.probe_image(image, timeout=timeout)
                    except LauncherError as e:  # e.g. no permission to create pods: the question stays open
                        pull = ImagePull(image, None, f"the probe pod could not run: {e}")
                    report["images"].append({"image": pull.image, "pulled": pull.pulled, "detail": pull.detail})
        except LauncherError as e:
            report["reachable"], report["error"] = False, str(e)
        finally:
            backend.close()
        failed = (
            failed
            or report["reachable"] is False
            or bool(report["problems"])
            or any(i["pulled"] is not True for i in report["images"])
        )
        reports.append(report)
        if output == "text":
            _say_check(report)
    if output != "text":
        dump(reports, output)
    if failed:
        raise SystemExit(1)


def _say_check(report: CheckReport) -> None:
    name = report["profile"]
    if report["reachable"] is False:
        click.echo(f"{FAIL} {name}: {report['error']}")
    else:
        served = _served(report["serves"])
        click.echo(f"{OK} {name}: the cluster answers" + (f" ({served})" if served else ""))
    for problem in report["problems"]:
        click.echo(f"{FAIL} {name}: {problem}")
    for pull in report["images"]:
        if pull["pulled"]:
            click.echo(f"{OK} {name}: can pull {pull['image']}")
        elif pull["pulled"] is False:
            click.echo(f"{FAIL} {name}: cannot pull {pull['image']}: {pull['detail']}")
        else:
            click.echo(f"{WARN} {name}: could not tell whether it can pull {pull['image']}: {pull['detail']}")
    if report["unpinned"]:
        warn(f"cluster {name}: {report['unpinned']}")
    if not report["images"] or not all(pull["pulled"] for pull in report["images"]):
        for warning in report["warnings"]:  # moot where the cluster pulls them all (a mirror, a preloaded image)
            warn(f"{name}: {warning}")


@cluster.command("list")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
def list_(output):
    """List cluster profiles; * marks the current one."""
    list_profiles(output)


def list_profiles(output: str, *, include_ids: bool = False) -> None:
    """`cluster list` and `get clusters`: the profiles, * marking the current one; with
    include_ids (mcli's `--ids`) each one's id, which is its name."""
    from launcher.backends.registry import pin
    from launcher.config import load_config

    config = load_config()
    rows: list[ProfileRow] = []
    unpinned: list[str] = []
    for p in config.profiles():
        why = pin(p)[1]
        if why:
            unpinned.append(f"cluster {p.name}: {why}")
        s = p.settings
        row: ProfileRow = {
            "name": p.name,
            "backend": p.backend,
            "current": p.name == config.current,
            "context": s.get("context"),
            "namespace": _namespace(p),
            "queue": s.get("queue"),
        }
        if include_ids:
            row = {"id": p.name, **row}  # the ID column first, as mcli prints it
        rows.append(row)
    for message in unpinned:  # on stderr: the listing on stdout stays as it is
        warn(message)
    if output == "name":
        for r in rows:
            click.echo(r["name"])
        return
    if output != "table":
        dump(rows, output)
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("", "NAME", *(["ID"] if include_ids else []), "BACKEND", "CONTEXT", "NAMESPACE", "QUEUE"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            "*" if r["current"] else "",
            r["name"],
            *([r["id"]] if include_ids else []),
            r["backend"],
            r["context"] or "-",
            r["namespace"] or "-",
            r["queue"] or "-",
        )
    print_table(table)


def _namespace(profile) -> str | None:
    """Where a profile's runs go (a Kubernetes namespace), read offline without loading the
    profile model (registry.Row.namespace)."""
    from launcher.backends.registry import profile_namespace

    return profile_namespace(profile)


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
