"""Runs keep their history and their logs on Kubernetes: after a JobSet restart and a
`launcher stop`, describe still shows every attempt (exit codes, times); logs and metrics
read the pods' log archive (the profile's log_store, here a Volume on the fake Databricks
workspace), and without one they say that the logs are gone (exit 1) instead of printing
nothing. Against the fake cluster run as a program, with its JobSet controller."""

from __future__ import annotations

import gzip
import json
import re
import threading
from pathlib import Path

import pytest

from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.backends.kubernetes.secrets import KubernetesSecretStore
from launcher.config import load_config
from launcher.secrets.kinds import Secret, SecretKind
from launcher.spec.models import RunSpec
from tests.conftest import wait_until
from tests.kubernetes.test_backend import worker
from tests.kubernetes.test_jobset import api_get, jobset_status, launcher, submit_detached

REPO = Path(__file__).resolve().parents[2]
VOLUME_URL = "dbfs:/Volumes/main/default/data/launcher-logs/"
# Attempt 1: rank 1 fails with code 3 after 3 lines (the JobSet controller restarts the group),
# once rank 0 has printed as many ($SYNC_DIR: the pods of the fake share the host's files),
# whichever pod started first; attempt 2 runs until stopped. Rank 0 prints a metric record
# after each of its lines, and attempt 2 resumes at step 3: its curve follows attempt 1's
# first three points.
RESTART_THEN_FOREVER = (
    f'if [ "$LAUNCHER_ATTEMPT" = 1 ]; then '
    f"{worker('--lines', '6', '--interval', '0.1', '--fail-rank', '1', '--fail-code', '3', '--metrics')} "
    f'--sync-dir "$SYNC_DIR"; '
    f"else {worker('--forever', '--interval', '0.05', '--metrics', '--first-step', '3')}; fi"
)


def _spec(sync_dir: Path) -> dict:
    return {
        "name": "history",
        "image": "ghcr.io/example/launcher:test",
        "command": RESTART_THEN_FOREVER,
        "compute": {"gpu_type": "none", "nodes": 2},
        "scheduling": {"max_retries": 1},
        # The pods import the launcher of this checkout (the fake's pods have a clean environment).
        "env_variables": {"PYTHONPATH": str(REPO), "SYNC_DIR": str(sync_dir)},
    }


def pods_of(kube, name: str) -> list[dict]:
    return api_get(kube, f"/api/v1/namespaces/default/pods?labelSelector=launcher.dev/run%3D{name}")["items"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = launcher(*args)
    out = capsys.readouterr()
    return code, out.out, out.err


def restart_then_stop(kube, tmp_path: Path, capsys, followed: list | None = None) -> str:
    """Submit, wait for the JobSet restart and for attempt 2 to have logged, stop, and
    wait until every pod of the run is gone. With `followed`, attempt 2's log is followed
    (as `logs -f` does) from before the stop until its stream ends, into that list."""
    sync_dir = tmp_path / "sync"
    sync_dir.mkdir()
    name = submit_detached(tmp_path, _spec(sync_dir))
    wait_until(
        lambda: jobset_status(kube, name).get("restarts") == 1,
        90,
        interval=0.3,
        message="the JobSet controller to restart the group",
    )

    def attempt_2_logged() -> bool:  # both ranks: the tests count more than 20 lines of each
        code, out, _ = cli(capsys, "logs", name, "--attempt", "2")
        return code == 0 and all(20 in numbered(out, rank) for rank in (0, 1))

    wait_until(attempt_2_logged, 90, interval=0.3, message="each rank of attempt 2 to print 20 lines")
    follower = None
    if followed is not None:
        backend = KubernetesBackend(load_config().profile("fake"))
        follower = threading.Thread(
            target=lambda: followed.extend(backend.logs(name, attempt=2, follow=True)), daemon=True
        )
        follower.start()
        wait_until(lambda: followed, 30, message="the follow's first line")
    code, _, err = cli(capsys, "stop", name, "-y")
    assert code == 0, err
    wait_until(lambda: pods_of(kube, name) == [], 60, interval=0.2, message="the stopped run's pods to go")
    if follower is not None:
        follower.join(30)
        assert not follower.is_alive(), "the follow did not end with the stopped attempt"
        backend.close()
    return name


def assert_history(capsys, name: str) -> None:
    code, out, err = cli(capsys, "describe", "run", name)
    assert code == 0, err
    assert "Status:     STOPPED (stopped by the user)" in out
    assert re.search(r"Started:    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", out)
    assert re.search(r"Duration:   \d+:\d\d", out)
    assert "Attempt 1: FAILED (rank 1 exited with code 3)" in out
    assert re.search(r"\n  1\s+\S+\s+FAILED\s+3\s", out)  # attempt 1's exit code
    assert "Attempt 2: STOPPED (stopped by the user)" in out
    assert re.search(r"\n  0\s+\S+\s+STOPPED\s", out) and re.search(r"\n  1\s+\S+\s+STOPPED\s", out)
    assert re.search(r"attempt 2\s+RUNNING", out) and re.search(r"attempt 2\s+STOPPED\s+stopped by the user", out)


def numbered(out: str, rank: int) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(rf"^(?:\[rank {rank}\] )?rank {rank} line (\d+)$", out, re.M)]


