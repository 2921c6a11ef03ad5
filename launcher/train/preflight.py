"""Checks that run before any weight is built, each failing with one clear line.

For every dataset the trainer reads: the credentials its scheme needs are
present; its split directory holds an index.json; the sidecar written by
`launcher data convert` is there and agrees with the model (token dtype,
sequence length, vocabulary). The sidecar is the only source of the dtype and
sequence length: the trainer never guesses them.

Remote reads use short timeouts (the Databricks SDK retries a dead host for
five minutes by default) so that a wrong host fails in seconds.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.data.format import SIDECAR_NAME
from launcher.errors import InputError

INDEX = "index.json"
# Seconds: long enough for a slow but live endpoint, short enough to fail fast on a wrong one.
PREFLIGHT_RETRY_TIMEOUT_S = 10
PREFLIGHT_HTTP_TIMEOUT_S = 10


class PreflightError(InputError):
    """A dataset or credential problem found before training starts (exit 2)."""


@dataclass(frozen=True)
class DatasetInfo:
    """One split the trainer will stream, with what its sidecar says."""

    remote: str | None
    """Passed to StreamingDataset as remote (None: read `local` in place)."""
    local: str | None
    split: str
    dtype: str
    seq_len: int
    vocab_size: int | None
    samples: int | None

    @property
    def where(self) -> str:
        return join(self.remote or self.local or "", self.split)


def join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for p in parts:
        out += "/" + p.strip("/")
    return out


def scheme_of(uri: str) -> str:
    if uri.startswith("dbfs:/"):
        return "dbfs"
    if "://" in uri:
        return uri.split("://", 1)[0].lower()
    return "local"


# ---------------------------------------------------------------- stores


class _Store:
    """Reads small files next to a dataset. `read` returns None when the file is missing."""

    def read(self, uri: str) -> bytes | None:
        raise NotImplementedError

    def describe(self, uri: str) -> str:
        return uri


class _LocalStore(_Store):
    def read(self, uri: str) -> bytes | None:
        p = Path(uri)
        try:
            return p.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            return None

    def describe(self, uri: str) -> str:
        return str(Path(uri).resolve())


class _DatabricksStore(_Store):
    """dbfs:/Volumes/... through the Files API, as streaming reads it (databricks-sdk)."""

    def __init__(self, example_uri: str, env: dict[str, str]):
        from launcher.data.workspace import workspace_client

        try:
            # A run's credentials come with the run (its databricks secret), never from this
            # machine's secret store.
            self.client = workspace_client(
                example_uri,
                env,
                secret_store=False,
                retry_timeout_seconds=PREFLIGHT_RETRY_TIMEOUT_S,
                http_timeout_seconds=PREFLIGHT_HTTP_TIMEOUT_S,
            )
        except InputError as e:
            raise PreflightError(e.message) from None
        self.host = (self.client.config.host or env.get("DATABRICKS_HOST", "")).rstrip("/")

    @staticmethod
    def _path(uri: str) -> str:
        return "/" + uri[len("dbfs:/") :].lstrip("/")

    def describe(self, uri: str) -> str:
        return f"{self.host}/api/2.0/fs/files{urllib.parse.quote(self._path(uri))}"

    def read(self, uri: str) -> bytes | None:
        from databricks.sdk.errors import DatabricksError, NotFound, PermissionDenied, Unauthenticated

        try:
            resp = self.client.files.download(self._path(uri))
            with resp.contents as f:
                return f.read()
        except NotFound:
            return None
        except Unauthenticated:
            raise PreflightError(
                f"Databricks at {self.host} rejected the token (401 Unauthenticated) while reading {uri}: "
                "check the databricks secret's DATABRICKS_TOKEN"
            ) from None
        except PermissionDenied:
            raise PreflightError(
                f"Databricks at {self.host} denied access to {uri} (403 Permission denied): "
                "the token's user needs READ VOLUME on it"
            ) from None
        except DatabricksError as e:
            raise PreflightError(f"Databricks at {self.host} failed reading {uri}: {_first_line(e)}") from None
        except (TimeoutError, OSError) as e:
            raise PreflightError(
                f"cannot reach DATABRICKS_HOST {self.host} (gave up after {PREFLIGHT_RETRY_TIMEOUT_S}s) "
                f"while reading {uri}: {_first_line(e)}"
            ) from None
        except Exception as e:  # requests' errors, raised after the SDK's retries  # noqa: BLE001
            raise PreflightError(f"cannot read {uri} from {self.host}: {type(e).__name__}: {_first_line(e)}") from None


class _S3Store(_Store):
    def __init__(self, example_uri: str):
        import boto3
        from botocore.config import Config

        session = boto3.session.Session()
        if session.get_credentials() is None:
            raise PreflightError(
                f"{example_uri} needs AWS credentials, but none are configured: add an s3 secret to the run "
                "(AWS_SHARED_CREDENTIALS_FILE) or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        self.endpoint = os.environ.get("S3_ENDPOINT_URL") or None
        self.client = session.client(
            "s3",
            endpoint_url=self.endpoint,
            config=Config(connect_timeout=PREFLIGHT_HTTP_TIMEOUT_S, read_timeout=PREFLIGHT_HTTP_TIMEOUT_S,
                          retries={"max_attempts": 2}),
        )

    def read(self, uri: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        parsed = urllib.parse.urlparse(uri)
        try:
            obj = self.client.get_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))
            return obj["Body"].read()
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise PreflightError(f"S3 refused {uri}: {code or _first_line(e)}") from None
        except BotoCoreError as e:
            raise PreflightError(f"cannot read {uri}: {_first_line(e)}") from None


class _StreamingStore(_Store):
    """Any other scheme streaming supports (gs://, oci://, ...), through streaming's own downloader."""

    def read(self, uri: str) -> bytes | None:
        from streaming.base.storage import download_file

        with tempfile.TemporaryDirectory() as tmp:
            dest = os.path.join(tmp, os.path.basename(uri))
            try:
                download_file(uri, dest, PREFLIGHT_HTTP_TIMEOUT_S)
            except FileNotFoundError:
                return None
            except Exception as e:  # noqa: BLE001 - each backend raises its own types
                raise PreflightError(f"cannot read {uri}: {type(e).__name__}: {_first_line(e)}") from None
            return Path(dest).read_bytes()


def _store_for(uri: str, env: dict[str, str], cache: dict[str, _Store]) -> _Store:
    scheme = scheme_of(uri)
    if scheme not in cache:
        if scheme == "local":
            cache[scheme] = _LocalStore()
        elif scheme == "dbfs":
            if not uri.startswith("dbfs:/Volumes/"):
                raise PreflightError(f"{uri}: only Unity Catalog Volumes (dbfs:/Volumes/...) are supported for dbfs:/ data")
            cache[scheme] = _DatabricksStore(uri, env)
        elif scheme == "s3":
            cache[scheme] = _S3Store(uri)
        else:
            cache[scheme] = _StreamingStore()
    return cache[scheme]


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


# ---------------------------------------------------------------- the checks


def check_dataset(
    *,
    name: str,
    remote: str | None,
    local: str | None,
    split: str,
    max_seq_len: int,
    vocab_size: int,
    env: dict[str, str] | None = None,
    stores: dict[str, _Store] | None = None,
) -> DatasetInfo:
    """Check one split; `name` (e.g. train_loader) prefixes the messages."""
    env = dict(os.environ) if env is None else env
    stores = {} if stores is None else stores
    if remote is not None and scheme_of(remote) == "local":
        # A local "remote" is read in place; streaming copies only when a cache is named.
        remote, local = (None, remote) if local is None else (remote, local)
    base = remote if remote is not None else local
    assert base is not None
    where = join(base, split)
    if remote is None and not Path(where).is_dir():
        raise PreflightError(f"{name}: {where} does not exist (no such directory: {Path(where).resolve()})")
    store = _store_for(base, env, stores)
    index_uri = join(where, INDEX)
    if store.read(index_uri) is None:
        raise PreflightError(
            f"{name}: {where} has no {INDEX} (checked as {store.describe(index_uri)}): convert the data there with "
            f"`launcher data convert ... --out {base} --split {split}`, or fix {name}.dataset.remote"
        )
    sidecar_uri = join(where, SIDECAR_NAME)
    raw = store.read(sidecar_uri)
    if raw is None:
        raise PreflightError(
            f"{where} has no {SIDECAR_NAME}, so its token dtype and sequence length are unknown "
            "(prepare data with `launcher data convert`; the trainer does not guess)"
        )
    sidecar = _parse_sidecar(raw, where)
    if sidecar["seq_len"] != max_seq_len:
        raise PreflightError(
            f"{where} holds sequences of {sidecar['seq_len']} tokens but model.max_seq_len is {max_seq_len}: "
            "convert the data with the model's sequence length, or change model.max_seq_len"
        )
    data_vocab = sidecar.get("vocab_size")
    if isinstance(data_vocab, int) and data_vocab > vocab_size:
        raise PreflightError(
            f"{where} was tokenized with a vocabulary of {data_vocab} but model.vocab_size is {vocab_size}"
        )
    return DatasetInfo(
        remote=remote,
        local=local,
        split=split,
        dtype=sidecar["dtype"],
        seq_len=sidecar["seq_len"],
        vocab_size=data_vocab if isinstance(data_vocab, int) else None,
        samples=sidecar.get("samples") if isinstance(sidecar.get("samples"), int) else None,
    )


def _parse_sidecar(raw: bytes, where: str) -> dict[str, Any]:
    from launcher.data.format import check_sidecar

    try:
        return check_sidecar(json.loads(raw), where=f"{where}/{SIDECAR_NAME}")
    except ValueError:
        raise PreflightError(f"{where}/{SIDECAR_NAME} is not valid JSON") from None
    except InputError as e:
        raise PreflightError(e.message) from None


def preflight(cfg: Any, env: dict[str, str] | None = None) -> dict[str, DatasetInfo]:
    """Check every dataset of a TrainConfig; return {'train': info, 'eval': info?}."""
    env = dict(os.environ) if env is None else env
    stores: dict[str, _Store] = {}
    out = {}
    for key, loader_name in (("train", "train_loader"), ("eval", "eval_loader")):
        loader = getattr(cfg, loader_name)
        if loader is None:
            continue
        ds = loader.dataset
        out[key] = check_dataset(
            name=loader_name,
            remote=ds.remote,
            local=ds.local,
            split=ds.split,
            max_seq_len=cfg.model.max_seq_len,
            vocab_size=cfg.model.vocab_size,
            env=env,
            stores=stores,
        )
    return out
