"""How every launcher.mcli call runs: mcli's `timeout=` and `future=`, and the launcher's
errors raised as mcli's.

mcli runs each request in a thread: `future=True` returns the
concurrent.futures.Future at once, otherwise the caller waits at most `timeout` seconds
(None: as long as it takes) and gets a TimeoutError past it, the request going on in the
background as a request to mcli's server does. Generators (logs, status watches) yield
one item, or one Future of it, at a time.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from launcher.mcli.exceptions import translated

T = TypeVar("T")


def _in_thread(fn: Callable[[], T]) -> Future[T]:
    """fn() in a daemon thread of its own, as a Future: a call the caller gave up on (its
    timeout passed) never keeps the interpreter from exiting, as a pool's thread would."""
    f: Future[T] = Future()
    f.set_running_or_notify_cancel()

    def run() -> None:
        try:
            f.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - the Future holds it for result() to raise
            f.set_exception(e)

    threading.Thread(target=run, daemon=True, name="launcher-mcli").start()
    return f


def _translating(fn: Callable[[], T]) -> Callable[[], T]:
    def call() -> T:
        with translated():
            return fn()

    return call


def call(fn: Callable[[], T], *, timeout: float | None, future: bool) -> Any:
    """fn() as mcli runs a request: its Future where `future`, else its result within `timeout` seconds."""
    submitted = _in_thread(_translating(fn))
    if future:
        return submitted
    return _result(submitted, timeout)


def _result(f: Future[T], timeout: float | None) -> T:
    try:
        return f.result(timeout)
    except FutureTimeout:
        if f.done():  # the call's own TimeoutError (a wait that ran out), not ours
            raise
        raise TimeoutError(f"the call did not complete within {timeout:g} s") from None


def stream(items: Iterator[T], *, timeout: float | None, future: bool) -> Iterator[Any]:
    """The items of a generator, each within `timeout` seconds of the one before (None: no
    limit); with `future`, a Future of each (as mcli's, the one after the last raises
    StopAsyncIteration from result()). The launcher's errors are raised as mcli's."""
    it = _translated_iter(items)
    if future:
        yield from _futures(it)
    elif timeout is None:
        yield from it
    else:
        yield from _within(it, timeout)


def _futures(it: Iterator[T]) -> Iterator[Future[Any]]:
    previous: Future[Any] | None = None
    while previous is None or previous.exception() is None:  # the end, or an error its Future holds
        previous = _in_thread(lambda: _next(it))
        yield previous


def _within(it: Iterator[T], timeout: float) -> Iterator[T]:
    """The items, read ahead by a daemon thread, each within `timeout` seconds of the last."""
    items: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1024)

    def produce() -> None:
        try:
            for item in it:
                items.put(("item", item))
            items.put(("end", None))
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
            items.put(("error", e))

    threading.Thread(target=produce, daemon=True, name="launcher-mcli-stream").start()
    while True:
        try:
            kind, value = items.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"nothing came within {timeout:g} s") from None
        if kind == "end":
            return
        if kind == "error":
            raise value
        yield value


def _next(it: Iterator[T]) -> T:
    try:
        return next(it)
    except StopIteration:
        raise StopAsyncIteration from None


def _translated_iter(items: Iterator[T]) -> Iterator[T]:
    with translated():
        yield from items