def test_without_a_log_store_stop_keeps_the_stopped_attempts_log_and_a_restarts_is_gone(
    fake_kube_program, tmp_path, capsys
):
    kube = fake_kube_program("--nodes", "2", profile={"entrypoint_mode": "image"})
    name = restart_then_stop(kube, tmp_path, capsys)
    assert_history(capsys, name)

    # The stopped attempt: the stop read each rank's pod until it was gone, and kept its log.
    code, out, err = cli(capsys, "logs", name)
    assert code == 0, err
    for rank in (0, 1):
        lines = numbered(out, rank)
        assert len(lines) > 20 and lines == list(range(len(lines))), out
        assert f"[rank {rank}] rank {rank} attempt 2 starting" in out
    assert re.search(r"\[rank 0\] \[launcher\] exit code 143", out)  # printed after SIGTERM: read to the end
    code, out, err = cli(capsys, "logs", name, "--rank", "1", "--tail", "1")
    assert code == 0 and out.startswith("[launcher] exit code 143"), (out, err)
    # The JobSet controller deleted attempt 1's pods at its restart, with no launcher watching.
    code, out, err = cli(capsys, "logs", name, "--attempt", "1")
    assert (code, out) == (1, "")
    assert "the pods of attempt 1 are gone (JobSet restart); set log_store in the profile to keep logs" in err
    code, out, err = cli(capsys, "logs", name, "--rank", "1", "--attempt", "1")
    assert (code, out) == (1, "") and "the pod of rank 1 of attempt 1 is gone (JobSet restart)" in err
    # metrics: the stopped attempt's curve, and a warning for attempt 1's.
    code, out, err = cli(capsys, "metrics", name, "-o", "json")
    assert code == 0, err
    steps = [p["step"] for p in json.loads(out)]
    assert len(steps) > 20 and steps == list(range(3, 3 + len(steps)))
    assert (
        f"! attempt 1 of {name}: cannot read its log: the pod of rank 0 of attempt 1 is gone (JobSet restart); "
        "set log_store in the profile to keep logs"
    ) in err
    assert "Traceback" not in err


@pytest.fixture(
    params=[(store, mode) for store in ("volume", "s3") for mode in ("zipapp", "image")], ids=lambda p: "-".join(p)
)
def archived_cluster(request, fake_kube_program):
    """The fake cluster with a log_store: a Volume on the fake Databricks workspace (a databricks
    secret), or a bucket on moto S3 (an s3 secret: its credentials and config files, the
    config naming the endpoint); the pods' entrypoint from the zipapp, run by the venv's
    python3 -I -S (no site-packages: the archive is written by the standard library alone),
    or the launcher installed (image). Yields (kube, the archive's files under the run's name)."""
    store, mode = request.param
    if store == "volume":
        pytest.importorskip("databricks.sdk")
        volume = request.getfixturevalue("databricks_files")
        env = volume.env()
        secret = Secret(
            "logs-archive", SecretKind.DATABRICKS, {"host": env["DATABRICKS_HOST"], "token": env["DATABRICKS_TOKEN"]}
        )
        url, root = VOLUME_URL, "/Volumes/main/default/data/launcher-logs/"

        def files(name: str) -> list[str]:
            return [p[len(root) :] for p in volume.paths(root + name + "/")]
    else:
        s3 = request.getfixturevalue("s3")
        env = s3.env()
        secret = Secret(
            "logs-archive",
            SecretKind.S3,
            {
                "credentials": f"[default]\naws_access_key_id = {env['AWS_ACCESS_KEY_ID']}\n"
                f"aws_secret_access_key = {env['AWS_SECRET_ACCESS_KEY']}\n",
                "config": f"[default]\nregion = us-east-1\nendpoint_url = {s3.endpoint}\n",
            },
        )
        url = f"s3://{s3.bucket}/launcher/"

        def files(name: str) -> list[str]:
            return [k[len("launcher/") :] for k in s3.keys(f"launcher/{name}/")]

    # A pod's grace period lets the entrypoint write its last chunks after SIGTERM (the pods
    # ask 45 s); the fake's default of 3 s could cut them short on a loaded machine.
    kube = fake_kube_program(
        "--nodes",
        "2",
        "--grace-seconds",
        "20",
        profile={"entrypoint_mode": mode, "log_store": url, "log_store_secret": "logs-archive"},
    )
    KubernetesSecretStore(load_config().profile("fake")).create(secret)
    return kube, files


