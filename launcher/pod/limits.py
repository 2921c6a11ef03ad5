"""What a Linux exec accepts of a rank's command and environment.

A rank ends in `bash -c COMMAND` with the run's environment (launcher.entrypoint.main),
in a container or on this machine alike, and the kernel refuses that exec with E2BIG
("Argument list too long") when

  * one argument, or one NAME=value string of the environment, its closing NUL
    included, is longer than MAX_ARG_STRLEN (32 pages: 128 KiB); or
  * all of them together, with a pointer to each, pass the limit the stack allows
    (ARG_MAX: a quarter of the stack's soft limit, at most 6 MiB, at least 128 KiB).

No string of argv or the environment can hold a NUL byte either (it would end it).
The host checks a run against these before it starts anything (the spec's command
and env_variables at load, the secrets' values at submit), so a run never fails in
its first exec; the secret store refuses an env value past MAX_ARG_STRLEN at create.
MAX_ARG_STRLEN itself is defined in launcher.pod.contract, beside the rest of what a rank gets.
"""

from __future__ import annotations

from launcher.pod.contract import MAX_ARG_STRLEN  # the one definition; the secret store checks it at create

POINTER_SIZE = 8
"""What each argument and environment string costs beside its bytes (64-bit)."""
STACK_ARG_MAX_CAP = 6 * 1024 * 1024
"""The kernel never gives arguments and environment more than 3/4 of its 8 MiB _STK_LIM."""
DEFAULT_ARG_MAX = 2 * 1024 * 1024
"""ARG_MAX under the usual 8 MiB stack limit: what a container on a node gets."""
HEADROOM = 32 * 1024
"""Kept for the variables no spec sets and the host does not know of at submit: the
entrypoint's own (rank, world size, master address, PARAMETERS), an image's ENV lines,
git's credential settings."""


def string_cost(text: str) -> int:
    """What one argument or NAME=value string takes of ARG_MAX."""
    return len(text.encode("utf-8", "surrogateescape")) + 1 + POINTER_SIZE


def arg_max_here() -> int:
    """ARG_MAX for a process started from this one (its stack limit is inherited)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    except (ImportError, OSError, ValueError):
        return DEFAULT_ARG_MAX
    if soft == resource.RLIM_INFINITY:
        return STACK_ARG_MAX_CAP
    return max(MAX_ARG_STRLEN, min(STACK_ARG_MAX_CAP, soft // 4))


def too_long(text: str) -> bool:
    """Whether one argument or NAME=value string is longer than an exec takes."""
    return len(text.encode("utf-8", "surrogateescape")) + 1 > MAX_ARG_STRLEN


def kib(n: int) -> str:
    """A byte count in KiB, for a list of parts: 117.2 KiB."""
    return f"{n / 1024:.1f} KiB"


def size(n: int) -> str:
    """A byte count for a message: 131,072 bytes (128.0 KiB)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n:,} bytes ({n / scale:.1f} {unit})"
    return f"{n:,} bytes"
