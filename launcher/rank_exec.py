"""Whether a rank's last exec, `bash -c COMMAND` with the run's environment, can happen.

Every backend asks `check_rank_exec` in its check (the spec alone: `validate`, `run
--dry-run` and `run` before any secret is read) and again with the secrets the run gets
(check_secrets: their values are environment too), with what it knows of the rest of
the environment: on this machine the launcher's own, which the ranks inherit; in a pod
nothing (the image's is unknown, launcher.pod.limits.HEADROOM stands for it). The limits
are Linux's (launcher.pod.limits): a run that passes them never fails with "Argument list
too long" or a NUL byte in its first exec. Messages name secrets and variables, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from launcher.errors import FieldError, InputError
from launcher.pod import limits

if TYPE_CHECKING:
    from launcher.secrets.kinds import Secret
    from launcher.spec.models import RunSpec

SHOWN_PARTS = 3


def check_rank_exec(
    spec: RunSpec, secrets: list[Secret], *, inherited: Mapping[str, str], arg_max: int, where: str
) -> None:
    """Raise a FieldError (command, env_variables.NAME) or an InputError (a secret, a variable
    of `where`'s environment) for a string no exec takes, or for a command and environment
    that together pass `arg_max` bytes (ARG_MAX), naming the largest parts."""
    if "\0" in spec.command:
        raise FieldError(
            "command", "holds a NUL byte, which no command line can carry (bash would never see what follows it)"
        )
    if limits.too_long(spec.command):
        raise FieldError(
            "command",
            f"is {limits.size(len(spec.command.encode()))}, longer than the "
            f"{limits.size(limits.MAX_ARG_STRLEN)} Linux passes as one argument "
            "(MAX_ARG_STRLEN): put the script in a file (in the repository or "
            "parameters) and run that",
        )
    parts: list[tuple[int, str]] = [(limits.string_cost(s), "") for s in ("bash", "-c")]
    parts.append((limits.string_cost(spec.command), "the command"))
    environment: dict[str, tuple[str, str]] = {
        k: (v, f"{where}'s environment variable {k}") for k, v in inherited.items()
    }
    for key, value in spec.env_for_run(spec.name).items():
        environment[key] = (
            value,
            f"env_variables.{key}" if key in spec.env_variables else f"environment variable {key} (from the spec)",
        )
    for s in secrets:
        for var, value in _secret_env(s).items():
            environment[var] = (value, f"secret {s.name!r} ({var})")
    for key, (value, label) in environment.items():
        _check_variable(key, value, label)
        parts.append((limits.string_cost(f"{key}={value}"), label))
    total = sum(cost for cost, _ in parts) + limits.HEADROOM
    if total > arg_max:
        largest = sorted((p for p in parts if p[1]), reverse=True)[:SHOWN_PARTS]
        raise InputError(
            f"the command and environment of a rank take {limits.size(total)}, {limits.HEADROOM // 1024} KiB of "
            f"it kept for the variables the launcher and the image add: more than the {limits.size(arg_max)} a "
            "Linux exec accepts (ARG_MAX). The largest parts: "
            + ", ".join(f"{label} {limits.kib(cost)}" for cost, label in largest),
            hint="move large values into files the command reads (a file secret, parameters), or name the "
            "secrets the run needs with `secrets:` in the run YAML",
        )


def _check_variable(key: str, value: str, label: str) -> None:
    def refuse(why: str) -> None:
        if label.startswith("env_variables."):
            raise FieldError(label, why)
        raise InputError(f"{label}: {why}")

    if "\0" in value:
        refuse("holds a NUL byte, which no environment variable can carry")
    if limits.too_long(f"{key}={value}"):
        refuse(
            f"NAME=value is {limits.size(len(f'{key}={value}'.encode()))}, longer than the "
            f"{limits.size(limits.MAX_ARG_STRLEN)} Linux takes of one environment variable (MAX_ARG_STRLEN): "
            "put the value in a file the command reads"
        )


def _secret_env(secret: Secret) -> dict[str, str]:
    """The environment variables `secret` gives a rank, with their values."""
    from launcher.secrets.kinds import project

    proj = project(secret)
    out = {var: secret.data.get(key, "") for var, key in proj.env.items()}
    out.update({var: template.replace("{mount}", proj.mount_path or "") for var, template in proj.plain_env.items()})
    return out
