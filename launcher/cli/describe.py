"""`launcher describe run [NAME]`."""

from __future__ import annotations

from datetime import datetime

import click

from launcher.cli.common import (
    NounGroup,
    complete_run_names,
    dump,
    duration,
    find_run,
    instance,
    run_record,
    to_yaml,
    when,
)
from launcher.cli.exec import port_forward_command
from launcher.sdk.placement import placement_of
from launcher.sdk.records import mfu_text, resumed_record, run_duration, tokens_per_sec_text, until
from launcher.spec.retry import CRASH_SECONDS, USER, RetryPolicy, retry_class, seconds_text


@click.group(cls=NounGroup, default="run", invoke_without_command=True, subcommand_metavar="[run|cluster] [NAME]")
@click.pass_context
def describe(ctx):
    """Show details of a run or a cluster profile. `describe NAME` is short for `describe run NAME`."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(describe_run)


@describe.command("run")
@click.argument("name", required=False, shell_complete=complete_run_names)
@click.option("--yaml-only", is_flag=True, help="Print only the spec as submitted.")
@click.option("--no-yaml", is_flag=True, help="Leave the submitted spec out (in -o json/yaml too).")
@click.option("-o", "--output", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
def describe_run(name, yaml_only, no_yaml, output):
    """The spec as submitted, the statuses with times, per-rank exit codes and the reason.
    NAME is a run name, a spec name (its latest run), a glob or the start of one run's name;
    without it, the latest run."""
    if yaml_only and no_yaml:
        raise click.UsageError("--yaml-only prints only the spec and --no-yaml leaves it out: pass one of them")
    backend, run = find_run(name)

    placement = placement_of(run.name)
    if yaml_only:
        dump(run.spec, "yaml")
        return
    from launcher.sdk.metrics import with_throughput

    with_throughput(backend, run)  # its goodput's tokens/s and MFU, from its metric records
    if output != "text":
        record = run_record(run)
        if no_yaml:
            record.pop("spec", None)
        if placement is not None:
            record["placement"] = {k: v for k, v in placement.items() if k not in ("spec", "cwd", "allow_files")}
        dump(record, output)
        return
    echo = click.echo
    echo(f"Run:        {run.name}")
    echo(f"Status:     {run.status.value}" + (f" ({run.reason})" if run.reason else ""))
    if run.exit_code is not None:
        echo(f"Exit code:  {run.exit_code}")
    echo(
        f"Backend:    {run.backend}"
        + (f" (cluster {run.cluster})" if run.cluster and run.cluster != run.backend else "")
    )
    echo(f"Image:      {run.spec.get('image', '-')}")
    echo(f"Compute:    {instance(run.spec)}")
    snapshot = run.spec.get("code")
    if isinstance(snapshot, dict) and snapshot.get("digest"):  # the snapshot each rank checked before unpacking
        echo(f"Code:       {snapshot['digest']} (snapshot of {snapshot.get('path', '.')})")
    echo(f"Created:    {when(run.created_at)}")
    echo(f"Started:    {when(run.started_at)}")
    echo(f"Ended:      {when(run.ended_at)}")
    echo(f"Duration:   {run_duration(run)}")
    goodput = run.goodput()
    echo(f"Goodput:    {goodput_line(goodput)}")
    policy = RetryPolicy.from_spec(run.spec)
    if policy.max_retries or len(run.attempts) > 1:
        echo(f"Retries:    up to {policy.max_retries}; backoff {run.backoff or policy.describe_backoff()}")
    if run.retry_at is not None:
        echo(f"Next retry: attempt {run.current_attempt + 1} at {when(run.retry_at)} ({until(run.retry_at)})")
    last = run.last_failure
    if last is not None:
        echo(f"Failure:    {last.failure_class} in attempt {last.index}: {last.evidence or '-'}")
    for off in run.excluded_nodes:
        why = f"{off['class']} in attempt {off['attempt']}: {off.get('evidence') or '-'}"
        echo(f"Excluded:   node {off['node']} ({why})")
    if run.crash_loop:
        ended = sum(1 for a in run.attempts if a.status.is_terminal)
        echo(f"Crash loop: each of its {ended} attempts failed within {seconds_text(CRASH_SECONDS)} of starting")
    if run.queue is not None:
        echo("")
        queue_section(run, echo)
    echo("")
    previous = None
    for a in run.attempts:
        head = f"Attempt {a.index}: {a.status.value}"
        if a.reason:
            head += f" ({a.reason})"
        if previous is not None and previous.ended_at and a.started_at:
            waited = max(0.0, (a.started_at - previous.ended_at).total_seconds())
            head += f", started {waited:.1f} s after attempt {previous.index} ended"
        previous = a
        echo(head)
        if a.failure_class:
            counted = "a system failure" if retry_class(a.failure_class) != USER else "a user failure"
            echo(f"  Failure: {a.failure_class} ({counted}): {a.evidence or '-'}")
        resumed = resumed_record(run, a)
        if resumed is not None:
            at = f" (step {resumed['step']})" if resumed["step"] is not None else ""
            lost = f"; {resumed['steps_lost']} steps lost" if resumed["steps_lost"] is not None else ""
            echo(f"  Resumed: from {resumed['from']}{at}{lost}")
        for line in a.stragglers:
            echo(f"  Straggler: {line.removeprefix('straggler: ')}")
        echo(f"  {'RANK':<6}{'NODE':<24}{'STATUS':<12}{'EXIT CODE':<11}REASON")
        for r in a.ranks:
            code = "-" if r.exit_code is None else str(r.exit_code)
            echo(f"  {r.rank:<6}{(r.node or '-'):<24}{r.status.value:<12}{code:<11}{r.reason or ''}")
    echo("")
    goodput_section(goodput, echo)
    if placement is not None:
        echo("")
        _placement_section(placement, echo)
    echo("")
    echo("Events:")
    for e in run.events:
        echo(f"  {when(e.at)}  attempt {e.attempt}  {e.status.value:<12}{e.reason or ''}")
    ports = [p for p in run.spec.get("ports") or [] if isinstance(p, dict) and p.get("port")]
    if ports:
        echo("")
        echo("Ports:")
        for p in ports:
            label = f"{p['port']} ({p['name']})" if p.get("name") else str(p["port"])
            echo(f"  {label:<22}{port_forward_command(run.name, p['port'])}")
    if no_yaml:
        return
    echo("")
    echo("Submitted spec:")
    for line in to_yaml(run.spec).splitlines():
        echo(f"  {line}")


def goodput_line(g) -> str:
    """One line: the productive share, GPU-hours and cost (launcher.backends.goodput)."""
    share = "-" if g.goodput is None else f"{g.goodput:.0%}"
    cost = f", ${g.cost:,.2f}" if g.cost is not None else ""
    speed = "".join(
        f"; {text}"
        for text, known in ((f"{tokens_per_sec_text(g)} tokens/s", g.tokens_per_sec), (f"MFU {mfu_text(g)}", g.mfu))
        if known is not None
    )
    return f"{share} productive of {_span(g.wall)}; {g.gpu_hours:.2f} GPU-hours{cost}{speed}"


def _span(seconds: float) -> str:
    whole = round(seconds)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def goodput_section(g, echo) -> None:
    """Where the wall time went, part by part, and what it cost."""
    from launcher.backends.goodput import PARTS

    echo("Goodput:")
    for part in PARTS:
        seconds = getattr(g, part)
        share = f"{seconds / g.wall:.0%}" if g.wall > 0 else "-"
        echo(f"  {part + ':':<13}{_span(seconds):>9}  {share:>4}")
    gpus = f"{g.gpus} x {g.gpu_type}" if g.gpu_type else f"{g.gpus}"
    echo(f"  GPU-hours:   {g.gpu_hours:.2f} ({gpus} GPUs)")
    if g.cost is not None:
        echo(f"  Cost:        ${g.cost:,.2f} at ${g.price_per_gpu_hour:g} per GPU-hour")
    elif g.gpus:
        echo("  Cost:        - (no price_per_gpu_hour for this gpu_type in the cluster profile)")
    # Composer's SpeedMonitor records (launcher.metrics.throughput); "-": the trainer logged none.
    echo(f"  Tokens/s:    {tokens_per_sec_text(g)}")
    echo(f"  MFU:         {mfu_text(g)}")


def queue_section(run, echo) -> None:
    """Where the run stands in its cluster's queue (Kueue): its queues, its place among the
    pending workloads, Kueue's reason, the time in queue, and what evicted it."""
    q = run.queue
    echo("Queue:")
    echo(f"  LocalQueue:    {q.queue}")
    echo(f"  ClusterQueue:  {q.cluster_queue or '-'}")
    if q.workload:
        echo(f"  Workload:      {q.workload}" + (" (admitted)" if q.admitted else ""))
    if q.position:
        place = f"{q.position} of {q.pending} pending in {q.queue}"
        if q.position_in_cluster_queue:
            place += f", {q.position_in_cluster_queue} in {q.cluster_queue or 'its ClusterQueue'}"
        echo(f"  Position:      {place}" + (f" (from {q.position_from})" if q.position_from else ""))
    if q.reason:
        echo(f"  Reason:        {q.reason}")
    if q.since is not None and not q.admitted:
        echo(f"  In queue:      {duration(q.since, None)} (since {when(q.since)})")
    for e in q.evictions:
        times = f"{e.count} time{'s' if e.count != 1 else ''}"
        at = f", last at {when(e.at)}" if e.at else ""
        echo(
            f"  Evicted:       {e.reason}, {times}{at}"
            + (f": {e.message}" if e.message else "")
            + " (not counted against max_retries)"
        )


