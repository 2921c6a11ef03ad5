"""Asking every cluster profile at once: a thread per profile, each with a deadline, so an
unreachable cluster costs its connect timeout once and a stalled one becomes a warning;
and the looks built on it (find_run, list_runs, resolve_run).

The backends are opened in the caller's thread before any thread starts (registry.open_backend
imports the backend's class), so the threads only ask."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TypeVar

from launcher.backends.base import Backend, Run
from launcher.backends.listing import RunQuery
from launcher.backends.registry import check_reachable, open_backend
from launcher.config import Profile, load_config
from launcher.errors import ClusterUnreachable, LauncherError, NotFoundError, RunNotFound, StateFileError
from launcher.sdk.index import RunIndex
from launcher.sdk.run_names import is_glob, not_found, select

T = TypeVar("T")


class Answers(dict[str, T]):
    """ask_each's answers, by profile name; `same_place`: each profile left unasked because
    another one asked is the same place (Backend.place), its name -> that profile's name."""

    def __init__(self) -> None:
        super().__init__()
        self.same_place: dict[str, str] = {}


def one_per_place(profiles: list[Profile], backends: dict[str, Backend], prefer: Sequence[str] = ()) -> dict[str, str]:
    """The profile that stands for each profile's place: `backends` whose place() is the same
    are one place (one cluster's namespace, seen through two profiles), stood for by the first
    of them in `prefer` (the current profile; placement's candidates in order), else the
    first by name. A profile whose place is None is a place of its own."""
    rank = {name: i for i, name in enumerate(prefer)}
    stands_for: dict[tuple[str, str], str] = {}
    chosen: dict[str, str] = {}
    for name in sorted((p.name for p in profiles if p.name in backends), key=lambda n: (rank.get(n, len(rank)), n)):
        key = backends[name].place()
        chosen[name] = stands_for.setdefault(("place", key) if key is not None else ("profile", name), name)
    return chosen


def priced(backend: Backend, run: Run) -> Run:
    """`run` with its cluster profile's price per GPU-hour (goodput's cost)."""
    run.price_per_gpu_hour = dict(backend.prices)
    return run


def find_run(name: str | None) -> tuple[Backend, Run]:
    """The backend holding run `name` and its record; None means the latest run. A run
    this machine did not submit is looked for in every profile at once."""
    index = RunIndex()
    if name is None:
        name = index.latest()
        if name is None:
            raise RunNotFound("there are no runs yet", hint="start one with `launcher run -f SPEC`")
    config = load_config()
    recorded = index.profile_of(name)
    candidates = [p for p in config.profiles() if p.name == recorded] if recorded else config.profiles()
    if len(candidates) == 1:
        backend = open_backend(candidates[0])
        return backend, priced(backend, backend.get(name))

    def get_one(backend: Backend) -> tuple[Backend, Run] | None:
        try:
            return backend, priced(backend, backend.get(name))
        except NotFoundError:
            return None

    answers, failed = ask_each(candidates, get_one, prefer=[config.current])
    for profile in candidates:
        found = answers.get(profile.name)
        if found is not None:
            return found
    unasked = [e.message for e in failed.values()]
    if failed and not answers:
        # No profile could be asked: that is the answer, not that the run does not exist.
        first = next(iter(failed.values()))
        raise type(first)(first.message, exit_code=first.exit_code, hint=first.hint, warnings=unasked[1:])
    away = unasked_home(name, failed)
    if away is not None:
        raise away
    # Not found where we could look; each profile we could not ask is a warning.
    raise RunNotFound(f"no run named {name!r}", hint="list runs with `launcher get runs`", warnings=unasked)


def unasked_home(name: str, failed: dict[str, LauncherError]) -> LauncherError | None:
    """The error to give for run `name`, found nowhere that answered, when the profile it
    would be on could not be asked: the one this machine submitted it to (the run index),
    else the current profile. None when that profile answered. Saying "no run named" of
    a run on a cluster that is down would send the user looking for a typo."""
    recorded = RunIndex().profile_of(name)
    home = recorded or load_config().current
    error = failed.get(home)
    if error is None:
        return None
    where = "where it was submitted" if recorded else "the current profile"
    state = "is down" if isinstance(error, ClusterUnreachable) else "did not answer"
    return _failed_as(
        error,
        f"run {name!r} may be on cluster {home} ({where}), which {state}",
        [e.message for n, e in failed.items() if n != home],
    )


