"""List, then watch from the list's resourceVersion, keeping a local copy of the objects.

A watch that answers 410 Gone (the version was compacted away) or breaks is
followed by a fresh list: the copy is replaced, never patched from a gap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from launcher.backends.kubernetes.kubeapi import KubeApi, WatchHandle, status_of


class Informer:
    def __init__(self, api: KubeApi, kind: str, labels: str, on_change: Callable[[], None], *,
                 watch_seconds: int = 60):
        self.api, self.kind, self.labels = api, kind, labels
        self.on_change = on_change
        self.watch_seconds = watch_seconds
        self.objects: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.error: Exception | None = None
        self.relists = 0
        self._handle = WatchHandle()
        self._thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._handle.stop()

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
        self.synced.set()
        self.on_change()
        return rv

    def _run(self) -> None:
        delay = 0.2
        while not self._handle.stopped:
            try:
                rv = self._relist()
                while not self._handle.stopped:
                    for event in self.api.watch(self.kind, labels=self.labels, resource_version=rv,
                                                stopper=self._handle, timeout=self.watch_seconds):
                        obj = event.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if event.get("type") == "BOOKMARK":
                            continue
                        name = obj["metadata"]["name"]
                        with self.lock:
                            if event["type"] == "DELETED":
                                self.objects.pop(name, None)
                            else:
                                self.objects[name] = obj
                        self.on_change()
                delay = 0.2
            except ApiException as e:
                if status_of(e) == 410:
                    self.relists += 1  # too old: list again, resume from the new version
                    continue
                self.error = e
            except Exception as e:  # noqa: BLE001 - a broken stream: list again after a pause
                self.error = e
            if self._handle.stopped:
                return
            self.relists += 1
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
