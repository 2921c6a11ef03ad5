"""What a run argument on the command line means: a full run name, the spec's name
(the latest run of that name), or a glob; with a did-you-mean from recent runs.

A run is named `<sanitized spec name>-<6 characters>`, so `hello`, `Hello` and
`hello-x7k2pq` all lead to the latest run of runspecs/hello.yaml. The submissions
index answers without asking any cluster; a full name it does not know is still
looked up on every profile, for runs submitted from another machine.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from typing import TYPE_CHECKING

from launcher.errors import NotFoundError, RunNotFound
from launcher.spec.names import SUFFIX_LEN, sanitize

if TYPE_CHECKING:
    from launcher.backends.base import Backend, Run

_SUFFIX = re.compile(rf"-[a-z0-9]{{{SUFFIX_LEN}}}$")
RECENT = 50


def is_glob(arg: str) -> bool:
    return any(c in arg for c in "*?[")


def spec_name_of(run_name: str) -> str:
    """The sanitized spec name a run name was made from."""
    return _SUFFIX.sub("", run_name)


def of_spec(arg: str, run_name: str) -> bool:
    """Whether `run_name` is a run of the spec named `arg`."""
    base = sanitize(arg)
    return bool(base) and spec_name_of(run_name) == base and run_name != base


def select(arg: str, names: list[str]) -> list[str]:
    """The names (newest first) `arg` means: itself, every glob match, or the latest run
    of the spec named `arg`."""
    if arg in names:
        return [arg]
    if is_glob(arg):
        return [n for n in names if fnmatch.fnmatch(n, arg)]
    return [n for n in names if of_spec(arg, n)][:1]


def matches(arg: str, run_name: str) -> bool:
    """For listings: `arg` as a name, a glob, or a spec name (every run of it)."""
    return run_name == arg or fnmatch.fnmatch(run_name, arg) or of_spec(arg, run_name)


def suggestion(arg: str, names: list[str]) -> str | None:
    """A did-you-mean among recent run names and their spec names."""
    recent = names[:RECENT]
    candidates = list(dict.fromkeys([spec_name_of(n) for n in recent] + recent))
    guess = difflib.get_close_matches(arg, candidates, n=1, cutoff=0.6)
    if not guess:
        guess = difflib.get_close_matches(sanitize(arg), candidates, n=1, cutoff=0.6)
    return guess[0] if guess else None


def not_found(arg: str, names: list[str], warnings: list[str] | None = None) -> RunNotFound:
    """`warnings`: one line for each cluster profile that could not be asked."""
    guess = suggestion(arg, names)
    hint = f"did you mean {guess!r}? " if guess else ""
    what = "matches" if is_glob(arg) else "named"
    return RunNotFound(f"no run {what} {arg!r}", hint=f"{hint}list runs with `launcher get runs`",
                         warnings=warnings)


def resolve_run(arg: str | None) -> tuple[Backend, Run]:
    """The backend holding the run `arg` means (None: the latest run), and its record."""
    from launcher.backends.registry import RunIndex, find_run

    index = RunIndex()
    if arg is None:
        return find_run(None)
    names = index.names()
    chosen = select(arg, names)
    if chosen:
        return find_run(chosen[0])
    if is_glob(arg):
        raise not_found(arg, names)
    try:
        return find_run(arg)  # a full name from another machine's submissions
    except NotFoundError as e:
        raise not_found(arg, names, e.warnings) from None