def test_with_a_log_store_logs_and_metrics_outlive_a_restart_and_a_stop(archived_cluster, tmp_path, capsys):
    kube, files = archived_cluster
    followed: list = []
    name = restart_then_stop(kube, tmp_path, capsys, followed)
    assert_history(capsys, name)
    assert {p.rsplit("/", 1)[0] for p in files(name)} == {
        f"{name}/attempt-1/rank-0",
        f"{name}/attempt-1/rank-1",
        f"{name}/attempt-2/rank-0",
        f"{name}/attempt-2/rank-1",
    }

    # The JobSet restart deleted attempt 1's pods: its log comes from the archive.
    code, out, err = cli(capsys, "logs", name, "--attempt", "1")
    assert code == 0, err
    assert numbered(out, 0)[:3] == [0, 1, 2] and numbered(out, 1) == [0, 1, 2], out
    assert "[rank 1] rank 1 fails with code 3" in out
    assert "[rank 1] [launcher] exit code 3" in out
    code, out, err = cli(capsys, "logs", name, "--attempt", "1", "--rank", "1", "--tail", "1")
    assert code == 0 and out.splitlines()[-1].startswith("[launcher] exit code 3"), (out, err)

    # The stopped attempt: every line of each rank, once and in order, to the entrypoint's last
    # (--raw: the metric records too, which the follow below got).
    code, out, err = cli(capsys, "logs", name, "--raw")
    assert code == 0, err
    for rank in (0, 1):
        lines = numbered(out, rank)
        assert len(lines) > 20 and lines == list(range(len(lines)))
        assert f"[rank {rank}] rank {rank} attempt 2 starting" in out
    assert re.search(r"\[rank 0\] \[launcher\] exit code 143", out)
    # The follow, which began on the live pods and ended as they went: the same lines, each once.
    for rank in (0, 1):
        texts = [ln.text for ln in followed if ln.rank == rank]
        assert texts == [ln[len(f"[rank {rank}] ") :] for ln in out.splitlines() if ln.startswith(f"[rank {rank}] ")]

    # The curve of both attempts, from the archive.
    code, out, err = cli(capsys, "metrics", name, "-o", "json")
    assert code == 0, err
    points = json.loads(out)
    assert {p["metric"] for p in points} == {"loss/train/total"}
    steps = {a: [p["step"] for p in points if p["attempt"] == a] for a in (1, 2)}
    assert steps[1] == [0, 1, 2] and len(steps[2]) > 20 and steps[2] == list(range(3, 3 + len(steps[2])))
    assert len(points) == len(steps[1]) + len(steps[2])


def test_a_run_on_a_profile_with_a_missing_log_store_secret_is_refused(fake_kube_program, tmp_path, capsys):
    fake_kube_program(
        profile={"entrypoint_mode": "image", "log_store": str(tmp_path / "logs"), "log_store_secret": "nope"},
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "x", "image": "i:1", "command": "true", "compute": {"gpu_type": "none"}}))
    code, _, err = cli(capsys, "run", "-f", str(spec), "--cluster", "fake")
    assert code == 2
    assert (
        "config.yaml: clusters.fake.log_store_secret: no secret named 'nope' in namespace default of cluster fake"
        in err
    )