def _failed_as(error: LauncherError, why: str, warnings: list[str]) -> LauncherError:
    """A profile's failure, raised as the answer: its message, `why` it is one, and the
    other profiles' failures as warnings."""
    hint = f"{why}; {error.hint}" if error.hint else why
    return type(error)(error.message, exit_code=error.exit_code, hint=hint, warnings=warnings)


# How long one look across every profile waits for the slowest: a stalled cluster becomes a warning.
LIST_SECONDS = 8.0


def ask_each(
    profiles: list[Profile],
    ask: Callable[[Backend], T],
    *,
    seconds: float = LIST_SECONDS,
    opener: Callable[[Profile], Backend] = open_backend,
    prefer: Sequence[str] = (),
) -> tuple[Answers[T], dict[str, LauncherError]]:
    """ask(backend) for every place at once: the answers, and for each profile that failed
    or did not answer within `seconds`, a LauncherError whose message is one line that names
    it. Profiles that are one place (Backend.place) are asked once, through the first of them
    in `prefer`, else by name (one_per_place); the others are in neither, but in the
    answers' `same_place`. The backends are opened here (`opener`), in the caller's thread,
    before any thread starts; each thread first checks that its cluster can be reached at
    all (check_reachable), so an unreachable one costs its connect timeout once, not a turn
    in a queue. Closing a backend is the caller's (ask's) business."""
    answers: Answers[T] = Answers()
    failures: dict[str, BaseException] = {}
    backends: dict[str, Backend] = {}
    for profile in profiles:
        try:
            backends[profile.name] = opener(profile)
        except LauncherError as e:  # a bad profile: reported with the others
            failures[profile.name] = e
    # A profile left unasked (its place is asked through another) has contacted nothing:
    # opening contacts nothing, so there is nothing of it to close.
    stands_for = one_per_place(profiles, backends, prefer)
    answers.same_place = {name: other for name, other in stands_for.items() if other != name}

    def ask_one(profile: Profile) -> None:
        try:
            check_reachable(profile)
            answers[profile.name] = ask(backends[profile.name])
        except BaseException as e:  # noqa: BLE001 - reported below, in the caller's thread
            failures[profile.name] = e

    # Daemon threads: one that hangs on a stalled server must not hold up the process's exit.
    threads = [
        threading.Thread(target=ask_one, args=(p,), name=f"ask-{p.name}", daemon=True)
        for p in profiles
        if stands_for.get(p.name) == p.name
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    failed: dict[str, LauncherError] = {}
    for profile in profiles:
        name = profile.name
        if name in answers or name in answers.same_place:
            continue
        error = failures.get(name)
        if error is None:
            failed[name] = LauncherError(f"cluster {name}: no answer within {seconds:g} s")
            continue
        if not isinstance(error, LauncherError) or isinstance(error, StateFileError):
            raise error  # a bug, or our own state file is broken: not a cluster being away
        message = error.message.splitlines()[0] if error.message else type(error).__name__
        if not message.startswith(f"cluster {name}"):
            message = f"cluster {name}: {message}"
        # A cluster that is away stays one (the SDK's ClusterUnreachable), in the profile's words.
        kind = ClusterUnreachable if isinstance(error, ClusterUnreachable) else LauncherError
        failed[name] = kind(message, exit_code=error.exit_code, hint=error.hint)
    return answers, failed


def list_runs(
    profiles: list[Profile],
    query: RunQuery | None = None,
    *,
    required: Collection[str] = (),
    opener: Callable[[Profile], Backend] = open_backend,
    prefer: Sequence[str] = (),
) -> tuple[list[tuple[Backend, Run]], list[str]]:
    """(backend, run) for the runs of these profiles that `query` wants (None: every run),
    newest first, and one warning per profile that could not be listed. Each backend is
    asked for the query's page, not its whole history; the pages are merged and cut to
    the limit. When not one of them could be listed (one profile that is down, or all of
    them), or one of the `required` profiles could not, that is the error: an empty
    listing would say there are no runs. `opener`: as ask_each's (the dashboard keeps its
    backends open between listings). Profiles that are one place list its runs once, under
    the first of them in `prefer` (the current profile), else the first by name (ask_each)."""
    pairs, failed = listed_runs(profiles, query, opener=opener, prefer=prefer)
    _raise_required(failed, required)
    return pairs, [e.message for e in failed.values()]


def listed_runs(
    profiles: list[Profile],
    query: RunQuery | None = None,
    *,
    opener: Callable[[Profile], Backend] = open_backend,
    prefer: Sequence[str] = (),
) -> tuple[list[tuple[Backend, Run]], dict[str, LauncherError]]:
    """list_runs, with the failure of each profile that could not be listed, by name."""
    query = query or RunQuery()
    withdrawn = RunIndex().withdrawn()  # a run that moved on is listed where it is now

    # The copies withdrawn from a cluster are dropped below: each backend gives as many more.
    asked = replace(query, extra=len(withdrawn))

    def list_one(backend: Backend) -> list[tuple[Backend, Run]]:
        return [(backend, priced(backend, run)) for run in backend.list(asked)]

    answers, failed = _ask_any(profiles, list_one, "listed", opener=opener, prefer=prefer)
    pairs = [
        pair
        for profile in profiles
        for pair in answers.get(profile.name, [])
        if (pair[1].name, profile.name) not in withdrawn
    ]
    pairs.sort(key=lambda pair: pair[1].created_at, reverse=True)
    if query.limit is not None:
        pairs = pairs[: max(query.limit, 0)]
    return pairs, failed


def ask_some(
    profiles: list[Profile],
    ask: Callable[[Backend], T],
    done: str,
    *,
    required: Collection[str] = (),
    opener: Callable[[Profile], Backend] = open_backend,
    prefer: Sequence[str] = (),
) -> tuple[Answers[T], list[str]]:
    """ask_each, when an answer from some profiles is an answer: the answers, and one
    warning per profile that could not be asked. When not one of them could be (one
    profile that is down, or all of them), that is the error: an empty answer would say
    there is nothing; so is a `required` profile that could not be asked (the current
    one, or one the user named). `done`: what was asked of them, for that error ("listed").
    `prefer`: as ask_each's."""
    answers, failed = _ask_any(profiles, ask, done, opener=opener, prefer=prefer)
    _raise_required(failed, required)
    return answers, [e.message for e in failed.values()]


def _raise_required(failed: dict[str, LauncherError], required: Collection[str]) -> None:
    """Raise the failure of the first `required` profile that could not be asked."""
    for name in required:
        if name in failed:
            why = (
                f"cluster {name} is the current profile (`launcher cluster use` chooses another)"
                if name == load_config().current
                else f"cluster {name} was named"
            )
            raise _failed_as(failed[name], why, [e.message for n, e in failed.items() if n != name])


def _ask_any(
    profiles: list[Profile],
    ask: Callable[[Backend], T],
    done: str,
    *,
    opener: Callable[[Profile], Backend] = open_backend,
    prefer: Sequence[str] = (),
) -> tuple[Answers[T], dict[str, LauncherError]]:
    """ask_each, raising when not one profile could be asked; else the answers and the
    failures by profile name."""
    answers, failed = ask_each(profiles, ask, opener=opener, prefer=prefer)
    if failed and not answers:
        errors = list(failed.values())
        if len(errors) == 1:
            raise errors[0]
        # Bad input (a kubeconfig, credentials) everywhere is exit 2; a cluster that is away, 1.
        kind = ClusterUnreachable if all(isinstance(e, ClusterUnreachable) for e in errors) else LauncherError
        raise kind(
            f"none of the {len(errors)} cluster profiles could be {done}",
            exit_code=2 if all(e.exit_code == 2 for e in errors) else 1,
            warnings=[e.message for e in errors],
        )
    return answers, failed


def resolve_run(arg: str | None) -> tuple[Backend, Run]:
    """The backend holding the run `arg` means (None: the latest run), and its record."""
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
        missing = e
    # The start of a run name submitted from another machine: only the listings know it.
    # (Asked only when nothing else matched; a profile that failed is already a warning.)
    config = load_config()
    pairs, _ = list_runs(config.profiles(), prefer=[config.current])
    listed = [r.name for _, r in pairs]
    chosen = select(arg, listed)
    if chosen:
        return next((b, r) for b, r in pairs if r.name == chosen[0])
    raise not_found(arg, list(dict.fromkeys(names + listed)), missing.warnings)
