"""mcli's `util` (free GPUs per cluster) and `config` (what the CLI is set up with), and
`schema`, the run YAML's JSON Schema for editors."""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version

import click

from launcher.backends.capabilities import Feature
from launcher.cli.common import dump, info, print_table, warn
from launcher.config import config_path, launcher_home, load_config
from launcher.sdk.fanout import ask_some

FORMATS = click.Choice(["table", "json", "yaml"])

# The libraries a run or a command leans on, by distribution name: their versions are
# read from the installed metadata, so `config` imports none of them (torch takes seconds).
LIBRARIES = (
    "click",
    "pydantic",
    "PyYAML",
    "rich",
    "fsspec",
    "kubernetes",
    "databricks-sdk",
    "torch",
    "mosaicml",
    "mosaicml-streaming",
    "transformers",
    "mlflow-skinny",
    "starlette",
    "uvicorn",
)


def _usage(backend):
    try:
        backend.require(Feature.GPU_USAGE)
        return backend.gpu_usage(), backend.queue_usage() if backend.supports(Feature.QUEUE_USAGE) else []
    finally:
        backend.close()


def usage_of(profiles, current: str | None = None) -> dict:
    """Each profile's (GpuUsage list, QueueUsage list), asked of every one at once; one that
    cannot be asked is a warning, and missing from the answer. Profiles that are one place
    (one cluster's namespace) are asked once, through the current one or the first by name,
    and said so: their GPUs are counted once."""
    answers, warnings = ask_some(profiles, _usage, "asked", prefer=[current] if current else [])
    for message in warnings:
        warn(message)
    for name, other in answers.same_place.items():
        info(f"cluster {name} is the same place as cluster {other} (one cluster and namespace): counted under {other}")
    return answers


@click.command()
@click.argument("clusters", nargs=-1, metavar="[CLUSTER]...")
@click.option("--cluster", "one", help="Only this cluster profile (the same as naming it: mcli's form).")
@click.option("--hide-users", is_flag=True, help="Leave out mcli's breakdown: the active and queued runs.")
@click.option("-t", "--training", is_flag=True, help="mcli's: only training (every run here is one).")
@click.option("-i", "--inference", is_flag=True, help="mcli's: only inference deployments (there are none here).")
@click.option("-o", "--output", type=FORMATS, default="table", show_default=True)
def util(clusters, one, hide_users, training, inference, output):
    """Free and used GPUs per cluster profile and GPU type: each node's allocatable GPUs,
    less what the pods on it request (on Kubernetes), or this machine's GPUs, less what
    its unfinished runs ask for (locally). gpu_type `none` counts nodes without GPUs.
    A profile with a Kueue queue adds its ClusterQueue: GPU quota, usage, pending workloads
    and the GPUs they ask for (of the profile's namespace).

    \b
    Examples:
      launcher util                  # every cluster profile
      launcher util gke -o json
      launcher util local --hide-users

    Below the GPUs, as mcli's breakdown by user, the runs that hold them (STARTING,
    RUNNING, TERMINATING: non-preemptible, then preemptible) and those queued for them
    (PENDING, QUEUED), each with its age, GPUs and priority, where there are any: in
    the table (-o json and yaml keep one row per GPU type and queue). A run here records
    no submitter, so the breakdown is by run.
    """
    if training and inference:
        raise click.UsageError("-t/--training and -i/--inference do not go together")
    if inference:
        from launcher.backends.capabilities import NotSupported

        raise NotSupported("there are no inference deployments here: the launcher runs training runs only")
    config = load_config()
    named = list(dict.fromkeys([*clusters, *([one] if one else [])]))
    profiles = [config.profile(name) for name in named] if named else config.profiles()
    answers = usage_of(profiles, config.current)
    rows = [
        {
            "cluster": p.name,
            "backend": p.backend,
            "gpu_type": u.gpu_type,
            "nodes": u.nodes,
            "gpus": u.gpus,
            "used": u.used,
            "free": u.free,
        }
        for p in profiles
        for u in answers.get(p.name, ([], []))[0]
    ]
    # A profile's Kueue queue: its ClusterQueue's GPU quota, beside the nodes' numbers.
    queues = [
        {
            "cluster": p.name,
            "backend": p.backend,
            "queue": q.queue,
            "cluster_queue": q.cluster_queue,
            "quota": q.quota,
            "used": q.used,
            "free": q.free,
            "pending_workloads": q.pending_workloads,
            "pending_gpus": q.pending_gpus,
        }
        for p in profiles
        for q in answers.get(p.name, ([], []))[1]
    ]
    if output != "table":  # its rows as ever, one per GPU type and queue; the breakdown is the table's
        dump(rows + queues, output)
        return
    answered = [p for p in profiles if p.name in answers]  # the others are a warning already
    breakdown = [] if hide_users or not answered else runs_holding(answered)
    from rich.table import Table  # lazy: rich costs 3x `python -c pass`, for tables only

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("CLUSTER", "GPU TYPE", "NODES", "GPUS", "USED", "FREE"):
        table.add_column(col, justify="left" if col in ("CLUSTER", "GPU TYPE") else "right")
    for r in rows:
        gpu_type = f"{r['gpu_type']} (CPU only)" if not r["gpus"] else r["gpu_type"]
        table.add_row(r["cluster"], gpu_type, str(r["nodes"]), str(r["gpus"]), str(r["used"]), str(r["free"]))
    print_table(table)
    if breakdown:
        print_runs(breakdown)
    if not queues:
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("CLUSTER", "QUEUE", "CLUSTERQUEUE", "GPU QUOTA", "USED", "FREE", "PENDING", "PENDING GPUS"):
        table.add_column(col, justify="left" if col in ("CLUSTER", "QUEUE", "CLUSTERQUEUE") else "right")
    for q in queues:
        table.add_row(
            q["cluster"],
            q["queue"],
            q["cluster_queue"],
            str(q["quota"]),
            str(q["used"]),
            str(q["free"]),
            str(q["pending_workloads"]),
            "-" if q["pending_gpus"] is None else str(q["pending_gpus"]),
        )
    click.echo("")
    print_table(table)


