"""The zipapp entrypoint mode (the default) against the fake cluster run as a program: an
image whose only Python is an interpreter of the system, with nothing of ours installed or
pulled, runs a run; an image with no Python fails at once, saying so."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import urllib.request
from pathlib import Path

import pytest
import yaml

from launcher.pod import contract
from tests.kubernetes.test_jobset import launcher

SYSTEM_PYTHON = Path("/usr/bin/python3")
IMAGE = "registry.example/system-python:1"
# The shipped default, which the fixtures replace with `image` for the tests that need no image.
ZIPAPP = {"entrypoint_mode": "zipapp"}
PODS = "/api/v1/namespaces/default/pods?labelSelector=launcher.dev/run%3D"
# Prints what a rank sees, with the image's python: the only one on its PATH.
REPORT = (
    'python3 -c \'import json, os, sys; print("REPORT " + json.dumps({"rank": os.environ["NODE_RANK"], '
    '"params": open("/mnt/config/parameters.yaml").read(), "run": os.environ["RUN_NAME"], '
    '"world": os.environ["WORLD_SIZE"], "python": sys.executable}))\''
)


def image_dir(root: Path, python: Path | None) -> Path:
    """An image: bash and, if given, `python` as its python3, and nothing else on its PATH."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "bash").symlink_to("/bin/bash")
    if python is not None:
        (bin_dir / "python3").symlink_to(python)
    return bin_dir


def older_python() -> Path | None:
    """A Python 3.8 (the oldest the zipapp supports), where this machine has one: pyenv's
    build, or one on PATH (not pyenv's shim, a bash script that needs pyenv itself)."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    on_path = shutil.which("python3.8")
    if on_path and "shims" not in Path(on_path).parts:
        found.append(on_path)
    return Path(found[0]).resolve() if found else None


def run_spec(tmp_path: Path, name: str, nodes: int, command: str = REPORT) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "image": IMAGE,
                "command": command,
                "compute": {"gpu_type": "none", "nodes": nodes},
                "parameters": {"lr": 0.5, "_hidden": 1},
            }
        )
    )
    return path


def reports(out: str) -> list[dict]:
    return [json.loads(line.split("REPORT ", 1)[1]) for line in out.splitlines() if "REPORT {" in line]


def pods_of(kube, name: str) -> list[dict]:
    with urllib.request.urlopen(kube.url + PODS + name, timeout=10) as resp:
        return json.loads(resp.read())["items"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_an_image_whose_only_python_is_the_systems_runs(fake_kube_program, tmp_path, capsys, nodes):
    """/usr/bin/python3 runs the entrypoint with -I -S: no site-packages, nothing of ours. The
    runtime image is mapped to nothing: a pod that pulled it would fail."""
    assert SYSTEM_PYTHON.exists()
    image_bin = image_dir(tmp_path / "image", SYSTEM_PYTHON)
    kube = fake_kube_program("--nodes", str(nodes), "--image", f"{IMAGE}={image_bin.parent}", profile=ZIPAPP)
    capsys.readouterr()
    code = launcher("run", "-f", str(run_spec(tmp_path, "system-python", nodes)), "--cluster", "fake", "--follow")
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"entrypoint /mnt/config/entrypoint.pyz run by {image_bin}/python3 (Python 3." in out
    assert "isolated, no site-packages)" in out
    name = re.search(r"Run (\S+) started", out + err).group(1)
    got = reports(out)
    assert sorted(r["rank"] for r in got) == [str(r) for r in range(nodes)]
    assert all(r["params"] == "lr: 0.5\n" and r["run"] == name and r["world"] == str(nodes) for r in got)
    pods = pods_of(kube, name)
    assert len(pods) == nodes
    for pod in pods:
        assert "initContainers" not in pod["spec"]
        assert pod["spec"]["containers"][0]["image"] == IMAGE


def test_the_oldest_python_it_supports_runs_it(fake_kube_program, tmp_path, capsys):
    python = older_python()
    if python is None:
        pytest.skip("no Python 3.8 on this machine (pyenv's or on PATH)")
    image_bin = image_dir(tmp_path / "image", python)
    fake_kube_program("--nodes", "1", "--image", f"{IMAGE}={image_bin.parent}", profile=ZIPAPP)
    capsys.readouterr()
    code = launcher("run", "-f", str(run_spec(tmp_path, "python-38", 1)), "--cluster", "fake", "--follow")
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert f"run by {image_bin}/python3 (Python 3.8." in out
    assert reports(out)[0]["params"] == "lr: 0.5\n"


def test_an_image_without_python_fails_at_once_saying_so(fake_kube_program, tmp_path, capsys):
    image_bin = image_dir(tmp_path / "image", None)
    fake_kube_program("--nodes", "1", "--image", f"{IMAGE}={image_bin.parent}", profile=ZIPAPP)
    capsys.readouterr()
    code = launcher(
        "run", "-f", str(run_spec(tmp_path, "no-python", 1, "echo never ran")), "--cluster", "fake", "--follow"
    )
    out, err = capsys.readouterr()
    assert code != 0
    assert (
        f"[launcher] error: image {IMAGE} has no python3 or python 3.8 or newer on its PATH ({image_bin}): "
        "set entrypoint_mode: inject in the cluster profile for an image without Python"
    ) in out
    assert "or entrypoint_mode: image for an image with the launcher installed" in out
    assert "never ran" not in out
    capsys.readouterr()
    assert launcher("describe", "run", re.search(r"Run (\S+) started", out + err).group(1)) == 0
    described = capsys.readouterr().out
    assert "FAILED" in described and f"code {contract.EXIT_SETUP}" in described


def test_an_image_whose_python_is_too_old_fails_naming_it(fake_kube_program, tmp_path, capsys):
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.7*/bin/python3.7")))
    if not found:
        pytest.skip("no Python 3.7 on this machine (pyenv's)")
    image_bin = image_dir(tmp_path / "image", Path(found[0]).resolve())
    fake_kube_program("--nodes", "1", "--image", f"{IMAGE}={image_bin.parent}", profile=ZIPAPP)
    capsys.readouterr()
    code = launcher(
        "run", "-f", str(run_spec(tmp_path, "old-python", 1, "echo never ran")), "--cluster", "fake", "--follow"
    )
    out = capsys.readouterr().out
    assert code != 0
    assert (
        f"has no python3 or python 3.8 or newer on its PATH ({image_bin}); found: {image_bin}/python3 (Python 3.7."
    ) in out
    assert "never ran" not in out
