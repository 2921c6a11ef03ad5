"""mcli and llm-foundry run YAMLs work unchanged: each validates, dry-runs for both
backends (Kubernetes with the shipped defaults, no cluster), and the runnable ones run
on the local backend, where the command reads /mnt/config/parameters.yaml and a file
secret at its mount path, in a private mount namespace or with the paths rewritten."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli as launcher_cli

from .yamls import READ_PARAMETERS, TABLE, render

NO_SERVER = "http://127.0.0.1:9/org/repo.git"


@pytest.fixture
def call(launcher_home, capsys):
    def invoke(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = run_cli(launcher_cli, [str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def allow_host_packages(home: Path) -> None:
    """Let apt_packages install on this machine (clusters.local.allow_host_packages)."""
    (home / "config.yaml").write_text(yaml.safe_dump({"clusters": {"local": {"allow_host_packages": True}}}))


@pytest.mark.parametrize("key", list(TABLE))
def test_each_mcli_yaml_validates_and_dry_runs_for_both_backends(key, call, tmp_path, launcher_home):
    template, base, max_seq_len, _ = TABLE[key]
    spec = tmp_path / f"{key}.yaml"
    spec.write_text(render(template, NO_SERVER))

    if "apt_packages" in template:
        # As `run` does, validate and a dry-run refuse apt_packages on this machine until it allows them.
        for args in (["validate"], ["run", "--dry-run", "--backend", "local"]):
            code, _, err = call(*args, "-f", spec)
            assert code == 2 and "apt_packages: the local backend does not install system packages" in err, err
        allow_host_packages(launcher_home)

    code, out, err = call("validate", "-f", spec)
    assert code == 0, err
    resolved = yaml.safe_load(out.split("\n", 1)[1])
    assert re.fullmatch(rf"{base}-[a-z0-9]{{6}}", resolved["name"]), resolved["name"]

    code, out, err = call("run", "-f", spec, "--dry-run", "--backend", "local", "-o", "json")
    assert code == 0, err
    local = json.loads(out)
    assert local["run"]["parameters"]["max_seq_len"] == max_seq_len
    assert local["environment"]["RUN_NAME"] == local["run"]["name"]

    code, out, err = call("run", "-f", spec, "--dry-run", "--backend", "kubernetes", "-o", "json")
    assert code == 0, err
    assert "Traceback" not in err
    items = json.loads(out)["items"]
    config_maps = [i for i in items if i["kind"] == "ConfigMap"]
    params = yaml.safe_load(config_maps[0]["data"]["parameters.yaml"])
    assert params["max_seq_len"] == max_seq_len
    assert not any(str(k).startswith("_") for k in params)  # mcli drops _keys from the file
    if "cluster: r" in template:  # an mcli cluster name is a note, never an error
        assert "names no cluster profile here" in err


def test_the_full_083_yaml_maps_integrations_and_notes_platform_fields(call, tmp_path, launcher_home):
    allow_host_packages(launcher_home)  # its apt_packages: a dry-run refuses them here, as run does, otherwise
    spec = tmp_path / "full.yaml"
    spec.write_text(render(TABLE["full-0.8.3"][0], NO_SERVER))
    code, out, err = call("run", "-f", spec, "--dry-run", "--backend", "local", "-o", "json")
    assert code == 0, err
    env = json.loads(out)["environment"]
    name = json.loads(out)["run"]["name"]
    assert {k: env[k] for k in env if k.startswith(("WANDB_", "MLFLOW_", "COMET_"))} == {
        "WANDB_NAME": name,
        "WANDB_PROJECT": "my-project",
        "WANDB_ENTITY": "my-team",
        "WANDB_RUN_GROUP": "sweep",
        "WANDB_JOB_TYPE": "train",
        "WANDB_TAGS": "a,b",
        "MLFLOW_EXPERIMENT_NAME": "/Users/someone@example.com/my-experiment",
        "MLFLOW_TRACKING_URI": "databricks",
        "COMET_PROJECT_NAME": "comet-project",
        "COMET_WORKSPACE": "comet-ws",
    }
    notes = [line for line in err.splitlines() if "accepted and ignored here" in line]
    assert len(notes) == 1, err  # one note for all of them, pointing at the first
    for field in (
        "optimization_level",
        "platform",
        "dependent_deployment",
        "parent_name",
        "scheduling.resumable",
        "scheduling.watchdogEnabled",
    ):
        assert field in notes[0]
    assert re.search(r"full\.yaml:\d+:", notes[0])


def _mounts_possible() -> str | None:
    import os

    from launcher.backends.local.mounts import namespace_problem

    saved = os.environ.pop("LAUNCHER_LOCAL_MOUNTS", None)
    try:
        return namespace_problem(["/mnt/config", SECRET_MOUNT])
    finally:
        if saved is not None:
            os.environ["LAUNCHER_LOCAL_MOUNTS"] = saved


SECRET_MOUNT = "/secrets/launcher-mcli-test"
SECRET_VALUE = "mcli-file-secret-value"


@pytest.mark.parametrize("key, mode", [("foundry-1b", "auto"), ("legacy", "rewrite")])
def test_mcli_yaml_runs_locally_with_mnt_config_and_the_secret_mount_path(key, mode, cli, git_http, tmp_path):
    if mode == "auto" and _mounts_possible():
        pytest.skip(f"no private mount namespace on this machine: {_mounts_possible()}")
    server = git_http()
    template, base, max_seq_len, runs_locally = TABLE[key]
    assert runs_locally
    # The command also reads the file secret where mcli puts it (reversed: the log masks the value).
    text = render(template, f"{server.url}/org/repo.git").replace(
        READ_PARAMETERS,
        f'{READ_PARAMETERS} && rev {SECRET_MOUNT}/secret && echo "path=$SECRET_PATH_CREDS" '
        "&& echo \"run_config commands=$(grep -c '^command:' /mnt/config/run_config.yaml)\"",
    )
    spec = cli.spec(key, text)
    (tmp_path / "creds").write_text(SECRET_VALUE)
    r = cli("secret", "create", "file", "creds", "--from", str(tmp_path / "creds"), "--mount-path", SECRET_MOUNT)
    assert r.returncode == 0, r.stderr
    cli.env["LAUNCHER_LOCAL_MOUNTS"] = mode

    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    name = re.search(rf"Run ({base}-[a-z0-9]{{6}}) started", r.stderr).group(1)
    assert SECRET_VALUE[::-1] in r.stdout
    assert "run_config commands=1" in r.stdout  # run_config.yaml holds the submitted spec, as in mcli
    if mode == "auto":
        assert f"parameters /mnt/config/parameters.yaml max_seq_len {max_seq_len}" in r.stdout
        assert f"path={SECRET_MOUNT}/secret" in r.stdout
        assert "[launcher] private mount namespace: /mnt/config ->" in r.stdout
        assert not Path("/mnt/config/parameters.yaml").exists()  # mounted for the run only
    else:
        config = cli.home / "runs" / name / "config"
        assert f"parameters {config}/parameters.yaml max_seq_len {max_seq_len}" in r.stdout
        assert f"path={cli.home / 'runs' / name / 'private' / 'creds'}/secret" in r.stdout
        notes = [line for line in r.stdout.splitlines() if "no private mount namespace here" in line]
        assert len(notes) == 1 and notes[0].startswith("[launcher] ") and "LAUNCHER_LOCAL_MOUNTS=rewrite" in notes[0]
        assert f"/mnt/config -> {config}" in notes[0] and SECRET_MOUNT in notes[0]


def test_rewriting_replaces_whole_path_components_only():
    from launcher.backends.local.mounts import rewrite_spec

    binds = [("/home/u/run/config", "/mnt/config"), ("/home/u/run/private/c", "/secrets/c")]
    spec = {
        "command": "cat /mnt/config/parameters.yaml /mnt/config2/x /secrets/c/secret; ls /mnt/config",
        "parameters": {"paths": ["/mnt/config/a.yaml", {"deep": "/secrets/c"}], "n": 3},
        "env_variables": {"CFG": "/mnt/config/parameters.yaml"},
        "name": "/mnt/config",
    }
    out = rewrite_spec(spec, binds)
    assert out["command"] == (
        "cat /home/u/run/config/parameters.yaml /mnt/config2/x /home/u/run/private/c/secret; ls /home/u/run/config"
    )
    assert out["parameters"] == {"paths": ["/home/u/run/config/a.yaml", {"deep": "/home/u/run/private/c"}], "n": 3}
    assert out["env_variables"] == {"CFG": "/home/u/run/config/parameters.yaml"}
    assert out["name"] == "/mnt/config"  # only the command, parameters and env_variables


def test_a_mount_point_that_cannot_exist_falls_back_to_rewriting(tmp_path, monkeypatch):
    from launcher.backends.local.mounts import REWRITE, plan_mounts

    monkeypatch.delenv("LAUNCHER_LOCAL_MOUNTS", raising=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    plan = plan_mounts(tmp_path / "config", {f"{blocker}/creds": tmp_path / "private" / "creds"})
    assert plan.mode == REWRITE and str(blocker) in plan.reason
    assert plan.seen_as(str(tmp_path / "private" / "creds")) == str(tmp_path / "private" / "creds")
    monkeypatch.setenv("LAUNCHER_LOCAL_MOUNTS", "sometimes")
    assert "is not auto or rewrite" in plan_mounts(tmp_path / "config", {}).reason


def test_environment_only_integrations_run_as_steps_that_set_variables(tmp_path):
    from tests.entrypoint.conftest import Entrypoint

    entry = Entrypoint(tmp_path)
    try:
        result = entry.run(
            {
                "command": 'echo "mlflow=$MLFLOW_EXPERIMENT_NAME@$MLFLOW_TRACKING_URI comet=$COMET_PROJECT_NAME/$COMET_WORKSPACE"',
                "integrations": [
                    {"integration_type": "mlflow", "experiment_name": "/Users/me/exp"},
                    {"integration_type": "comet_ml", "project_name": "p", "workspace": "w"},
                ],
            }
        )
    finally:
        entry.kill_all()
    assert result.code == 0, result.out
    assert "[launcher] integration 1/2: mlflow" in result.out and "[launcher] integration 2/2: comet_ml" in result.out
    assert "mlflow=/Users/me/exp@databricks comet=p/w" in result.out
