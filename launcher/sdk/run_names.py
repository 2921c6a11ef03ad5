"""What a run argument on the command line means: a full run name, the spec's name
(the latest run of that name), a glob, or a unique prefix of a run name; with a
did-you-mean from recent runs.

A run is named `<sanitized spec name>-<6 characters>`, so `hello`, `Hello` and
`hello-x7k2pq` all lead to the latest run of runspecs/hello.yaml, and `hello-x7`
(a prefix only one run name has) to that run. A prefix more than one run name has
is an error listing them (exit 2), not a guess. The submissions index answers
without asking any cluster; a full name it does not know is still looked up on
every profile, for runs submitted from another machine.

launcher.sdk.fanout.resolve_run is the one resolver: every command that takes one run name,
and the SDK's get_run, call it; `select` is what commands that take several use.
"""

from __future__ import annotations

import difflib
import fnmatch

from launcher.backends.listing import is_glob, name_matches, of_spec, spec_name_of
from launcher.errors import InputError, RunNotFound
from launcher.spec.names import sanitize

__all__ = ["ambiguous", "is_glob", "matches", "not_found", "of_spec", "select", "spec_name_of", "suggestion"]

RECENT = 50


# How many of an ambiguous prefix's matches the error lists.
SHOWN_MATCHES = 10


def ambiguous(arg: str, matched: list[str]) -> InputError:
    shown = ", ".join(matched[:SHOWN_MATCHES]) + (
        f" and {len(matched) - SHOWN_MATCHES} more" if len(matched) > SHOWN_MATCHES else ""
    )
    spec_names = {spec_name_of(n) for n in matched}
    hint = "type more of the name"
    if len(spec_names) == 1:
        hint += f", or the spec name {next(iter(spec_names))!r} for its latest run"
    return InputError(f"{arg!r} is the start of {len(matched)} run names: {shown}", hint=hint)


def select(arg: str, names: list[str]) -> list[str]:
    """The names (newest first) `arg` means: itself, every glob match, the latest run of
    the spec named `arg`, or the one run name that starts with `arg`. Raises InputError
    when `arg` is the start of several run names."""
    if arg in names:
        return [arg]
    if is_glob(arg):
        return [n for n in names if fnmatch.fnmatch(n, arg)]
    latest = [n for n in names if of_spec(arg, n)][:1]
    if latest:
        return latest
    start = arg.lower()  # run names are lowercase (sanitize), as their spec names match either case
    started = [n for n in names if n.startswith(start)]
    if len(started) > 1:
        raise ambiguous(arg, started)
    return started


matches = name_matches
"""For listings: `arg` as a name, a glob, or a spec name (every run of it)."""


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
    return RunNotFound(f"no run {what} {arg!r}", hint=f"{hint}list runs with `launcher get runs`", warnings=warnings)
