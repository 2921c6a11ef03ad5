"""How every launcher.mcli call runs: mcli's `timeout=` and `future=`, and the launcher's
errors raised as mcli's.

mcli runs each request in a thread pool: `future=True` returns the
concurrent.futures.Future at once, otherwise the caller waits at most `timeout` seconds
(None: as long as it takes) and gets a TimeoutError past it, the request going on in the
background as a request to mcli's server does. Generators (logs, status watches) yield
one item, or one Future of it, at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from launcher.mcli.exceptions import translated

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="launcher-mcli")
        return _POOL


def _translating(fn: Callable[[], T]) -> Callable[[], T]:
    def call() -> T:
        with translated():
            return fn()

    return call


def call(fn: Callable[[], T], *, timeout: float | None, future: bool) -> Any:
    """fn() as mcli runs a request: its Future where `future`, else its result within `timeout` seconds."""
    submitted = _pool().submit(_translating(fn))
    if future:
        return submitted
    return submitted.result(timeout)


def done(value: T) -> Future[T]:
    """A Future that holds `value` already (a generator's item with future=True)."""
    f: Future[T] = Future()
    f.set_result(value)
    return f


def stream(items: Iterator[T], *, timeout: float | None, future: bool) -> Iterator[Any]:
    """The items of a generator, each within `timeout` seconds of asking; with `future`,
    a Future of each (as mcli's, the one after the last raises StopAsyncIteration from
    result()). The launcher's errors are raised as mcli's."""
    it = _translated_iter(items)
    previous: Future[Any] | None = None
    while True:
        if previous is not None and previous.exception() is not None:
            return  # the end, or an error that the Future yielded already holds
        nxt: Future[Any] = _pool().submit(_next, it)
        if future:
            previous = nxt
            yield nxt
            continue
        try:
            yield nxt.result(timeout)
        except StopAsyncIteration:
            return


def _next(it: Iterator[T]) -> T:
    try:
        return next(it)
    except StopIteration:
        raise StopAsyncIteration from None


def _translated_iter(items: Iterator[T]) -> Iterator[T]:
    with translated():
        yield from items
