"""Reaching into a run: a command or a shell in a rank, a rank's port on this machine, and
interactive runs (a run that only waits, for a shell in it), as mcli's `interactive` and
`connect`, and Run:ai's `exec` and `port-forward`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from launcher.backends.capabilities import Exec, Feature, PortForward
from launcher.errors import InputError
from launcher.sdk.runs import Run, RunRef, create_run, resolve

if TYPE_CHECKING:
    from launcher.sdk.config import RunConfig

# The sleeper command of an interactive run: the integrations run, then the rank waits out
# max_duration (the backend ends the run there too, whichever comes first).
SLEEPER = "echo 'interactive run: waiting {seconds}s for `launcher connect`'; exec sleep {seconds}"


def exec_in_run(run: RunRef, argv: list[str], rank: int = 0, tty: bool = False) -> int:
    """Run argv in rank `rank` of the run, with its environment (secrets included) and working
    directory, attached to this process's stdin, stdout and stderr (a terminal when tty);
    returns the command's exit code. Waits while the rank is still setting up."""
    backend, record = resolve(run)
    try:
        backend.require(Feature.EXEC)
        # A backend that supports a feature inherits its mixin (capabilities.check_declaration).
        return cast(Exec, backend).exec(record.name, list(argv), rank=rank, tty=tty)
    finally:
        backend.close()


def port_forward(
    run: RunRef,
    rank: int,
    local_port: int,
    remote_port: int,
    *,
    ready: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve rank `rank`'s remote_port on 127.0.0.1:local_port (0: any free port; ready(port)
    is called once it listens) until `stop` is set."""
    backend, record = resolve(run)
    try:
        backend.require(Feature.PORT_FORWARD)
        # A backend that supports a feature inherits its mixin (capabilities.check_declaration).
        cast(PortForward, backend).port_forward(
            record.name, rank=rank, local_port=local_port, remote_port=remote_port, ready=ready, stop=stop
        )
    finally:
        backend.close()


def interactive_config(
    max_duration: float,
    *,
    file: str | None = None,
    gpus: int | None = None,
    cluster: str | None = None,
    image: str | None = None,
    name: str | None = None,
    gpu_type: str | None = None,
    nodes: int | None = None,
) -> RunConfig:
    """The run config of an interactive run: the run YAML `file` (or a bare config named
    `name`, default "interactive") with its command replaced by the sleeper, and
    max_duration (hours) set."""
    import json

    from launcher.sdk.config import RunConfig
    from launcher.spec.load import Overrides

    if not max_duration > 0:
        raise InputError(f"--max-duration must be more than 0, got {max_duration}")
    sleeper = SLEEPER.format(seconds=max(1, round(max_duration * 3600)))
    overrides = Overrides(
        name=name,
        image=image,
        gpus=gpus,
        gpu_type=gpu_type,
        nodes=nodes,
        cluster=cluster,
        max_duration=max_duration,
        set=[f"command={json.dumps(sleeper)}"],
    )  # JSON is YAML: the value as it is
    if file is not None:
        return RunConfig.from_file(file, overrides)
    return RunConfig.from_dict({"name": name or "interactive", "command": sleeper}, overrides)


def create_interactive_run(
    max_duration: float,
    *,
    file: str | None = None,
    gpus: int | None = None,
    cluster: str | None = None,
    image: str | None = None,
    name: str | None = None,
    gpu_type: str | None = None,
    nodes: int | None = None,
) -> Run:
    """Submit an interactive run (interactive_config); get into it with exec_in_run."""
    config = interactive_config(
        max_duration, file=file, gpus=gpus, cluster=cluster, image=image, name=name, gpu_type=gpu_type, nodes=nodes
    )
    return create_run(config, cluster=cluster)
