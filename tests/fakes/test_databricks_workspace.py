"""The fake workspace program, driven only through databricks-sdk's WorkspaceClient."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from databricks.sdk import errors
from databricks.sdk.service.jobs import RunLifeCycleState, RunResultState, SubmitTask
from databricks.sdk.service.workspace import ImportFormat

from tests.conftest import wait_until
from tests.fakes.databricks_workspace import WorkspaceProgram, running

LOGS = "/Volumes/main/default/logs"


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkspaceProgram]:
    with running(tmp_path_factory.mktemp("workspace"), "main/default/logs") as program:
        yield program


def upload(w, path: str, source: str) -> None:
    w.workspace.mkdirs(path.rsplit("/", 1)[0])
    w.workspace.import_(
        path, content=base64.b64encode(source.encode()).decode(), format=ImportFormat.RAW, overwrite=True
    )


def submit(w, source: str, *, env: dict | None = None, token: str | None = None, timeout: int | None = None, name="t"):
    path = f"/Shared/tests/{name}.py"
    upload(w, path, source)
    task = {
        "task_key": "main",
        "spark_python_task": {"python_file": path, "parameters": ["/Workspace/Shared/tests", "x"]},
        "new_cluster": {
            "spark_version": "15.4.x-gpu-ml-scala2.12",
            "node_type_id": "m5d.xlarge",
            "num_workers": 0,
            "spark_env_vars": env or {},
            "cluster_log_conf": {"volumes": {"destination": f"{LOGS}/{name}"}},
        },
    }
    return w.jobs.submit(
        run_name=name, idempotency_token=token, timeout_seconds=timeout, tasks=[SubmitTask.from_dict(task)]
    ).run_id


def ended(w, run_id: int, timeout: float = 60):
    return wait_until(
        lambda: (
            (r := w.jobs.get_run(run_id)).state.life_cycle_state
            in (RunLifeCycleState.TERMINATED, RunLifeCycleState.INTERNAL_ERROR)
            and r
        ),
        timeout,
    )


def test_a_run_goes_through_its_life_cycle_with_its_parameters_and_secrets(fake):
    w = fake.client()
    w.secrets.create_scope("s-life")
    w.secrets.put_secret("s-life", "token", string_value="hunter2-value")
    run_id = submit(
        w,
        "import os, sys, time\ntime.sleep(1)\nprint('args', sys.argv[2:], os.path.isdir(sys.argv[1]), os.environ['TOKEN'])",
        env={"TOKEN": "{{secrets/s-life/token}}"},
        name="life",
    )
    seen = set()
    run = wait_until(
        lambda: (
            (r := w.jobs.get_run(run_id), seen.add(r.state.life_cycle_state))[0].state.life_cycle_state
            == RunLifeCycleState.TERMINATED
            and r
        ),
        60,
        interval=0.05,
    )
    assert {RunLifeCycleState.PENDING, RunLifeCycleState.RUNNING} <= seen
    assert run.state.result_state == RunResultState.SUCCESS
    assert run.status.state.value == "TERMINATED"
    assert run.status.termination_details.code.value == "SUCCESS"
    task = run.tasks[0]
    output = w.jobs.get_run_output(task.run_id)
    assert output.logs == "args ['x'] True hunter2-value\n" and not output.logs_truncated
    delivered = w.files.download(f"{LOGS}/life/{task.cluster_instance.cluster_id}/driver/stdout").contents.read()
    assert delivered == b"args ['x'] True hunter2-value\n"


def test_a_failing_driver_fails_the_run_with_its_error(fake):
    w = fake.client()
    run = ended(w, submit(w, "raise SystemExit('boom: bad input')", name="fails"))
    assert run.state.result_state == RunResultState.FAILED
    assert run.status.termination_details.code.value == "RUN_EXECUTION_ERROR"
    assert w.jobs.get_run_output(run.tasks[0].run_id).error == "boom: bad input"
    with pytest.raises(errors.InvalidParameterValue, match="multiple tasks"):
        w.jobs.get_run_output(run.run_id)


def test_cancel_and_timeout_end_a_running_driver(fake):
    w = fake.client()
    sleeper = "import time\nprint('up', flush=True)\ntime.sleep(600)"
    cancelled = submit(w, sleeper, name="cancel")
    timed = submit(w, sleeper, name="timeout", timeout=2)
    wait_until(lambda: w.jobs.get_run(cancelled).state.life_cycle_state == RunLifeCycleState.RUNNING, 30)
    w.jobs.cancel_run(cancelled)
    run = ended(w, cancelled)
    assert run.state.result_state == RunResultState.CANCELED
    assert run.status.termination_details.code.value == "USER_CANCELED"
    run = ended(w, timed)
    assert run.state.result_state == RunResultState.TIMEDOUT


def test_a_missing_secret_fails_the_cluster(fake):
    w = fake.client()
    run = ended(w, submit(w, "print(1)", env={"X": "{{secrets/nope/key}}"}, name="nosecret"))
    assert run.state.life_cycle_state == RunLifeCycleState.INTERNAL_ERROR
    assert "nope/key" in run.state.state_message


def test_a_serverless_ai_runtime_task_runs_its_command_path_on_an_offered_accelerator(fake):
    w = fake.client()
    upload(w, "/Shared/tests/sls.py", "import sys\nprint('serverless', sys.argv[1:])")

    def body(kind: str, count: int) -> dict:
        deployment = {
            "command_path": "/Shared/tests/sls.py",
            "compute": {"accelerator_type": kind, "accelerator_count": count},
        }
        return {
            "run_name": "sls",
            "tasks": [{"task_key": "t", "ai_runtime_task": {"deployments": [deployment], "parameters": ["p"]}}],
        }

    for kind, count in (("GPU_4xA100", 4), ("GPU_8xH100", 4), ("GPU_1xA10", 2)):
        with pytest.raises(errors.InvalidParameterValue, match="accelerator_"):
            w.api_client.do("POST", "/api/2.2/jobs/runs/submit", body=body(kind, count))
    run_id = w.api_client.do("POST", "/api/2.2/jobs/runs/submit", body=body("GPU_8xH100", 16))["run_id"]
    run = ended(w, run_id)
    assert run.state.result_state == RunResultState.SUCCESS
    assert "serverless ['p']" in w.jobs.get_run_output(run.tasks[0].run_id).logs


def test_an_idempotency_token_makes_one_run(fake):
    w = fake.client()
    first = submit(w, "print(1)", token="same-token", name="idem")
    assert submit(w, "print(1)", token="same-token", name="idem") == first
    assert sum(s["run_name"] == "idem" for s in fake.submits()) == 1


def test_429_and_503_are_retried_by_the_sdk(fake):
    w = fake.client()
    fake.fail("POST", "/api/2.2/jobs/runs/submit", 429, "TOO_MANY_REQUESTS")
    fake.fail("GET", "/api/2.2/jobs/runs/get", 503, "TEMPORARILY_UNAVAILABLE")
    run = ended(w, submit(w, "print(1)", name="retried"))
    assert run.state.result_state == RunResultState.SUCCESS


def test_a_lost_run_is_gone(fake):
    w = fake.client()
    run_id = submit(w, "import time; time.sleep(600)", name="lost")
    fake.control("lose", {"run_id": run_id})
    with pytest.raises(errors.NotFound, match="does not exist"):
        w.jobs.get_run(run_id)


def test_list_pages_and_secrets_and_workspace(fake):
    w = fake.client()
    for i in range(3):
        submit(w, "print(1)", name=f"page{i}")
    names = [r.run_name for r in w.jobs.list_runs(limit=2)]
    assert len(names) == len(set(r.run_id for r in w.jobs.list_runs(limit=2))) and {"page0", "page2"} <= set(names)
    w.secrets.create_scope("s-list")
    w.secrets.put_secret("s-list", "a", string_value="1")
    assert [s.key for s in w.secrets.list_secrets("s-list")] == ["a"]
    w.secrets.delete_scope("s-list")
    assert "s-list" not in [s.name for s in w.secrets.list_scopes()]
    with pytest.raises(errors.NotFound):
        w.workspace.export("/Shared/nope.py")
    w.workspace.delete("/Shared/tests", recursive=True)
    with pytest.raises(errors.NotFound):
        w.workspace.get_status("/Shared/tests")


def test_a_wrong_token_is_unauthenticated(fake):
    w = WorkspaceProgram(fake.host, "dapi-wrong").client()
    with pytest.raises(errors.Unauthenticated):
        w.current_user.me()
    assert fake.client().current_user.me().user_name


def test_the_program_writes_its_url_and_stops(tmp_path: Path):
    with running(tmp_path) as program:
        assert program.host.startswith("http://127.0.0.1:")
    assert not list(tmp_path.glob("fake-workspace-root/Workspace"))  # its root goes with it


def test_mlflow_metric_history_is_served_in_pages(fake):
    w = fake.client()
    experiment = w.experiments.create_experiment("/Users/fake-user@example.com/curves").experiment_id
    run = w.experiments.create_run(experiment_id=experiment, run_name="r").run.info.run_id
    for step in range(3):
        w.experiments.log_metric("loss", 3.0 - step, int(time.time() * 1000), run_id=run, step=step)
    history = list(w.experiments.get_history("loss", run_id=run, max_results=2))
    assert [(m.step, m.value) for m in history] == [(0, 3.0), (1, 2.0), (2, 1.0)]


def test_repair_runs_a_failed_task_again(fake, tmp_path):
    w = fake.client()
    marker = str(tmp_path / "ran-once")
    source = f"import os, sys\nif not os.path.exists({marker!r}):\n    open({marker!r}, 'w').close()\n    sys.exit(1)\nprint('second time')"
    run = ended(w, submit(w, source, name="repair"))
    assert run.state.result_state == RunResultState.FAILED
    w.jobs.repair_run(run.run_id, rerun_all_failed_tasks=True)
    run = wait_until(lambda: (r := w.jobs.get_run(run.run_id)).state.result_state == RunResultState.SUCCESS and r, 60)
    output = w.jobs.get_run_output(run.tasks[0].run_id)
    assert output.logs == "second time\n" and output.error is None