def test_a_run_stopped_before_any_container_started_says_it_has_no_logs(fake_kube, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    # No node of the fake has an H100: the pod waits for one, and is stopped waiting.
    spec.write_text(
        json.dumps(
            {"name": "waits", "image": "i:1", "command": "true", "compute": {"gpu_type": "h100_80gb", "gpus": 8}}
        )
    )
    code, out, err = cli(capsys, "run", "-f", str(spec), "--cluster", "fake")
    assert code == 0, err
    name = re.search(r"Run (\S+) submitted", out + err).group(1)
    code, out, err = cli(capsys, "stop", name, "-y")
    assert code == 0, err
    code, out, err = cli(capsys, "logs", name)
    assert (code, out) == (1, "")
    assert f"attempt 1 of run {name} never started a container (STOPPED: stopped by the user), so it has no logs" in err


def test_a_follow_whose_pod_goes_before_its_log_was_read_reads_on_from_the_archive(fake_kube_factory, tmp_path):
    kube = fake_kube_factory(profile={"log_store": str(tmp_path / "archive")})
    backend = KubernetesBackend(load_config().profile("fake"))
    try:
        spec = RunSpec.model_validate(
            {
                "name": "handover-abc123",
                "command": worker("--forever", "--interval", "0.02"),
                "env_variables": {"PYTHONPATH": str(REPO)},
            }
        )
        backend.submit(spec, [])
        wait_until(
            lambda: any(text == "rank 0 line 30" for c in kube.containers.values() for _, text in c.lines),
            60,
            message="rank 0 to print 30 lines",
        )
        # The follow's first read of the pod's log is held until the pod is gone: it gets a 404
        # and nothing of the pod log, so every line must come from the archive.
        kube.faults.inject("log", "pods", delay=4.0, times=1)
        followed: list = []
        follower = threading.Thread(target=lambda: followed.extend(backend.logs(spec.name, follow=True)), daemon=True)
        follower.start()
        wait_until(lambda: kube.count(verb="log") >= 1, 20, message="the follow's first log request")
        backend.stop(spec.name)
        wait_until(
            lambda: kube.pods(labels=f"launcher.dev/run={spec.name}") == [],
            30,
            interval=0.1,
            message="the stopped run's pod to go",
        )
        follower.join(30)
        assert not follower.is_alive()
    finally:
        backend.close()
    texts = [ln.text for ln in followed]
    lines = [int(t.rsplit(" ", 1)[1]) for t in texts if t.startswith("rank 0 line ")]
    assert len(lines) > 30 and lines == list(range(len(lines)))
    assert texts[-1].startswith("[launcher] exit code 143")


def test_a_log_store_secret_that_would_replace_a_run_secrets_env_is_refused(fake_kube_factory, tmp_path, capsys):
    fake_kube_factory(profile={"log_store": str(tmp_path / "logs"), "log_store_secret": "logs-dbx"})
    store = KubernetesSecretStore(load_config().profile("fake"))
    for name in ("logs-dbx", "data-dbx"):
        store.create(
            Secret(name, SecretKind.DATABRICKS, {"host": "https://x.example", "token": f"dapi-{name}-0123456789"})
        )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {"name": "x", "image": "i:1", "command": "true", "compute": {"gpu_type": "none"}, "secrets": ["data-dbx"]}
        )
    )
    code, _, err = cli(capsys, "run", "-f", str(spec), "--cluster", "fake")
    assert code == 2
    assert (
        "config.yaml: clusters.fake.log_store_secret: secrets 'data-dbx' and 'logs-dbx' both set the env var "
        "DATABRICKS_HOST"
    ) in err and "or make log_store_secret the run's own secret" in err


def test_the_job_form_keeps_a_stopped_runs_history_and_its_logs(fake_kube, tmp_path, capsys):
    backend = KubernetesBackend(load_config().profile("fake"))
    try:
        spec = RunSpec.model_validate(
            {"name": "jobform-abc123", "command": worker("--forever", "--interval", "0.05"), "compute": {"nodes": 2}}
        )
        backend.submit(spec, [])
        wait_until(lambda: backend.get(spec.name).status.value == "RUNNING", 60, message="the run to run")
    finally:
        backend.close()
    code, _, err = cli(capsys, "stop", spec.name, "-y")
    assert code == 0, err
    wait_until(
        lambda: fake_kube.pods(labels=f"launcher.dev/run={spec.name}") == [],
        30,
        interval=0.1,
        message="the stopped run's pods to go",
    )
    code, out, err = cli(capsys, "describe", "run", spec.name)
    assert code == 0 and "Attempt 1: STOPPED (stopped by the user)" in out, err
    assert re.search(r"Started:    \d{4}-", out) and re.search(r"Duration:   \d+:\d\d", out)
    code, out, err = cli(capsys, "logs", spec.name)
    assert code == 0, err
    for rank in (0, 1):  # read to the end: the entrypoint's last line, printed after SIGTERM
        assert re.search(rf"^\[rank {rank}\] \[launcher\] exit code 143", out, re.M), out


