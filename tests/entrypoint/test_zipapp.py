"""The entrypoint's zipapp (launcher.pod.zipapp), run as a pod in zipapp mode runs it: by an
interpreter of the system, isolated and without site-packages (`python3 -I -S`), from the plan
the host wrote. The spec's integrations, the masking of secrets and the exit code hold there
as they do for `python -m launcher.entrypoint`."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.pod import contract, zipapp
from launcher.spec.models import RunSpec
from launcher.spec.plan import plan_text

SECRET = "zipapp-Secret-Value-4417"


def interpreters() -> list[str]:
    """/usr/bin/python3, and the oldest Python the zipapp supports where this machine has it."""
    found = ["/usr/bin/python3"]
    found += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))[:1]
    return found


@pytest.mark.parametrize("python", interpreters())
def test_the_zipapp_runs_a_plan_with_an_isolated_system_python(entry, origin, tmp_path, python):
    archive = zipapp.write(tmp_path / "entrypoint.pyz")
    spec = RunSpec.model_validate(
        {
            "name": "zipped",
            "image": "any:1",
            "command": 'cat "$PARAMETERS"; cat repo/which.txt; echo "token $API_TOKEN"; echo "flag $MY_FLAG"; exit 7',
            "parameters": {"lr": 0.5, "_hidden": 1},
            "env_variables": {"MY_FLAG": "on"},
            "integrations": [
                {"integration_type": "git_repo", "git_repo": str(origin.bare), "git_branch": "feature", "path": "repo"}
            ],
        }
    )
    plan = tmp_path / "plan.json"
    plan.write_text(plan_text(spec))
    env = entry.env(
        {"name": "unused"},
        extra={
            contract.PLAN: str(plan),
            contract.BACKEND: "kubernetes",
            "API_TOKEN": SECRET,
            contract.MASK_ENV: "API_TOKEN",
        },
    )
    del env[contract.SPEC]
    done = subprocess.run(
        [python, "-I", "-S", str(archive)], env=env, cwd=entry.workdir, capture_output=True, text=True, timeout=60
    )
    out = done.stdout
    assert done.returncode == 7, out + done.stderr
    assert f"[launcher] entrypoint {archive} run by {python} (Python " in out and "isolated, no site-packages" in out
    assert "integration 1/1: git_repo" in out and "feature-2" in out
    assert "lr: 0.5" in out and "_hidden" not in out
    assert "token ****" in out and SECRET not in out and "flag on" in out
    assert "[launcher] exit code 7" in out


def test_the_zipapp_holds_no_module_that_needs_more_than_the_standard_library(tmp_path):
    archive = zipapp.write(tmp_path / "entrypoint.pyz")
    names = [n[:-3].replace("/", ".") for n, _ in zipapp.sources()]
    probe = (
        f"import sys; sys.path.insert(0, {str(archive)!r}); "
        + "; ".join(f"import {n.removesuffix('.__init__')}" for n in names)
        + "; print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'pydantic')))"
    )
    done = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    # A budget that makes growth a choice; the limit is the run's ConfigMap, which carries it
    # base64'd (render.CONFIGMAP_LIMIT). 100 kB until the straggler's own end (issue 38).
    assert Path(archive).stat().st_size < 105_000


def test_the_zipapp_checks_first_the_standard_library_its_modules_import():
    """What __main__.py imports before the entrypoint: the standard library only (anything else
    would fail every pod with exit 67), less what is optional (imported under except ImportError)."""
    required = zipapp.required_modules()
    assert {"json", "shutil", "ctypes", "urllib.request"} <= set(required)
    assert {m.split(".")[0] for m in required} <= set(sys.stdlib_module_names)
    assert "ahocorasick_rs" not in required and "resource" not in required


@pytest.fixture(params=["s3", "volume", "gs"])
def archive_store(request, tmp_path):
    """(LAUNCHER_LOG_ARCHIVE and the env a log_store_secret gives, the archived files of a rank):
    moto S3 through an s3 secret's files alone, a Volume on the fake Files API, and gs://."""
    if request.param == "s3":
        s3 = request.getfixturevalue("s3")
        creds, config = tmp_path / "aws-credentials", tmp_path / "aws-config"
        creds.write_text("[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
        config.write_text(f"[default]\nregion = us-east-1\nendpoint_url = {s3.endpoint}\n")
        # Empty: the s3 fixture set them in this process, whose env the entrypoint's starts from.
        env = {var: "" for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_ENDPOINT_URL")}
        run = f"logs/{tmp_path.name}"  # moto keeps its buckets for the whole test process
        env.update(
            {
                "LAUNCHER_LOG_ARCHIVE": f"s3://{s3.bucket}/{run}",
                "AWS_SHARED_CREDENTIALS_FILE": str(creds),
                "AWS_CONFIG_FILE": str(config),
            }
        )
        return env, lambda: [
            s3.client.get_object(Bucket=s3.bucket, Key=k)["Body"].read() for k in s3.keys(f"{run}/attempt-1/rank-0/")
        ]
    if request.param == "volume":
        volume = request.getfixturevalue("databricks_files")
        root = "/Volumes/main/default/data/logs/zipped/attempt-1/rank-0/"
        return (
            {"LAUNCHER_LOG_ARCHIVE": "dbfs:/Volumes/main/default/data/logs/zipped", **volume.env()},
            lambda: [volume.read(p) for p in volume.paths(root)],
        )
    return {"LAUNCHER_LOG_ARCHIVE": "gs://bucket/logs/zipped"}, lambda: []


@pytest.mark.parametrize("python", interpreters())
def test_the_zipapp_archives_the_masked_log_with_the_standard_library(entry, tmp_path, archive_store, python):
    """What the rank's isolated interpreter archives, without boto3 or databricks-sdk; a
    scheme it cannot write is one line in its log, and the run goes on."""
    extra, archived = archive_store
    archive = zipapp.write(tmp_path / "entrypoint.pyz")
    spec = RunSpec.model_validate(
        {
            "name": "zipped",
            "image": "any:1",
            "command": 'for i in 1 2 3; do echo "line $i"; done; echo "token $API_TOKEN"',
        }
    )
    plan = tmp_path / "plan.json"
    plan.write_text(plan_text(spec))
    env = entry.env(
        {"name": "unused"},
        extra={
            contract.PLAN: str(plan),
            contract.BACKEND: "kubernetes",
            "API_TOKEN": SECRET,
            contract.MASK_ENV: "API_TOKEN",
            **extra,
        },
    )
    del env[contract.SPEC]
    done = subprocess.run(
        [python, "-I", "-S", str(archive)], env=env, cwd=entry.workdir, capture_output=True, text=True, timeout=60
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "line 3\ntoken ****\n" in out and SECRET not in out
    if extra["LAUNCHER_LOG_ARCHIVE"].startswith("gs://"):
        assert (
            "[launcher] log archive: gs:// is not supported by the pod's entrypoint; use s3://<bucket>/<prefix>, "
            "dbfs:/Volumes/<catalog>/<schema>/<volume>/... or a path (or file://) on a volume every pod mounts; "
            "this rank's log is not archived\n"
        ) in out
        return
    assert "log archive" not in out
    assert b"".join(archived()).decode() == out
