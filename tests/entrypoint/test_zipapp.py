"""The entrypoint's zipapp (launcher.pod.zipapp), run as a pod in zipapp mode runs it: by an
interpreter of the system, isolated and without site-packages (`python3 -I -S`), from the plan
the host wrote. The spec's integrations, the masking of secrets and the exit code hold there
as they do for `python -m launcher.entrypoint`."""

from __future__ import annotations

import glob
import os
import subprocess
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
    spec = RunSpec.model_validate({
        "name": "zipped", "image": "any:1",
        "command": 'cat "$PARAMETERS"; cat repo/which.txt; echo "token $API_TOKEN"; echo "flag $MY_FLAG"; exit 7',
        "parameters": {"lr": 0.5, "_hidden": 1}, "env_variables": {"MY_FLAG": "on"},
        "integrations": [{"integration_type": "git_repo", "git_repo": str(origin.bare), "git_branch": "feature",
                          "path": "repo"}]})
    plan = tmp_path / "plan.json"
    plan.write_text(plan_text(spec))
    env = entry.env({"name": "unused"}, extra={contract.PLAN: str(plan), contract.BACKEND: "kubernetes",
                                               "API_TOKEN": SECRET, contract.MASK_ENV: "API_TOKEN"})
    del env[contract.SPEC]
    done = subprocess.run([python, "-I", "-S", str(archive)], env=env, cwd=entry.workdir, capture_output=True,
                          text=True, timeout=60)
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
    probe = (f"import sys; sys.path.insert(0, {str(archive)!r}); "
             + "; ".join(f"import {n.removesuffix('.__init__')}" for n in names)
             + "; print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'pydantic')))")
    done = subprocess.run(["/usr/bin/python3", "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert Path(archive).stat().st_size < 100_000
