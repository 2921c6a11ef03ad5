"""launcher.mcli's answers where mcli's examples do not go: mcli's errors for bad input and
missing runs, NotSupported (status 501) naming why for what only the MosaicML platform has,
timeouts, futures, and secrets whose values never reach a repr."""

from __future__ import annotations

from concurrent.futures import Future
from http import HTTPStatus

import pytest

import launcher.mcli as mcli
from launcher.mcli import RunConfig

PLATFORM_ONLY = {
    "initialize": ((), "API key"),
    "set_api_key": (("key",), "API key"),
    "create_inference_deployment": (({},), "inference deployments"),
    "get_inference_deployments": ((), "inference deployments"),
    "predict": (("d", {}), "inference deployments"),
    "ping": (("d",), "inference deployments"),
}


@pytest.mark.parametrize("name", sorted(PLATFORM_ONLY))
def test_what_only_the_platform_has_is_not_supported(name):
    args, why = PLATFORM_ONLY[name]
    with pytest.raises(mcli.NotSupported, match=why) as e:
        getattr(mcli, name)(*args)
    assert e.value.status is HTTPStatus.NOT_IMPLEMENTED and isinstance(e.value, mcli.MAPIException)


def test_a_bad_config_is_a_run_config_exception_naming_the_field(launcher_home):
    with pytest.raises(mcli.RunConfigException, match=r"compute.gpus: must be zero or more") as e:
        mcli.create_run(RunConfig(name="x", command="true", compute={"gpus": -1}))
    assert e.value.status is HTTPStatus.BAD_REQUEST
    with pytest.raises(mcli.RunConfigException, match="command: is required"):
        mcli.create_run(RunConfig(name="x"))


def test_a_missing_run_is_404_and_a_future_holds_it(launcher_home):
    with pytest.raises(mcli.MAPIException, match="no run named 'nope'") as e:
        mcli.get_run("nope")
    assert e.value.status is HTTPStatus.NOT_FOUND
    future = mcli.get_run("nope", future=True)
    assert isinstance(future, Future) and isinstance(future.exception(timeout=60), mcli.MAPIException)


def test_what_a_submitted_run_cannot_change_says_so(launcher_home):
    with pytest.raises(mcli.NotSupported, match="scheduling.preemptible"):
        mcli.update_run("any", preemptible=True)
    with pytest.raises(mcli.NotSupported, match="retry_on_system_failure"):
        mcli.update_run("any", {"retryOnSystemFailure": True})
    with pytest.raises(mcli.MAPIException, match="'colour' is not a field"):
        mcli.update_run("any", {"colour": "red"})
    with pytest.raises(mcli.NotSupported, match="metadata"):
        mcli.update_run_metadata("any", {"k": "v"})
    with pytest.raises(mcli.NotSupported, match="record no user"):
        mcli.get_runs(user_emails=["someone@example.com"])
    with pytest.raises(mcli.MAPIException, match="'yesterday' is not a date"):
        mcli.get_runs(before="yesterday")


def test_wait_times_out_and_update_changes_what_the_backend_can(launcher_home):
    run = mcli.create_run(RunConfig(name="sleeper", command="sleep 120", compute={"gpus": 0}))
    try:
        assert mcli.wait_for_run_status(run, "RUNNING", timeout=120).status is mcli.RunStatus.RUNNING
        with pytest.raises(TimeoutError, match="did not reach COMPLETED within 0.3 s"):
            mcli.wait_for_run_status(run, mcli.RunStatus.COMPLETED, timeout=0.3)
        updated = mcli.update_run(run, max_duration=2, max_retries=1)
        assert (updated.max_duration, updated.max_retries) == (2, 1)
        assert mcli.get_runs(statuses=["RUNNING"], gpu_nums=[0])[0].name == run.name
        assert mcli.get_runs(gpu_nums=[8]) == []
    finally:
        assert mcli.stop_run(run, reason="done").status is mcli.RunStatus.STOPPED
    restarted = mcli.start_run(run.name)
    assert restarted.name == run.name and restarted.resumption_count == 2
    assert mcli.delete_runs([restarted])[0].name == run.name and mcli.get_runs() == []


def test_secret_values_never_reach_a_repr_or_an_error(launcher_home):
    value = "tok-Very-Secret-987"
    secret = mcli.MCLIEnvVarSecret(name="api-token", secret_type=mcli.SecretType.environment, value=value)
    assert value not in repr(secret) and value not in str(secret)
    made = mcli.create_secret(secret)
    assert (made.name, made.key, made.secret_type) == ("api-token", "API_TOKEN", mcli.SecretType.environment)
    assert value not in repr(mcli.get_secrets())
    with pytest.raises(mcli.MAPIException, match="needs value"):
        mcli.create_secret(mcli.MCLIMountedSecret(name="empty", secret_type=mcli.SecretType.mounted))
    assert [s.name for s in mcli.get_secrets(secret_types=["environment"])] == ["api-token"]
    assert mcli.get_secrets(secret_types=[mcli.SecretType.s3]) == []
    assert [s.name for s in mcli.delete_secrets()] == ["api-token"] and mcli.get_secrets() == []


def test_logs_are_str_and_the_wrong_container_is_not_supported(launcher_home):
    run = mcli.create_run(RunConfig(name="talk", command="echo one; echo two", compute={"gpus": 0}))
    run = mcli.wait_for_run_status(run, "COMPLETED", timeout=120)
    chunks = list(mcli.get_run_logs(run))
    assert all(isinstance(c, str) for c in chunks) and "one\ntwo\n" in "".join(chunks)
    assert "".join(mcli.get_run_logs(run, tail=4)) == "".join(chunks)[-4:]
    assert "one\ntwo\n" in "".join(mcli.follow_run_logs(run, resumption=0))
    with pytest.raises(mcli.NotSupported, match="one container"):
        list(mcli.get_run_logs(run, container="sidecar"))
    with pytest.raises(mcli.NotSupported, match="follows a log from its start"):
        mcli.follow_run_logs(run, tail=10)