def _placement_section(state: dict, echo) -> None:
    """Where a run placed across clusters went, and each move (launcher.sdk.placement)."""
    max_queue = state.get("max_queue")
    echo(
        f"Placement:  {', '.join(state['candidates'])}"
        + (f"; moves on after {seconds_text(max_queue)} waiting (placement.max_queue)" if max_queue else "")
    )
    echo(f"  {state.get('decision', '')}")
    for move in state.get("moves") or []:
        at = when(datetime.fromisoformat(move["at"]))
        if move.get("withdrawn"):
            echo(
                f"  {at}  attempt {move['attempt']} on {move['from']}: withdrawn there ({move['why']}); "
                f"moved to {move['to']}"
            )
        elif move.get("to"):
            echo(f"  {at}  {move['why']}: submitted to {move['to']}")
        else:
            echo(
                f"  {at}  attempt {move['attempt']} on {move['from']}: withdrawn there ({move['why']}); "
                "no other cluster could take it"
            )
    echo(
        f"  now: attempt {state['attempt']} on {state['profile']}"
        + ("; no cluster left to move to" if state.get("exhausted") else "")
    )


@describe.command("cluster")
@click.argument("name", required=False)
@click.option("-o", "--output", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
def describe_cluster(name, output):
    """A cluster profile (default: the current one): its backend and settings, and what it
    has now, asked of it: nodes, GPUs, used and free per GPU type (as `launcher util`), and
    its Kueue queue's quota. A cluster that cannot be asked is a warning; its settings stay.

    \b
    Examples:
      launcher describe cluster
      launcher describe cluster local -o json
    """
    from launcher.backends.registry import profile_namespace
    from launcher.cli.util import usage_of
    from launcher.config import load_config

    config = load_config()
    profile = config.profile(name)  # NotFoundError (exit 2) listing the known ones
    answer = usage_of([profile]).get(profile.name)
    gpus = [
        {"gpu_type": u.gpu_type, "nodes": u.nodes, "gpus": u.gpus, "used": u.used, "free": u.free}
        for u in (answer[0] if answer else [])
    ]
    queues = [
        {"queue": q.queue, "cluster_queue": q.cluster_queue, "quota": q.quota, "used": q.used, "free": q.free}
        for q in (answer[1] if answer else [])
    ]
    record = {
        "name": profile.name,
        "backend": profile.backend,
        "current": profile.name == config.current,
        "namespace": profile_namespace(profile),
        "settings": {k: v for k, v in sorted(profile.settings.items()) if k != "backend"},
        "reachable": answer is not None,
        "gpus": gpus,
        "queues": queues,
    }
    if output != "text":
        dump(record, output)
        return
    echo = click.echo
    echo(f"Cluster:    {profile.name}" + (" (current)" if record["current"] else ""))
    echo(f"Backend:    {profile.backend}")
    if record["namespace"]:
        echo(f"Namespace:  {record['namespace']}")
    if record["settings"]:
        echo("Settings:")
        for line in to_yaml(record["settings"]).splitlines():
            echo(f"  {line}")
    if answer is None:
        echo("GPUs:       unknown (the cluster could not be asked)")
        return
    echo(f"Nodes:      {sum(g['nodes'] for g in gpus)}")
    echo(f"GPUs:       {sum(g['gpus'] for g in gpus)} ({sum(g['free'] for g in gpus)} free)")
    for g in gpus:
        kind = f"{g['gpu_type']} (CPU only)" if not g["gpus"] else g["gpu_type"]
        echo(f"  {kind}: {g['nodes']} node(s), {g['gpus']} GPUs, {g['used']} used, {g['free']} free")
    for q in queues:
        echo(
            f"Queue:      {q['queue']} (ClusterQueue {q['cluster_queue']}): quota {q['quota']}, {q['used']} used, "
            f"{q['free']} free"
        )
