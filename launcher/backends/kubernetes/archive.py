"""Reading a run's log archive (launcher.pod.logarchive has its layout), for the ranks
whose pods are gone: after a stop, a JobSet restart, a TTL or a delete of the pods.

The record names the archive (`launcher.dev/log-archive`, written at submit from the
profile's log_store) and the secret its credentials come from (`log-archive-secret`): the
reader takes that secret's values from the cluster, as the pods get them, and falls back
to this machine's environment (and, for dbfs:/, the local databricks secret).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

from launcher.backends.kubernetes import keys
from launcher.backends.kubernetes.attempts import annotations_of
from launcher.backends.kubernetes.kubeapi import KubeApi
from launcher.errors import LauncherError
from launcher.pod.logarchive import parse_chunk, parse_rank_dir
from launcher.storage import Credentials, Store, open_store


@dataclass
class Chunk:
    seq: int
    t0_ms: int
    path: str


class LogArchive:
    """One run's archive: its chunks listed once per attempt."""

    def __init__(self, store: Store):
        self.store = store
        self._listed: dict[int, dict[int, list[Chunk]]] = {}

    @property
    def url(self) -> str:
        return self.store.url

    def ranks(self, attempt: int) -> dict[int, list[Chunk]]:
        """rank -> its chunks in order, for one attempt ({} when nothing was archived)."""
        if attempt not in self._listed:
            out: dict[int, list[Chunk]] = {}
            for path in self.store.files(f"attempt-{attempt}"):
                where = parse_rank_dir(posixpath.dirname(path))
                chunk = parse_chunk(posixpath.basename(path))
                if where is None or chunk is None or where[0] != attempt:
                    continue
                out.setdefault(where[1], []).append(Chunk(chunk[0], chunk[1], path))
            for chunks in out.values():
                chunks.sort(key=lambda c: c.seq)
            self._listed[attempt] = out
        return self._listed[attempt]

    def forget(self, attempt: int) -> None:
        """List again on the next read (chunks may have been added since)."""
        self._listed.pop(attempt, None)

    def lines(self, attempt: int, rank: int, *, skip: int = 0) -> Iterator[tuple[int, str]]:
        """(timestamp ns, text) of each line of one rank's archived log, after the first
        `skip` lines. A line's time is its chunk's (when the chunk's first byte was written):
        the archive keeps the bytes as written, without a time per line."""
        pending = b""
        pending_t = 0
        n = 0
        for chunk in self.ranks(attempt).get(rank, []):
            data = self.store.read(chunk.path)
            if not data:
                continue
            t_ns = chunk.t0_ms * 1_000_000
            parts = (pending + data).split(b"\n")
            first_t = pending_t if pending else t_ns
            pending = parts.pop()
            for i, raw in enumerate(parts):
                if n >= skip:
                    yield (first_t if i == 0 else t_ns), raw.decode("utf-8", errors="replace")
                n += 1
            pending_t = first_t if not parts else t_ns
        if pending and n >= skip:
            yield pending_t, pending.decode("utf-8", errors="replace")


def open_archive(api: KubeApi, record: dict | None) -> LogArchive | None:
    """The run's archive, or None when it was submitted without a log_store."""
    ann = annotations_of(record)
    url = ann.get(keys.RECORD_LOG_ARCHIVE)
    if not url:
        return None
    return LogArchive(
        open_store(
            url, store_credentials(api, url, ann.get(keys.RECORD_LOG_ARCHIVE_SECRET)), what=f"the log archive {url}"
        )
    )


def store_credentials(api: KubeApi, url: str, secret_name: str | None) -> Credentials:
    """The credentials for a profile's store (log_store, code_store) on this machine: the
    values of its secret in the cluster, as the pods get them, over this machine's environment
    (and, for dbfs:/, the local databricks secret)."""
    env: dict[str, str] = dict(os.environ)
    if secret_name:
        env.update(_secret_env(api, secret_name))
    if url.startswith("dbfs:/"):
        from launcher.data.credentials import local_credentials

        return local_credentials(url, env)
    return Credentials(env)


def _secret_env(api: KubeApi, name: str) -> dict[str, str]:
    """The env vars the secret gives a pod (its values), where this identity may read it."""
    from launcher.backends.kubernetes.secrets import KubernetesSecretStore
    from launcher.secrets.kinds import SecretKind, project

    try:
        secret = next((s for s in KubernetesSecretStore(api.profile, api=api).list() if s.name == name), None)
    except LauncherError:
        return {}  # not allowed to read it: this machine's own credentials may do
    if secret is None:
        return {}
    p = project(secret)
    env = {var: secret.data[key] for var, key in p.env.items() if key in secret.data}
    if secret.kind is SecretKind.S3:
        env.update(_s3_env(secret.data))
    return env


def _s3_env(data: dict[str, str]) -> dict[str, str]:
    """An s3 secret reaches a pod as files (credentials, config) that boto3 reads; here
    their default profile becomes the variables S3Store reads."""
    import configparser

    env = {}
    creds = configparser.ConfigParser()
    creds.read_string(data.get("credentials", ""))
    section = creds["default"] if creds.has_section("default") else {}
    for var, key in (
        ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        ("AWS_SESSION_TOKEN", "aws_session_token"),
    ):
        if section.get(key):
            env[var] = section[key]
    config = configparser.ConfigParser()
    config.read_string(data.get("config", ""))
    section = config["default"] if config.has_section("default") else {}
    if section.get("endpoint_url"):
        env["S3_ENDPOINT_URL"] = section["endpoint_url"]
    if section.get("region"):
        env["AWS_DEFAULT_REGION"] = section["region"]
    return env
