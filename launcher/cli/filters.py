"""mcli's run filters, as its `configure_submission_filter_argparser` declares them for
`get runs`, `stop run` and `delete run`: -c/--cluster (-p/--platform), -s/--status,
-t/--gpu-type, -n/--gpu-num, --before, --after and -l/--latest, each list comma-separated
or the option repeated, and mcli's date and time formats."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from launcher.backends.base import RunStatus
from launcher.errors import InputError
from launcher.sdk.runs import parse_status

# mcli's (mcli.utils.utils_cli.date_time_parse): 2023-01-13, 01-13-2023, 12:30:23.4 and the
# dates with such a time; and ours, which people also write: a T between, minutes alone.
DATES = ("%Y-%m-%d", "%m-%d-%Y")
TIMES = ("%H:%M:%S.%f", "%H:%M:%S", "%H:%M")
EXAMPLES = "2026-01-13, 01-13-2026, '2026-01-13 19:20:21', 2026-01-13T19:20 or 15:32:23 (today)"


def parse_time(value: str, *, today: datetime | None = None) -> datetime:
    """A local time (naive) from mcli's formats and ours. A time of day alone is that time
    today: mcli's parser dates it 1900-01-01, which makes `--after 12:30:00` every run ever
    and `--before 12:30:00` none, never what the one who typed it meant."""
    text = value.strip()
    for date_format in DATES:
        for form in (date_format, *(f"{date_format}{sep}{t}" for sep in (" ", "T") for t in TIMES)):
            try:
                return datetime.strptime(text, form)
            except ValueError:
                pass
    for time_format in TIMES:
        try:
            clock = datetime.strptime(text, time_format)
        except ValueError:
            continue
        day = today or datetime.now()
        return day.replace(hour=clock.hour, minute=clock.minute, second=clock.second, microsecond=clock.microsecond)
    try:  # ISO 8601 with an offset, as `get runs -o json` prints times: 2026-01-13T19:20:21+00:00
        return datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{value!r} is not a date or time", hint=f"give e.g. {EXAMPLES}") from None


class TimeParam(click.ParamType):
    name = "DATE/TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value))
        except InputError as e:
            self.fail(f"{e.message}; give e.g. {EXAMPLES}", param, ctx)


TIME = TimeParam()


def comma(values: tuple[str, ...]) -> list[str]:
    """mcli's comma-separated lists, and repeated options: `-s failed,stopped -s pending`."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def gpu_nums(values: tuple[str, ...]) -> list[int]:
    out = []
    for v in comma(values):
        try:
            out.append(int(v))
        except ValueError:
            raise click.BadParameter(f"{v!r} is not a number of GPUs", param_hint="'-n' / '--gpu-num'") from None
    return out


def statuses(values: tuple[str, ...]) -> list[RunStatus]:
    try:
        return [parse_status(s) for s in comma(values)]
    except InputError as e:
        raise click.BadParameter(e.message, param_hint="'-s' / '--status'") from None


@dataclass(frozen=True)
class RunFilters:
    """What mcli's filter options asked for (empty: not given)."""

    clusters: tuple[str, ...] = ()
    statuses: tuple[RunStatus, ...] = ()
    gpu_types: tuple[str, ...] = ()
    gpu_nums: tuple[int, ...] = ()
    before: datetime | None = None
    after: datetime | None = None
    latest: bool = False

    @property
    def narrow(self) -> bool:
        """Whether any filter but --latest was given: then the runs are those `get runs` shows."""
        return bool(self.clusters or self.statuses or self.gpu_types or self.gpu_nums or self.before or self.after)

    def runs(self, names: list[str], *, limit: int | None = None, ids: list[str] | None = None):
        """The runs `get runs NAMES` shows with these filters, newest first (a RunList)."""
        from launcher import sdk

        return sdk.get_runs(
            names,
            cluster=list(self.clusters),
            status=list(self.statuses),
            gpu_type=list(self.gpu_types),
            gpu_num=list(self.gpu_nums),
            before=self.before,
            after=self.after,
            latest=self.latest,
            limit=limit,
            ids=ids,
        )


def run_filter_options(verb: str, *, latest_help: str | None = None):
    """mcli's filter options on a command, handed to it as one `filters` (RunFilters)."""
    options = [
        click.option(
            "-c",
            "--cluster",
            "-p",
            "--platform",
            "clusters",
            multiple=True,
            metavar="CLUSTER",
            help=f"{verb} runs of these cluster profiles (comma-separated or repeated).",
        ),
        click.option(
            "-s",
            "--status",
            "statuses",
            multiple=True,
            metavar="STATUS",
            help=f"{verb} runs with these statuses, e.g. failed,pending (comma-separated or repeated).",
        ),
        click.option(
            "-t",
            "--gpu-type",
            "gpu_types",
            multiple=True,
            metavar="GPU",
            help=f"{verb} runs of these compute.gpu_type values, e.g. a100_80gb ('cpu' for none).",
        ),
        click.option(
            "-n",
            "--gpu-num",
            "gpu_nums",
            multiple=True,
            metavar="N",
            help=f"{verb} runs with these numbers of GPUs (compute.gpus), e.g. 1,8.",
        ),
        click.option(
            "--before",
            type=TIME,
            help=f"{verb} runs created before this local time: {EXAMPLES}.",
        ),
        click.option("--after", type=TIME, help=f"{verb} runs created after this local time (as --before)."),
        click.option(
            "-l", "--latest", is_flag=True, help=latest_help or f"{verb} only the latest run (of those the rest leave)."
        ),
    ]

    def decorate(command):
        @functools.wraps(command)
        def with_filters(*args, **kwargs):
            filters = RunFilters(
                clusters=tuple(comma(kwargs.pop("clusters"))),
                statuses=tuple(statuses(kwargs.pop("statuses"))),
                gpu_types=tuple(comma(kwargs.pop("gpu_types"))),
                gpu_nums=tuple(gpu_nums(kwargs.pop("gpu_nums"))),
                before=kwargs.pop("before"),
                after=kwargs.pop("after"),
                latest=kwargs.pop("latest"),
            )
            return command(*args, filters=filters, **kwargs)

        for option in reversed(options):
            with_filters = option(with_filters)
        return with_filters

    return decorate
