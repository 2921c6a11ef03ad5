"""Each SDK function, on the local backend, as a notebook calls it: what it returns, the
typed errors it raises, and that it prints nothing (capsys stays empty) and never exits."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

import launcher
from tests.sdk.conftest import REPO, spec_file, worker


@pytest.fixture(autouse=True)
def _prints_nothing(capsys):
    """The SDK never prints: whatever a test calls, nothing reaches stdout or stderr."""
    yield
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", ""), "the SDK printed"


def finished(specs, name: str, command: str = "echo one; echo two; echo three", **compute):
    run = launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, name, command, **compute)))
    return launcher.wait_for_run_status(run, "COMPLETED", timeout=60)


def test_importing_launcher_loads_nothing_and_serves_the_sdk_on_first_use():
    code = (
        "import sys, launcher; before = sorted(m for m in sys.modules if m.startswith(('launcher.', 'pydantic')));"
        "from launcher import RunConfig, create_run, get_runs, RunNotFound;"
        "print(before, RunConfig.__module__, create_run.__module__, 'pydantic' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "launcher.sdk.config", "launcher.sdk.runs", "True"]
    with pytest.raises(AttributeError, match="no attribute 'create_runs'"):
        launcher.create_runs  # noqa: B018 - a typo is an AttributeError, as for any module
    assert {"create_run", "get_run_metrics", "RunConfig"} <= set(dir(launcher))


def test_run_config_from_file_and_dict_and_its_validation_error(specs):
    path = spec_file(specs, "cfg", "true", gpus=2, gpu_type="a100_80gb")
    config = launcher.RunConfig.from_file(path)
    assert (config.name, config.compute.gpus, config.compute.gpu_type) == ("cfg", 2, "a100_80gb")
    assert config.file == str(path)
    legacy = launcher.RunConfig.from_dict({"run_name": "old", "command": "true", "gpu_num": 0})
    assert (legacy.name, legacy.compute.gpus) == ("old", 0)
    assert any("run_name" in w for w in legacy.warnings)

    path.write_text(path.read_text().replace("gpus: 2", "gpus: two"))
    with pytest.raises(launcher.ValidationError) as bad:
        launcher.RunConfig.from_file(path)
    assert (bad.value.file, bad.value.line, bad.value.field) == (str(path), 5, "compute.gpus")
    assert bad.value.exit_code == 2
    with pytest.raises(launcher.ValidationError) as bad:
        launcher.RunConfig.from_dict({"name": "x", "command": "true", "compute": {"nodes": 0}})
    assert (bad.value.file, bad.value.line, bad.value.field) == (None, None, "compute.nodes")


def test_create_wait_get_and_logs(specs):
    run = finished(specs, "hello")
    assert run.status is launcher.RunStatus.COMPLETED and run.name.startswith("hello-")
    assert (run.cluster, run.config["name"]) == ("local", run.name)
    assert run.config["command"] == "echo one; echo two; echo three"
    assert launcher.get_run(run.name).status == "COMPLETED"
    assert launcher.get_run("hello").name == run.name  # a spec name: its latest run
    lines = [str(line) for line in launcher.get_run_logs(run)]
    assert lines[-4:-1] == ["one", "two", "three"]
    assert next(str(line) for line in launcher.get_run_logs(run.name, tail=2)) == "three"
    followed = [line.text for line in launcher.follow_run_logs(run)]
    assert [t for t in followed if t in ("one", "two", "three")] == ["one", "two", "three"]


def test_wait_returns_at_any_end_or_past_the_status_and_times_out(specs):
    run = finished(specs, "quick")
    # Waiting for RUNNING on a run that has ended returns it ended, at once.
    assert launcher.wait_for_run_status(run, launcher.RunStatus.RUNNING, timeout=5).status == "COMPLETED"
    long = launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, "long", "sleep 60")))
    assert launcher.wait_for_run_status(long, "running", timeout=60).status == "RUNNING"
    with pytest.raises(launcher.WaitTimeout) as late:
        launcher.wait_for_run_status(long, "COMPLETED", timeout=0.5)
    assert isinstance(late.value, TimeoutError) and late.value.run.status == "RUNNING"
    assert f"run {long.name} did not reach COMPLETED within 0.5 s (it is RUNNING)" == str(late.value)
    stopped = launcher.stop_run(long)
    assert launcher.wait_for_run_status(stopped, "COMPLETED", timeout=30).status == "STOPPED"
    with pytest.raises(launcher.LauncherError, match="not a status"):
        launcher.wait_for_run_status(run, "DONE")


def test_get_runs_filters(specs):
    a = finished(specs, "alpha")
    b = finished(specs, "beta", gpus=0, gpu_type="none")
    failed = launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, "gamma", "exit 3")))
    failed = launcher.wait_for_run_status(failed, "COMPLETED", timeout=60)
    assert failed.status == "FAILED"
    names = lambda runs: [r.name for r in runs]  # noqa: E731
    assert names(launcher.get_runs()) == [failed.name, b.name, a.name]
    assert names(launcher.get_runs(status="failed")) == [failed.name]
    assert names(launcher.get_runs(status=["COMPLETED", launcher.RunStatus.FAILED], limit=2)) == [failed.name, b.name]
    assert names(launcher.get_runs(latest=True)) == [failed.name]
    assert names(launcher.get_runs(["alpha", "be*"])) == [b.name, a.name]
    assert names(launcher.get_runs(ids=[a.name])) == [a.name]
    assert names(launcher.get_runs(cluster="local", gpu_type="cpu", gpu_num=0)) == names(launcher.get_runs())
    assert names(launcher.get_runs(cluster=["local"], gpu_type=["NONE"], gpu_num=[0, 8])) == names(launcher.get_runs())
    assert launcher.get_runs(gpu_num=[8]) == [] and launcher.get_runs(gpu_type="a100_80gb") == []
    assert names(launcher.get_runs(after=b.created_at - timedelta(microseconds=1))) == [failed.name, b.name]
    assert names(launcher.get_runs(before=b.created_at)) == [a.name]
    naive_future = datetime.now() + timedelta(hours=1)  # a naive time is local time
    assert len(launcher.get_runs(before=naive_future)) == 3 and launcher.get_runs(after=naive_future) == []
    assert launcher.get_runs().warnings == []
    with pytest.raises(launcher.LauncherError, match="no cluster profile named 'nope'"):
        launcher.get_runs(cluster="nope")
    assert datetime.now(UTC) > a.created_at


def test_delete_and_run_not_found(specs):
    run = finished(specs, "doomed")
    deleted = launcher.delete_run(run.name)
    assert deleted.name == run.name
    with pytest.raises(launcher.RunNotFound) as missing:
        launcher.get_run(run.name)
    assert missing.value.exit_code == 2 and isinstance(missing.value, launcher.LauncherError)
    with pytest.raises(launcher.RunNotFound, match="no run named 'nothing-here'"):
        launcher.get_run_logs("nothing-here")
    with pytest.raises(launcher.RunNotFound):
        launcher.stop_runs(["doomed-zzzzzz"])
    assert launcher.delete_runs([]) == [] and launcher.stop_runs([]) == []


def test_stop_runs_and_delete_runs_take_runs_and_names(specs):
    one = launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, "one", "sleep 60")))
    two = launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, "two", "sleep 60")))
    for r in (one, two):
        launcher.wait_for_run_status(r, "RUNNING", timeout=60)
    stopped = launcher.stop_runs([one, two.name])
    assert [(r.name, r.status.value) for r in stopped] == [(one.name, "STOPPED"), (two.name, "STOPPED")]
    assert [r.name for r in launcher.delete_runs([one, two])] == [one.name, two.name]
    assert launcher.get_runs() == []


def test_update_run_changes_a_running_run_and_refuses_an_ended_one(specs):
    run = launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, "upd", "sleep 60")))
    try:
        launcher.wait_for_run_status(run, "RUNNING", timeout=60)
        updated = launcher.update_run(run, max_retries=2)
        assert updated.spec["scheduling"]["max_retries"] == 2
        assert launcher.get_run(run.name).spec["scheduling"]["max_retries"] == 2
        with pytest.raises(launcher.LauncherError, match="nothing to update"):
            launcher.update_run(run)
    finally:
        launcher.stop_run(run)
    with pytest.raises(launcher.LauncherError, match="has ended"):
        launcher.update_run(run, max_retries=3)


def test_metrics_points_and_to_pandas(specs):
    run = finished(specs, "curve", worker("--lines", "5", "--metrics"))
    points = launcher.get_run_metrics(run)
    assert [(p.metric, p.step, p.rank, p.attempt) for p in points] == [("loss/train/total", s, 0, 1) for s in range(5)]
    assert [p.value for p in points] == pytest.approx([1 / (s + 1) for s in range(5)])
    assert all(p.time > 0 for p in points)
    assert launcher.get_run_metrics(run, "loss/*") == points
    frame = points.to_pandas()
    assert list(frame.columns) == ["metric", "step", "value", "time", "rank", "attempt"]
    assert frame["step"].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(launcher.LauncherError, match="loss/train/totl") as unknown:
        launcher.get_run_metrics(run, "loss/train/totl")
    assert "did you mean" in (unknown.value.message + (unknown.value.hint or ""))
    assert launcher.get_run_metrics(finished(specs, "quiet")) == []
    # The records are the metrics' channel: the logs leave them out unless asked, as `launcher logs` does.
    shown, raw = (
        ["@@launcher.metrics" in str(line) for line in lines]
        for lines in (launcher.get_run_logs(run), launcher.get_run_logs(run, raw=True))
    )
    assert shown and not any(shown) and raw.count(True) == 5
    assert not any("@@launcher.metrics" in str(line) for line in launcher.get_run_logs(run, tail=3))


def test_secrets_never_show_a_value(specs):
    value = "tok-Very-Secret-987"
    made = launcher.create_secret("env", "api-token", value)
    assert (made.name, made.kind, made.options["env_key"], made.exposed_as) == (
        "api-token",
        "env",
        "API_TOKEN",
        ["API_TOKEN"],
    )
    listed = launcher.get_secrets()
    assert [s.name for s in listed] == ["api-token"] and value not in repr(listed)
    run = finished(specs, "uses-secret", worker("--lines", "1", "--print-env", "API_TOKEN"))
    logs = "\n".join(str(line) for line in launcher.get_run_logs(run))
    assert "the secret is " in logs and value not in logs
    with pytest.raises(launcher.LauncherError, match="no secret named 'other'"):
        launcher.delete_secrets(["api-token", "other"])
    assert launcher.delete_secrets("api-token") == ["api-token"] and launcher.get_secrets() == []
    with pytest.raises(launcher.LauncherError, match="not a kind of secret"):
        launcher.create_secret("password", "p", value)


def test_get_clusters(launcher_home):
    import yaml

    assert [(c.name, c.backend, c.current) for c in launcher.get_clusters()] == [("local", "local", True)]
    (launcher_home / "config.yaml").write_text(
        yaml.safe_dump(
            {"current": "gke", "clusters": {"gke": {"backend": "kubernetes", "context": "ctx", "namespace": "ml"}}}
        )
    )
    clusters = launcher.get_clusters()
    assert [(c.name, c.backend, c.current) for c in clusters] == [
        ("local", "local", False),
        ("gke", "kubernetes", True),
    ]
    assert clusters[1].settings["namespace"] == "ml"


def test_a_cluster_that_is_away_is_cluster_unreachable(launcher_home, specs):
    from tests.fakes.kube.faults import unreachable_server
    from tests.kubernetes.test_api_faults import add_profile

    run = finished(specs, "here")
    with unreachable_server("refused") as url:
        add_profile(launcher_home, "dead", url)
        with pytest.raises(launcher.ClusterUnreachable, match="cluster dead: cannot reach the API server") as away:
            launcher.get_runs(cluster="dead")
        assert away.value.exit_code == 1
        everywhere = launcher.get_runs()  # the profiles that answered, and a warning for the other
        assert [r.name for r in everywhere] == [run.name]
        assert len(everywhere.warnings) == 1 and everywhere.warnings[0].startswith("cluster dead: cannot reach")
        with pytest.raises(launcher.ClusterUnreachable):
            launcher.create_run(launcher.RunConfig.from_file(spec_file(specs, "there", "true")), cluster="dead")


def test_follow_run_goes_on_across_a_retry(specs):
    from launcher.backends.base import LogLine
    from launcher.sdk.logs import follow_run

    path = spec_file(specs, "retried", 'echo "attempt $LAUNCHER_ATTEMPT"; [ "$LAUNCHER_ATTEMPT" != 1 ] || exit 3')
    path.write_text(path.read_text() + "scheduling:\n  max_retries: 1\n  retry_backoff: {first: 0.1s}\n")
    run = launcher.create_run(launcher.RunConfig.from_file(path))
    items = list(follow_run(run))
    texts = [i.text for i in items if isinstance(i, LogLine) and i.text.startswith("attempt ")]
    assert texts == ["attempt 1", "attempt 2"]
    kinds = [i.kind for i in items if not isinstance(i, LogLine)]
    assert "restarted" in kinds and kinds[-1] == "ended"
    restarted = next(i for i in items if not isinstance(i, LogLine) and i.kind == "restarted")
    assert restarted.attempt == 1
    assert items[-1].run.status == "COMPLETED" and items[-1].attempt == 2
    assert [line.attempt for line in launcher.follow_run_logs(run) if line.text.startswith("attempt ")] == [1, 2]
