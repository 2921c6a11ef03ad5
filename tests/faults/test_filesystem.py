"""Items 4, 5 and 8 of issue 21: calls to a tracker, a workspace or a cluster on a port
that refuses connections fail at once; an output or launcher-home path that cannot be
used is named with its cause (exit 2, no traceback); and a run on a full disk reports its
own outcome. Every case is the real CLI in a subprocess."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import CLI
from tests.faults.conftest import describe, processes, refused
from tests.metrics.logdata import step_line

LOUD = "  for i in $(seq 40); do head -c 1000000 /dev/zero | tr '\\\\0' x; echo; done\n  echo the command finished\n"


def refused_port() -> int:
    """A port on 127.0.0.1 that nobody listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cli, *args: str, timeout: float = 60):
    began = time.monotonic()
    r = cli(*args, timeout=timeout)
    return r, time.monotonic() - began


def run_with_metrics(cli, name: str = "m") -> str:
    (cli.cwd / "log.txt").write_text("\n".join(step_line(s) for s in range(1, 4)) + "\n")
    spec = cli.spec(name, f"name: {name}\ncommand: cat log.txt\n")
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stderr
    name = describe(cli)["name"]
    # The space reserved for an outcome the state could not record is given back.
    assert not (cli.home / "runs" / name / "outcome.json").exists()
    return name


# A refused port fails in milliseconds; a whole command's bound leaves room for its
# imports (mlflow, streaming: 3 to 10 s on a loaded machine). Before, mlflow took 249 s.
# bench/bench_refused_ports.py prints the times.
AT_ONCE_S = 30


def test_item4_outside_calls_to_a_refused_port_fail_at_once(cli, tmp_path):
    pytest.importorskip("mlflow")
    port = refused_port()

    run = run_with_metrics(cli)
    uri = f"http://127.0.0.1:{port}"
    r, took = timed(cli, "metrics", run, "--to", "mlflow", uri)
    err = refused(r, f"--to mlflow {uri}: cannot reach the tracking server: connection refused")
    assert len([line for line in err.splitlines() if line.startswith("✗")]) == 1 and len(err.splitlines()) <= 2, err
    assert took < AT_ONCE_S, f"--to mlflow took {took:.1f} s"

    # A Databricks workspace (its URL a refused port): the SDK retried for 20 s. The store's
    # first call is timed here, after the imports, which alone take seconds.
    pytest.importorskip("databricks.sdk")
    from launcher.storage import Credentials, StorageError, open_store

    token = {"DATABRICKS_HOST": uri, "DATABRICKS_TOKEN": "dapi-not-a-real-token"}
    volume = "dbfs:/Volumes/main/default/vol/ds"
    began = time.monotonic()
    with pytest.raises(StorageError) as e:
        open_store(volume, Credentials(token)).exists()
    took = time.monotonic() - began
    assert took < 5, f"a Databricks Volume took {took:.1f} s to fail"
    assert e.value.message == f"cannot reach DATABRICKS_HOST {uri} while checking {volume}: connection refused"
    pytest.importorskip("streaming")
    (cli.cwd / "in.jsonl").write_text('{"text": "a b c"}\n')
    cli.env.update(token)
    err = refused(
        cli("data", "convert", "in.jsonl", "--out", volume, "--tokenizer", "unused", "--concat-tokens", "8"),
        f"✗ cannot reach DATABRICKS_HOST {uri} while checking {volume}: connection refused",
    )
    assert "dapi-not-a-real-token" not in err

    # A cluster (a kubeconfig pointing at a refused port): the cluster-unreachable error, exit 1.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "down",
                "clusters": [{"name": "down", "cluster": {"server": uri}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "down", "context": {"cluster": "down", "user": "u"}}],
            }
        )
    )
    (cli.home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "down": {
                        "backend": "kubernetes",
                        "kubeconfig": str(kubeconfig),
                        "image": "ghcr.io/example/launcher:test",
                    }
                }
            }
        )
    )
    spec = cli.spec("k", "name: k\nimage: ghcr.io/example/launcher:test\ncommand: echo hi\n")
    for args in (["run", "-f", str(spec), "--cluster", "down"], ["get", "runs", "--cluster", "down"]):
        r, took = timed(cli, *args)
        assert r.returncode == 1, (args, r.stderr)
        assert "cluster down: " in r.stderr and f"connection refused ({uri})" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        assert took < AT_ONCE_S, f"{args} took {took:.1f} s"