@pytest.mark.parametrize("mode", ["zipapp", "image"])
def test_the_archive_is_masked_at_the_source_like_the_pod_log(fake_kube_factory, databricks_files, mode):
    kube = fake_kube_factory(profile={"log_store": VOLUME_URL, "log_store_secret": "logs-dbx", "entrypoint_mode": mode})
    env = databricks_files.env()
    KubernetesSecretStore(load_config().profile("fake")).create(
        Secret("logs-dbx", SecretKind.DATABRICKS, {"host": env["DATABRICKS_HOST"], "token": env["DATABRICKS_TOKEN"]})
    )
    backend = KubernetesBackend(load_config().profile("fake"))
    try:
        # The rank prints the archive's own credential: masked in the pod log and in the archive.
        spec = RunSpec.model_validate(
            {
                "name": "masked-abc123",
                "command": worker("--print-env", "DATABRICKS_TOKEN"),
                "env_variables": {"PYTHONPATH": str(REPO)},
            }
        )
        backend.submit(spec, backend.secret_store().for_run([]))
        wait_until(lambda: backend.get(spec.name).status.is_terminal, 60, message="the run to end")
        assert backend.get(spec.name).status.value == "COMPLETED"
    finally:
        backend.close()
    root = f"/Volumes/main/default/data/launcher-logs/{spec.name}/attempt-1/rank-0/"
    archived = b"".join(databricks_files.read(p) for p in databricks_files.paths(root))
    assert b"the secret is ****\n" in archived and b"rank 0 done\n" in archived
    assert env["DATABRICKS_TOKEN"].encode() not in archived
    assert not any(env["DATABRICKS_TOKEN"] in text for c in kube.containers.values() for _, text in c.lines)


@pytest.mark.parametrize(
    "log_store, problem",
    [
        (
            "gs://bucket/launcher/",
            "gs:// is not supported by the pod's entrypoint; use s3://<bucket>/<prefix>, "
            "dbfs:/Volumes/<catalog>/<schema>/<volume>/... or a path (or file://) on a volume "
            "every pod mounts",
        ),
        (
            "dbfs:/mnt/logs/",
            "dbfs:/mnt/logs/: only Unity Catalog Volumes (dbfs:/Volumes/<catalog>/<schema>/<volume>/...) "
            "are supported for dbfs: paths",
        ),
    ],
)
def test_a_log_store_no_pod_can_write_is_refused_by_validate_dry_run_and_run(
    fake_kube_factory, tmp_path, capsys, log_store, problem
):
    kube = fake_kube_factory(profile={"log_store": log_store})
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "x", "image": "i:1", "command": "true", "compute": {"gpu_type": "none"}}))
    for command in (["validate"], ["run", "--dry-run"], ["run"]):
        code, out, err = cli(capsys, *command, "-f", str(spec), "--cluster", "fake")
        assert code == 2, (command, out, err)
        assert f"config.yaml: clusters.fake.log_store: {problem}" in err, (command, err)
        assert "Traceback" not in err
    assert kube.pods() == [] and kube.count(verb="create") == 0


# Attempt 1 fails with code 3 after two lines; attempt 2 completes.
FAIL_THEN_COMPLETE = worker("--lines", "4", "--interval", "0.05", "--fail-rank", "0", "--fail-attempt", "1")
# A follow keeps what it read of an attempt a restart ends; a rank that lives 2 s gives its reader
# time to attach on a loaded machine (one that fails unseen is the documented no-log_store limit).
FAIL_SLOWLY_THEN_COMPLETE = worker("--lines", "4", "--interval", "0.5", "--fail-rank", "0", "--fail-attempt", "1")


def with_ttl(seconds: int) -> None:
    """The `fake` profile with ttl_seconds_after_finished."""
    import yaml

    from launcher.config import config_path

    path = config_path()
    config = yaml.safe_load(path.read_text())
    config["clusters"]["fake"]["ttl_seconds_after_finished"] = seconds
    path.write_text(yaml.safe_dump(config))


