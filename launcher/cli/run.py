"""`launcher run` and `launcher validate`."""

from __future__ import annotations

import sys

import click

from launcher.cli.common import OK, dump, info, warn


def _spec_options(f):
    opts = [
        click.option("-f", "--file", "spec_file", required=True, type=click.Path(dir_okay=False), help="The run YAML."),
        click.option("--name", help="Override the run name."),
        click.option("--image", help="Override the Docker image."),
        click.option("--gpus", type=int, help="Override compute.gpus (total GPUs)."),
        click.option("--gpu-type", help="Override compute.gpu_type."),
        click.option("--nodes", type=int, help="Override compute.nodes."),
        click.option("--cluster", help="Run on this cluster profile (see `launcher cluster list`)."),
        click.option("--priority", help="Override scheduling.priority."),
        click.option("--max-retries", type=int, help="Override scheduling.max_retries."),
        click.option("--env", "env", multiple=True, metavar="K=V", help="Add or override an env variable."),
        click.option("--set", "sets", multiple=True, metavar="PATH=V",
                     help="Set any field, e.g. --set parameters.optimizer.lr=1e-4 (VALUE is YAML)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _load(spec_file, name, image, gpus, gpu_type, nodes, cluster, priority, max_retries, env, sets):
    from launcher.spec.load import Overrides, load_spec

    overrides = Overrides(name=name, image=image, gpus=gpus, gpu_type=gpu_type, nodes=nodes, cluster=cluster,
                          priority=priority, max_retries=max_retries, env=list(env), set=list(sets))
    loaded = load_spec(spec_file, overrides)
    for w in loaded.warnings:
        warn(w)
    return loaded.spec


@click.command()
@_spec_options
def validate(spec_file, **kw):
    """Check a run YAML offline, and print the spec it resolves to."""
    spec = _load(spec_file, **kw)
    click.echo(f"{OK} {spec_file} is a valid run spec")
    dump(spec.to_submitted(), "yaml")


@click.command()
@_spec_options
@click.option("--follow", is_flag=True, help="Show status changes, then stream the logs until the run ends.")
@click.option("--dry-run", is_flag=True, help="Resolve and print what would be submitted; start nothing.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="Format of --dry-run output.")
@click.option("--backend", type=click.Choice(["local", "kubernetes"]), help="Pick the backend (default: the current profile's).")
def run(spec_file, follow, dry_run, output, backend, **kw):
    """Submit a run. Exits 0 when a followed run completes, 1 when it fails or stops, 2 on bad input."""
    from launcher.backends.registry import RunIndex, open_backend, open_secret_store, resolve_profile
    from launcher.spec.names import unique_run_name

    spec = _load(spec_file, **kw)
    # An mcli spec may name a cluster; `--backend local` runs it here regardless.
    cluster = kw.get("cluster") or (spec.compute.cluster if backend != "local" else None)
    if dry_run and backend == "kubernetes" and not cluster and not _has_kubernetes_profile():
        # Show what a run becomes before any cluster is configured: the shipped defaults
        # (namespace default, GPU Feature Discovery labels) and the local secrets' names.
        from launcher.config import Profile, launcher_home
        from launcher.secrets.store import LocalSecretStore

        info("no Kubernetes cluster profile yet: rendering with the shipped defaults "
             "(add one with `launcher cluster add`)")
        profile = Profile("default", "kubernetes", {})
        store = LocalSecretStore(launcher_home())
    else:
        profile = resolve_profile(cluster=cluster, backend=backend)
        store = open_secret_store(profile)
    secrets = store.for_run(spec.secrets)
    spec = spec.model_copy(update={"name": unique_run_name(spec.name)})

    if dry_run:
        dump(_dry_run(spec, profile, secrets), output)
        return

    target = open_backend(profile)
    # Recorded first, started second: a run that starts is always findable, and an
    # index that cannot be written stops us before anything runs.
    index = RunIndex()
    index.record(spec.name, profile)
    try:
        submitted = target.submit(spec, secrets)
    except BaseException:
        _forget(index, spec.name)
        raise
    if not follow:
        click.echo(f"{OK} Run {submitted.name} submitted.")
        info(f"See its status with `launcher get runs` and its logs with `launcher logs {submitted.name} -f`.")
        return
    from launcher.cli.follow import follow_run

    sys.exit(follow_run(target, submitted.name))


def _forget(index, name: str) -> None:
    from launcher.errors import LauncherError

    try:
        index.forget(name)
    except LauncherError:
        pass  # the submit's own error is the one to show


def _has_kubernetes_profile() -> bool:
    from launcher.config import load_config

    return any(p.backend == "kubernetes" for p in load_config().profiles())


def _dry_run(spec, profile, secrets) -> object:
    """What would be submitted, with secrets shown by reference only."""
    if profile.backend == "kubernetes":
        from launcher.backends.kubernetes.render import render_run

        return {"apiVersion": "v1", "kind": "List", "items": render_run(spec, profile, secrets)}
    from launcher.secrets.kinds import project

    env = spec.env_for_run(spec.name)
    for s in secrets:
        proj = project(s)
        for var in proj.env:
            env[var] = f"<from secret {s.name}>"
        for var in proj.plain_env:
            env[var] = f"<path into secret {s.name}>"
    return {"backend": "local", "run": spec.to_submitted(), "environment": env,
            "secrets": [{"name": s.name, "kind": s.kind.value} for s in secrets]}