ACTIVE = ("STARTING", "RUNNING", "TERMINATING")
QUEUED = ("PENDING", "QUEUED")


def runs_holding(profiles) -> list[dict]:
    """mcli's util breakdown: each profile's runs that hold GPUs or wait for them."""
    from launcher import sdk
    from launcher.sdk.records import ago

    found = sdk.get_runs(cluster=[p.name for p in profiles], status=[*ACTIVE, *QUEUED])
    for message in found.warnings:
        warn(message)
    out = []
    for r in found:
        scheduling = r.spec.get("scheduling") or {}
        active = r.status.value in ACTIVE
        out.append(
            {
                "cluster": r.cluster or r.backend,
                "run": r.name,
                "state": ("preemptible" if scheduling.get("preemptible") else "active") if active else "queued",
                "status": r.status.value,
                "age": ago(r.created_at),
                "gpus": int((r.spec.get("compute") or {}).get("gpus") or 0),
                "priority": scheduling.get("priority") or "auto",
                "reason": None if active else r.reason,
            }
        )
    return out


def print_runs(breakdown: list[dict]) -> None:
    from rich.table import Table  # lazy: rich costs 3x `python -c pass`, for tables only

    for state, title in (
        ("active", "Active non-preemptible runs"),
        ("preemptible", "Active preemptible runs"),
        ("queued", "Queued runs"),
    ):
        chosen = [b for b in breakdown if b["state"] == state]
        click.echo(f"\n{title}:")
        if not chosen:
            click.echo("  none")
            continue
        table = Table(box=None, pad_edge=False, header_style="bold")
        columns = ["CLUSTER", "RUN", "STATUS", "AGE", "GPUS", "PRIORITY", *(["REASON"] if state == "queued" else [])]
        for col in columns:
            table.add_column(col, justify="right" if col == "GPUS" else "left")
        for b in chosen:
            table.add_row(
                b["cluster"],
                b["run"],
                b["status"],
                b["age"],
                str(b["gpus"]),
                str(b["priority"]),
                *([b["reason"] or "-"] if state == "queued" else []),
            )
        print_table(table)


def versions() -> dict[str, str | None]:
    """launcher's, Python's and each installed library's version (None: not installed)."""

    def installed(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:
            return None

    return {
        "launcher": installed("launcher"),
        "python": f"{platform.python_version()} ({sys.executable})",
        **{dist: installed(dist) for dist in LIBRARIES},
    }


@click.command()
@click.option("-o", "--output", type=FORMATS, default="table", show_default=True)
def config(output):
    """The current cluster profile, the launcher home and the versions of the launcher,
    Python and the libraries runs use. Change the profile with `launcher cluster use`."""
    loaded = load_config()
    current = loaded.profile()
    home = launcher_home()
    found = versions()
    record = {
        "current": {"name": current.name, "backend": current.backend},
        "profiles": [p.name for p in loaded.profiles()],
        "home": str(home),
        "home_from": "LAUNCHER_HOME" if os.environ.get("LAUNCHER_HOME") else "the default (~/.launcher)",
        "config": str(config_path()),
        "versions": found,
    }
    if output != "table":
        dump(record, output)
        return
    echo = click.echo
    echo(f"Profile:   {current.name} ({current.backend} backend)")
    echo(f"Profiles:  {', '.join(record['profiles'])}")
    echo(f"Home:      {home} (from {record['home_from']})")
    echo(f"Config:    {record['config']}" + ("" if config_path().exists() else " (not written yet)"))
    echo("Versions:")
    for name, v in found.items():
        echo(f"  {name:<20}{v or 'not installed'}")


@click.command()
def schema():
    """Print the run YAML's JSON Schema, generated from the spec's models, with mcli's
    older spellings accepted. Point an editor's YAML language server at it:

    \b
      launcher schema > launcher-run.schema.json
      # then, as the first line of a run YAML:
      # yaml-language-server: $schema=./launcher-run.schema.json
    """
    from launcher.spec.schema import run_spec_schema  # lazy: it builds every spec model (pydantic) on each Tab

    click.echo(json.dumps(run_spec_schema(), indent=2))