def submit_until_the_ttl_took_its_jobset(kube, tmp_path: Path) -> str:
    spec = {
        "name": "ttl",
        "image": "ghcr.io/example/launcher:test",
        "command": FAIL_THEN_COMPLETE,
        "compute": {"gpu_type": "none"},
        "scheduling": {"max_retries": 1},
        "env_variables": {"PYTHONPATH": str(REPO)},
    }
    name = submit_detached(tmp_path, spec)
    jobsets = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?labelSelector=launcher.dev/run%3D{name}"
    # ttl 0: the JobSet controller deletes it as soon as it completed.
    wait_until(lambda: api_get(kube, jobsets)["items"] == [], 90, interval=0.2, message="the TTL to delete the JobSet")
    wait_until(lambda: pods_of(kube, name) == [], 30, interval=0.2, message="the run's pods to go")
    return name


@pytest.mark.parametrize("archived_cluster", [("s3", "image")], indirect=True, ids=["s3-image"])
def test_with_a_log_store_a_run_outlives_its_jobsets_ttl_and_logs_read_the_archive(archived_cluster, tmp_path, capsys):
    kube, files = archived_cluster
    with_ttl(0)
    name = submit_until_the_ttl_took_its_jobset(kube, tmp_path)

    code, out, err = cli(capsys, "get", "runs")
    assert code == 0, err
    assert name in out and "UNKNOWN" in out, out
    code, out, err = cli(capsys, "describe", "run", name)
    assert code == 0, err
    assert "ttl_seconds_after_finished" in out and "how it ended is in its logs" in out, out
    # Its logs: the latest attempt by default, every attempt the archive holds.
    code, out, err = cli(capsys, "logs", name)
    assert code == 0, err
    assert "rank 0 attempt 2 starting" in out and "rank 0 done" in out and "[launcher] exit code 0" in out, out
    code, out, err = cli(capsys, "logs", name, "--attempt", "1")
    assert code == 0, err
    assert "rank 0 fails with code 3" in out and "[launcher] exit code 3" in out, out
    code, out, err = cli(capsys, "logs", name, "--attempt", "3")
    assert code == 2 and f"run {name!r} has no attempt 3 (it has 2)" in err, err
    # A follow of it ends (nothing of it changes any more), with why its outcome is unknown.
    from launcher.sdk.logs import follow_run

    events = list(follow_run(name))
    assert events[-1].kind == "ended" and "ttl_seconds_after_finished" in (events[-1].run.reason or "")
    # `launcher delete` removes the record (the archive stays).
    code, out, err = cli(capsys, "delete", name, "-y")
    assert code == 0, err
    code, out, err = cli(capsys, "get", "runs")
    assert name not in out
    assert any(p.startswith(f"{name}/attempt-2/") for p in files(name))


def test_without_a_log_store_a_run_outlives_its_jobsets_ttl_and_logs_say_they_are_gone(
    fake_kube_program, tmp_path, capsys
):
    kube = fake_kube_program(profile={"entrypoint_mode": "image", "ttl_seconds_after_finished": 0})
    name = submit_until_the_ttl_took_its_jobset(kube, tmp_path)
    code, out, err = cli(capsys, "get", "runs")
    assert code == 0 and name in out, (out, err)
    code, out, err = cli(capsys, "logs", name)
    assert (code, out) == (1, "")
    assert (
        "the pods of attempt 1 are gone (removed after the run ended); set log_store in the profile to keep logs" in err
    )


def test_a_stopped_rank_that_printed_more_than_is_kept_keeps_its_last_lines_and_says_so(
    fake_kube_program, tmp_path, capsys
):
    from launcher.backends.kubernetes.keptlogs import KEPT_TAIL_LINES

    kube = fake_kube_program(profile={"entrypoint_mode": "image"})
    total = KEPT_TAIL_LINES + 5000
    spec = {
        "name": "chatty",
        "image": "ghcr.io/example/launcher:test",
        "command": f"seq 1 {total}; echo printed all; sleep 300",
        "compute": {"gpu_type": "none"},
    }
    name = submit_detached(tmp_path, spec)

    def printed_all() -> bool:
        code, out, _ = cli(capsys, "logs", name, "--tail", "3")
        return code == 0 and "printed all" in out

    wait_until(printed_all, 60, interval=0.3, message="the rank to print every line")
    code, _, err = cli(capsys, "stop", name, "-y")
    assert code == 0, err
    wait_until(lambda: pods_of(kube, name) == [], 60, interval=0.2, message="the stopped run's pod to go")
    code, out, err = cli(capsys, "logs", name)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("[launcher] the earlier lines of rank 0 were not kept: without a log_store"), lines[0]
    numbers = [int(t) for t in lines if t.isdigit()]
    assert numbers == list(range(numbers[0], total + 1)) and numbers[0] > 1
    assert "printed all" in lines and lines[-1].startswith("[launcher] exit code 143")


