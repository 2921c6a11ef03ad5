"""`launcher run` and `launcher validate`."""

from __future__ import annotations

import sys

import click

from launcher.backends.capabilities import Feature
from launcher.backends.registry import BACKENDS
from launcher.cli.common import OK, complete_run_names, dump, info, run_record, warn
from launcher.cli.follow import follow_run
from launcher.sdk.config import RunConfig
from launcher.sdk.fanout import resolve_run
from launcher.sdk.run_names import spec_name_of
from launcher.sdk.runs import prepare_run
from launcher.spec.load import Overrides
from launcher.spec.names import MAX_BASE, sanitize


def _spec_options(f=None, *, file_required: bool = True):
    """The spec file and its overrides, shared by `validate` and `run`. mcli 0.8.3's
    spellings (--run-name, --gpu-num, --max_retries) are other names of the same options."""
    if f is None:
        return lambda g: _spec_options(g, file_required=file_required)
    opts = [
        click.option(
            "-f", "--file", "spec_file", required=file_required, type=click.Path(dir_okay=False), help="The run YAML."
        ),
        click.option("--name", "--run-name", "name", help="Override the run name."),
        click.option("--image", help="Override the Docker image."),
        click.option("--gpus", "--gpu-num", "gpus", type=int, help="Override compute.gpus (total GPUs)."),
        click.option("--gpu-type", help="Override compute.gpu_type."),
        click.option("--nodes", type=int, help="Override compute.nodes."),
        click.option("--instance", help="Override compute.instance."),
        click.option(
            "--node-names",
            "node_names",
            multiple=True,
            metavar="NODE[,NODE...]",
            help="Override compute.node_names (comma-separated, or the flag repeated).",
        ),
        click.option(
            "--cluster",
            metavar="NAME|auto|A,B",
            help="Run on this cluster profile (see `launcher cluster list`); `auto` or a comma list: "
            "on the first of them whose free GPUs fit the run.",
        ),
        click.option("--priority", help="Override scheduling.priority."),
        click.option("--preemptible/--no-preemptible", default=None, help="Override scheduling.preemptible."),
        click.option(
            "--max-retries", "--max_retries", "max_retries", type=int, help="Override scheduling.max_retries."
        ),
        click.option(
            "--max-duration",
            "max_duration",
            type=float,
            metavar="HOURS",
            help="Override scheduling.max_duration (hours; the run fails past it).",
        ),
        click.option("--env", "env", multiple=True, metavar="K=V", help="Add or override an env variable."),
        click.option(
            "--set",
            "sets",
            multiple=True,
            metavar="PATH=V",
            help="Set any field, e.g. --set parameters.optimizer.lr=1e-4 (VALUE is YAML).",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _load(spec_file, env, sets, node_names, clone_of=None, **fields):
    """The RunConfig of `spec_file`, or of the run `clone_of` as submitted (`run --clone`),
    with the command line's overrides."""
    names = [n.strip() for item in node_names for n in item.split(",") if n.strip()]
    overrides = Overrides(**fields, node_names=names or None, env=list(env), set=list(sets))
    if clone_of is not None:
        config = RunConfig.from_dict(_clone_spec(clone_of), overrides)
    else:
        config = RunConfig.from_file(spec_file, overrides)
    for w in config.warnings:
        warn(w)
    return config


def _clone_spec(run) -> dict:
    """A run's spec as submitted, under the name its spec had (so that the copy gets a name
    of its own)."""
    spec = dict(run.spec)
    spec["name"] = spec_name_of(str(spec.get("name") or run.name))
    return spec


def _checked(
    spec_file,
    backend: str | None,
    kw: dict,
    *,
    dry_run: bool,
    clone_of=None,
    code: str | None = None,
    allow_files: tuple[str, ...] = (),
):
    """Every check `run` makes before it starts anything, for `validate`, `run --dry-run`
    and `run` alike: the SDK's prepare_run (launcher.sdk.runs), which create_run makes too.
    Prints the load's warnings and the notes on the target chosen."""

    config = _load(spec_file, clone_of=clone_of, **kw)
    # A copy goes where its run went, unless the command line says otherwise.
    cluster = kw.get("cluster") or (clone_of.cluster if clone_of is not None and not backend else None)
    return prepare_run(
        config, cluster=cluster, backend=backend, dry_run=dry_run, on_note=info, code=code, allow_files=allow_files
    )


def _backend_option(help: str):
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
@_spec_options(file_required=False)
@click.option(
    "--follow/--no-follow",
    default=False,
    help="Show status changes, then stream the logs until the run ends (--no-follow, the "
    "default: return once it is submitted).",
)
@click.option(
    "-r",
    "--restart",
    "restart",
    metavar="NAME",
    shell_complete=complete_run_names,
    help="Restart a stopped or failed run as its next attempt, with its spec as submitted.",
)
@click.option(
    "--clone",
    "clone",
    metavar="NAME",
    shell_complete=complete_run_names,
    help="Submit a copy of a run's spec as submitted, with this command line's overrides.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Resolve and print what would be submitted (and every file --code ships); start nothing.",
)
@click.option(
    "--code-dry-run",
    "code_dry_run",
    is_flag=True,
    help="List the files the code snapshot would ship, with their sizes; start nothing.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    help="Print what --dry-run would submit in this format (default yaml), or, without "
    "--dry-run, the submitted run's record (as `describe run -o`).",
)
@click.option(
    "--code",
    "code",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Ship this working tree with the run (git's tracked and untracked-but-not-ignored files), "
    "laid over each rank's working directory: the spec's code.path.",
)
@click.option(
    "--allow-file",
    "allow_files",
    multiple=True,
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="Pack this file into the code snapshot though it looks like a credentials file.",
)
@_backend_option("Pick the backend (default: the current profile's).")
def run(spec_file, follow, restart, clone, dry_run, code_dry_run, output, code, allow_files, backend, **kw):
    """Submit a run. Exits 0 when a followed run completes, 1 when it fails or stops, 2 on bad input.
    `-r NAME` starts a stopped or failed run again, as its next attempt.

    \b
    Examples:
      launcher run -f runspecs/hello.yaml --follow
      launcher run -f runspecs/hello.yaml --dry-run --backend kubernetes
      launcher run --clone hello --gpus 16   # a copy of the latest hello run, on 16 GPUs
    """
    if restart is not None and (code or allow_files):
        raise click.UsageError(
            "-r restarts a run with the code it was submitted with; it takes no --code or --allow-file"
        )
    source = _source(spec_file, restart, clone, dry_run or code_dry_run, backend, kw)
    if restart is not None:
        _restart(source, follow, output)
        return
    clone_of = source[1] if source is not None else None
    checked = _checked(
        spec_file, backend, kw, dry_run=dry_run or code_dry_run, clone_of=clone_of, code=code, allow_files=allow_files
    )  # as `validate` does

    if code_dry_run:
        if checked.code is None:
            raise click.UsageError("--code-dry-run lists a code snapshot: give --code DIR, or `code:` in the spec")
        _list_code(checked.code)
        return
    if dry_run:
        if checked.code is not None:
            _list_code(checked.code)
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

    sys.exit(follow_run(checked.backend, submitted.name))


def _list_code(snapshot) -> None:
    """Every file the snapshot ships and its size, one `code:   PATH  SIZE` line each."""
    from launcher.sdk.code_selection import human_size

    for rel, size in snapshot.listing:
        click.echo(f"code:   {rel}  {human_size(size)}", err=True)


def _source(spec_file, restart, clone, dry_run, backend, kw):
    """The run that -r or --clone names (None for -f), after the checks of how they combine."""
    given = [flag for flag, value in (("-f", spec_file), ("-r", restart), ("--clone", clone)) if value]
    if len(given) > 1:
        raise click.UsageError(f"{' and '.join(given)} cannot be combined: give one of -f FILE, -r NAME, --clone NAME")
    if not given:
        raise click.UsageError("Missing option '-f' / '--file' (or -r NAME to restart a run, --clone NAME to copy one)")
    if restart is not None:
        overrides = [k for k, v in kw.items() if v is not None and v != ()]
        if overrides or backend or dry_run:
            flags = (
                [f"--{k.replace('_', '-')}" for k in overrides]
                + (["--backend"] if backend else [])
                + (["--dry-run"] if dry_run else [])
            )
            raise click.UsageError(
                f"-r restarts a run as it was submitted, where it ran; it takes no "
                f"{', '.join(flags)} (`launcher run --clone {restart} ...` submits a copy "
                "with overrides)"
            )
    if spec_file:
        return None

    return resolve_run(restart or clone)


def _restart(source, follow: bool, output: str | None) -> None:
    """`run -r NAME`: the run's next attempt, on the backend that holds it."""
    target, old = source
    target.require(Feature.RESTART, hint=f"`launcher run --clone {old.name}` submits a copy of it")
    restarted = target.restart(old.name)
    if output:
        dump(run_record(restarted), output)
    click.echo(f"{OK} Run {restarted.name} restarted: attempt {restarted.current_attempt}.", err=bool(output))
    if not follow:
        info(f"See its status with `launcher get runs` and its logs with `launcher logs {restarted.name} -f`.")
        return

    sys.exit(follow_run(target, restarted.name, from_attempt=restarted.current_attempt))
