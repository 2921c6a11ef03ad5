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
    from launcher.sdk.config import RunConfig
    from launcher.spec.load import Overrides

    overrides = Overrides(name=name, image=image, gpus=gpus, gpu_type=gpu_type, nodes=nodes, cluster=cluster,
                          priority=priority, max_retries=max_retries, env=list(env), set=list(sets))
    config = RunConfig.from_file(spec_file, overrides)
    for w in config.warnings:
        warn(w)
    return config


def _checked(spec_file, backend: str | None, kw: dict, *, dry_run: bool):
    """Every check `run` makes before it starts anything, for `validate`, `run --dry-run`
    and `run` alike: the SDK's prepare_run (launcher.sdk.runs), which create_run makes too.
    Prints the load's warnings and the notes on the target chosen."""
    from launcher.sdk.runs import prepare_run

    config = _load(spec_file, **kw)
    return prepare_run(config, cluster=kw.get("cluster"), backend=backend, dry_run=dry_run, on_note=info)


def _backend_option(help: str):
    from launcher.backends.registry import BACKENDS

    return click.option("--backend", type=click.Choice(list(BACKENDS)), help=help)


@click.command()
@_spec_options
@_backend_option("Check for this backend (default: the current profile's).")
def validate(spec_file, backend, **kw):
    """Check a run YAML offline as `run` would, with the same checks: fields, the name, the
    gpu_type and how the GPUs fit the nodes, what the backend refuses, the command and
    environment a rank's exec must take, and the secrets where they live on this machine.
    Prints the spec it resolves to, named as the run would be.

    \b
    Examples:
      launcher validate -f runspecs/hello.yaml
      launcher validate -f runspecs/hello.yaml --gpus 16 --gpu-type h100_80gb
    """
    from launcher.spec.names import MAX_BASE, sanitize

    checked = _checked(spec_file, backend, kw, dry_run=True)  # what `run` refuses, the same call
    for warning in checked.warnings:
        warn(warning)  # and what it warns of, in the same words
    name = checked.name
    if sanitize(name) != name:
        why = "lowercase letters, digits and '-'"
        if len(name) > MAX_BASE:
            why += f"; at most {MAX_BASE} characters before the suffix, so every pod name fits Kubernetes"
        info(f"name {name!r} becomes {sanitize(name)!r} ({why})")
    click.echo(f"{OK} {spec_file} is a valid run spec")
    dump(checked.spec.to_submitted(), "yaml")


@click.command()
@_spec_options
@click.option("--follow", is_flag=True, help="Show status changes, then stream the logs until the run ends.")
@click.option("--dry-run", is_flag=True, help="Resolve and print what would be submitted; start nothing.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]),
              help="Print what --dry-run would submit in this format (default yaml), or, without "
                   "--dry-run, the submitted run's record (as `describe run -o`).")
@_backend_option("Pick the backend (default: the current profile's).")
def run(spec_file, follow, dry_run, output, backend, **kw):
    """Submit a run. Exits 0 when a followed run completes, 1 when it fails or stops, 2 on bad input.

    \b
    Examples:
      launcher run -f runspecs/hello.yaml --follow
      launcher run -f runspecs/hello.yaml --dry-run --backend kubernetes
    """
    from launcher.cli.common import run_record

    checked = _checked(spec_file, backend, kw, dry_run=dry_run)  # as `validate` does

    if dry_run:
        # From the profile alone: a cluster's secrets are not read (the backend names them),
        # so no cluster is contacted, even one that is down.
        plan = checked.plan()
        for note in plan.notes:
            info(note)
        for warning in plan.warnings:
            warn(warning)
        dump(plan.document, output or "yaml")
        return

    submitted = checked.submit()
    for warning in submitted.warnings:
        warn(warning)
    if output:
        dump(run_record(submitted), output)
    if not follow:
        click.echo(f"{OK} Run {submitted.name} submitted.", err=bool(output))
        info(f"See its status with `launcher get runs` and its logs with `launcher logs {submitted.name} -f`.")
        return
    from launcher.cli.follow import follow_run

    sys.exit(follow_run(checked.backend, submitted.name))