def test_what_a_stop_keeps_of_a_rank_fits_a_configmap_and_is_its_last_lines():
    import base64
    import os

    from launcher.backends.kubernetes.keptlogs import KEPT_BYTES, fit, kept_object

    # Random text hardly compresses: 3 MB of it is cut to its last lines that fit.
    lines = [f"{n} {base64.b64encode(os.urandom(60)).decode()}\n" for n in range(40_000)]
    blob, cut = fit(lines, KEPT_BYTES // 2)
    assert len(blob) <= KEPT_BYTES // 2 and cut > 0
    assert gzip.decompress(blob).decode() == "".join(lines[cut:])
    cm = kept_object("r-abc123", 2, {0: lines, 1: lines[:10]}, None)
    assert sum(len(base64.b64decode(v)) for v in cm["binaryData"].values()) <= KEPT_BYTES
    assert json.loads(cm["metadata"]["annotations"]["launcher.dev/kept-dropped"]) == {"0": "the earlier lines"}


def test_a_stop_that_may_not_read_the_pods_logs_says_so_and_stops(fake_kube_program, tmp_path, capsys):
    kube = fake_kube_program(profile={"entrypoint_mode": "image"})
    name = submit_detached(
        tmp_path,
        {
            "name": "unread",
            "image": "ghcr.io/example/launcher:test",
            "command": "sleep 300",
            "compute": {"gpu_type": "none"},
        },
    )
    wait_until(lambda: cli(capsys, "get", "runs")[1].count("RUNNING") == 1, 60, interval=0.3, message="the run to run")
    kube.faults.inject("log", "pods", status=403, times=100, message="pods/log is forbidden")
    code, out, err = cli(capsys, "stop", name, "-y")
    assert code == 0, err
    assert f"Run {name} stopped" in out
    assert "! rank 0 of attempt 1: its log could not be read to the end (" in err and "it is not kept" in err, err
    assert "Traceback" not in err


def test_a_followed_run_whose_jobset_has_a_ttl_keeps_its_outcome_past_it(fake_kube_program, tmp_path, capsys):
    kube = fake_kube_program(profile={"entrypoint_mode": "image", "ttl_seconds_after_finished": 3})
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        json.dumps(
            {
                "name": "ttl",
                "image": "ghcr.io/example/launcher:test",
                "command": FAIL_SLOWLY_THEN_COMPLETE,
                "compute": {"gpu_type": "none"},
                "scheduling": {"max_retries": 1},
                "env_variables": {"PYTHONPATH": str(REPO)},
            }
        )
    )
    code, out, err = cli(capsys, "run", "-f", str(spec), "--cluster", "fake", "--follow")
    assert code == 0, err
    name = re.search(r"Run (ttl-[a-z0-9]{6}) completed", err).group(1)
    jobsets = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets?labelSelector=launcher.dev/run%3D{name}"
    wait_until(lambda: api_get(kube, jobsets)["items"] == [], 60, interval=0.2, message="the TTL to delete the JobSet")
    wait_until(lambda: pods_of(kube, name) == [], 30, interval=0.2, message="the run's pods to go")

    # The follow saw it end and recorded how: the TTL took the JobSet, not the outcome.
    code, out, err = cli(capsys, "get", "runs")
    assert code == 0 and re.search(rf"{name}\s.*COMPLETED", out), (out, err)
    code, out, err = cli(capsys, "describe", "run", name)
    assert code == 0, err
    assert "Status:     COMPLETED" in out and "Attempt 1: FAILED (rank 0 exited with code 3)" in out, out
    assert "Attempt 2: COMPLETED" in out, out
    # Attempt 1, which a restart ended, was kept by the follow; attempt 2's pods the TTL took.
    code, out, err = cli(capsys, "logs", name, "--attempt", "1")
    assert code == 0 and "rank 0 fails with code 3" in out, (out, err)
    code, out, err = cli(capsys, "logs", name)
    assert (code, out) == (1, "")
    assert "the pods of attempt 2 are gone (removed after the run ended); set log_store in the profile" in err