def test_item5_paths_that_cannot_be_used_are_named_with_their_cause(cli):
    # The launcher home's runs directory is a file.
    runs = cli.home / "runs"
    runs.write_text("")
    spec = cli.spec("a", "name: a\ncommand: echo hi\n")
    refused(cli("run", "-f", str(spec)), f"✗ {runs} is a file, not a directory", f"move {runs} away")
    assert "No runs found" in cli("get", "runs").stdout
    runs.unlink()

    # An output path that is a file where a directory must be.
    pytest.importorskip("tensorboardX")
    run = run_with_metrics(cli)
    refused(
        cli("metrics", run, "--to", "tensorboard", "/etc/hostname"),
        f"✗ /etc/hostname is a file, not a directory (needed for /etc/hostname/{run})",
    )

    # An output on a full device: ENOSPC comes without a file name; the command names it.
    refused(
        cli("data", "synthetic", "--samples", "100000", "--out", "/dev/full"),
        "✗ cannot write /dev/full: the disk is full (ENOSPC)",
    )


def test_item5_workers_past_the_machine_are_refused_at_once(cli):
    (cli.cwd / "in.jsonl").write_text('{"text": "a b c"}\n')
    r, took = timed(
        cli,
        "data",
        "convert",
        "in.jsonl",
        "--out",
        str(cli.cwd / "out"),
        "--tokenizer",
        "unused",
        "--concat-tokens",
        "8",
        "--workers",
        "10000",
    )
    err = refused(r, "✗ --workers 10000 is more than this machine runs: at most ")
    cap = int(err.split("at most ")[1].split()[0])
    assert 1 <= cap < 10000
    assert f"use --workers {cap} or fewer" in err
    assert took < AT_ONCE_S
    assert not (cli.cwd / "out").exists()


@pytest.fixture
def full_home(cli, small_tmpfs):
    """The whole launcher home on a 2 MiB tmpfs."""
    return small_tmpfs(cli.home, "2m")


def test_item8_a_full_disk_reports_the_runs_own_outcome(cli, full_home, token, kill_leftovers):
    spec = cli.spec("loud", f"name: loud\nenv_variables: {{FAULT_TOKEN: {token}}}\ncommand: |\n{LOUD}")
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    # The run's own outcome (the rank could not write its log), not the state file's error.
    assert r.returncode == 1, r.stderr
    outcome = [line for line in r.stderr.splitlines() if line.startswith("✗")]
    assert len(outcome) == 1 and outcome[0].startswith("✗ Run loud-"), r.stderr
    assert " failed: disk full writing logs under " in outcome[0], r.stderr
    assert "supervisor" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    name = outcome[0].split()[2]

    # Listing and describing read the state while the disk is still full.
    listed = cli("get", "runs", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["status"] == "FAILED" and row["reason"].startswith("disk full writing logs under"), row

    # Once there is space again the outcome is recorded, still without "supervisor".
    (full_home / "runs" / name / "attempt-1" / "rank-0.log").write_bytes(b"")
    rec = describe(cli, name)
    assert rec["status"] == "FAILED"
    assert rec["reason"].startswith(f"disk full writing logs under {full_home}/runs/{name}/attempt-1"), rec["reason"]
    assert "supervisor" not in json.dumps(rec)
    assert not processes(token)


@pytest.fixture(scope="module")
def conversion_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Documents and a tokenizer trained on them, made once with `launcher data` for both
    worker counts: what they convert is the same."""
    pytest.importorskip("streaming")
    work = tmp_path_factory.mktemp("conversion-inputs")
    make = CLI(work / "home", work)
    assert make("data", "synthetic", "--samples", "20000", "--out", "docs.jsonl").returncode == 0
    assert make("data", "tokenizer", "train", "docs.jsonl", "--vocab-size", "300", "--out", "tok").returncode == 0
    return work


@pytest.mark.parametrize("workers", ["1", "2"])
def test_item5_a_conversion_onto_a_full_disk_names_where_it_wrote(cli, small_tmpfs, workers, conversion_inputs):
    out = small_tmpfs(cli.cwd / "small", "300k") / "mds"
    r = cli(
        "data",
        "convert",
        str(conversion_inputs / "docs.jsonl"),
        "--out",
        str(out),
        "--tokenizer",
        str(conversion_inputs / "tok"),
        "--concat-tokens",
        "16",
        "--compression",
        "none",
        "--workers",
        workers,
    )
    err = refused(r, f"✗ cannot write {out}/.train.partial-", ": the disk is full (ENOSPC)")
    assert "worker" not in err
    assert not any(out.iterdir())  # nothing that looks like a dataset is left
