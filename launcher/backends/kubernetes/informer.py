"""List, then watch from the list's resourceVersion, keeping a local copy of the objects.

As client-go's reflector does:
  * a watch that the server ends (its timeout) resumes from the last resourceVersion
    seen, bookmarks included, without a new list;
  * an ERROR event or an answer of 410 Gone (the version was compacted away) is
    followed at once by a fresh list: the copy is replaced, never patched across a gap;
  * any other failure (a broken stream, a 5xx, a refused connection) is retried after
    a backoff that doubles up to a cap, and starts small again after a success.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from launcher.backends.kubernetes.kubeapi import KubeApi, KubeError, WatchHandle
from launcher.errors import LauncherError
from launcher.pod.backoff import Backoff

BACKOFF_FIRST = 0.2
BACKOFF_MAX = 5.0
SYNC_SECONDS = 30.0


class Informer:
    def __init__(self, api: KubeApi, kind: str, labels: str, on_change: Callable[[], None], *, watch_seconds: int = 60):
        self.api, self.kind, self.labels = api, kind, labels
        self.on_change = on_change
        self.watch_seconds = watch_seconds
        self.objects: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.error: Exception | None = None
        """The last failure, kept until the next success (why an informer never synced)."""
        self.relists = 0
        self.expired = 0
        """How many watches ended with 410 Gone."""
        self.backoff = Backoff(BACKOFF_FIRST, BACKOFF_MAX)
        self._handle = WatchHandle()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._handle.stop()
        self._wake.set()

    def wait_synced(self, doing: str, seconds: float = SYNC_SECONDS) -> None:
        """Return once the first list has arrived; raise, saying why, when it failed (the
        API layer has already retried it) or did not come in `seconds`."""
        deadline = time.monotonic() + seconds
        while not self.synced.wait(0.05):
            error = self.error
            if error is not None:
                message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
                raise LauncherError(
                    f"{message}; so cannot {doing}",
                    exit_code=getattr(error, "exit_code", 1),
                    hint=getattr(error, "hint", None),
                )
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"cluster {self.api.profile.name}: cannot {doing}: listing its {self.kind}s "
                    f"got no answer in {seconds:.0f} s"
                )

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.objects.values())

    def get(self, name: str) -> dict | None:
        with self.lock:
            return self.objects.get(name)

    def _relist(self) -> str:
        items, rv = self.api.list(self.kind, labels=self.labels)
        with self.lock:
            self.objects = {o["metadata"]["name"]: o for o in items}
        self.relists += 1
        self.error = None
        self.synced.set()
        self.on_change()
        return rv

    def _apply(self, event: dict) -> None:
        obj = event["object"]
        name = obj["metadata"]["name"]
        with self.lock:
            if event["type"] == "DELETED":
                self.objects.pop(name, None)
            else:
                self.objects[name] = obj
        self.on_change()

    def _run(self) -> None:
        backoff = self.backoff
        rv: str | None = None
        while not self._handle.stopped:
            try:
                if rv is None:
                    rv = self._relist()
                    backoff.reset()
                opened, events = time.monotonic(), 0
                for event in self.api.watch(
                    self.kind, labels=self.labels, resource_version=rv, stopper=self._handle, timeout=self.watch_seconds
                ):
                    rv = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") != "BOOKMARK":
                        self._apply(event)
                    events += 1
                    backoff.reset()
                # The server ended the watch: resume from rv. One that ends at once, empty,
                # is no success (a proxy cutting streams): it must not spin.
                if events or time.monotonic() - opened >= 1.0:
                    backoff.reset()
                    continue
            except KubeError as e:
                if self._handle.stopped:
                    return
                if e.status == 410:
                    self.expired += 1
                    rv = None  # too old: list again at once, and resume from the new version
                    continue
                self.error = e
            except Exception as e:  # noqa: BLE001 - a bug must not kill the thread silently
                self.error = e
                rv = None
            self._wake.wait(backoff.next())
