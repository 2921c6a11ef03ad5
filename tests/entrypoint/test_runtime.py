"""Inject mode without a container runtime: the runtime assembled as images/runtime/Dockerfile
assembles it (`python -m launcher.entrypoint.bundle build`), with a virtualenv of this
interpreter in place of python-build-standalone; copied into a "pod volume" by the init
container's own command; then the entrypoint run under `env -i` with a PATH that holds only
a directory standing in for the user's image: bash, git and the image's own python3 (a shim
over an environment that has no launcher)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from launcher.pod import contract
from tests.entrypoint.conftest import commit_file, git
from tests.entrypoint.images import Runtime, build_runtime, make_image, wheel

IMAGE = "mosaicml/pytorch:2.1.2_cu121-python3.10-ubuntu20.04"
SECRET = "hf_Inj3ctedS3cretValue"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    return build_runtime(tmp_path_factory.mktemp("runtime"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("llm-foundry")
    work = base / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    wheel(work / "tinypkg-0.1-py3-none-any.whl")
    git("add", "tinypkg-0.1-py3-none-any.whl", cwd=work)
    commit_file(work, "train.py", "import sys, tinypkg\nprint('train.py says', tinypkg.HELLO, sys.argv[1:])\n", "train")
    bare = base / "llm-foundry.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def entrypoint(rt: Runtime, image_bin: Path, spec: dict, tmp: Path, **extra: str) -> subprocess.CompletedProcess:
    config = tmp / "config"
    config.mkdir()
    (config / "spec.json").write_text(json.dumps(spec))
    work = tmp / "work"
    work.mkdir()
    env = {
        "PATH": str(image_bin),
        "HOME": str(work),
        "LANG": "C.UTF-8",
        contract.SPEC: str(config / "spec.json"),
        contract.BACKEND: "kubernetes",
        contract.CONFIG_DIR: str(config),
        contract.WORKDIR: str(work),
        "NODE_RANK": "0",
        contract.NODES: "2",
        contract.GPUS_PER_NODE: "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        contract.RESTART_ATTEMPT: "1",
        contract.RUNTIME: str(rt.volume),
        contract.IMAGE: IMAGE,
        "HF_TOKEN": SECRET,
        contract.MASK_ENV: "HF_TOKEN",
        "GIT_CONFIG_NOSYSTEM": "1",
        "LD_LIBRARY_PATH": "/opt/image/lib",
        **extra,
    }
    argv = [
        "/usr/bin/env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        str(rt.volume / "python" / "bin" / "python3"),
        "-I",
        "-m",
        "launcher.entrypoint",
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


REPORT = (
    "import json, os, sys; import tinypkg;\n"
    "try:\n  import launcher; has = True\nexcept ImportError:\n  has = False\n"
    "print('REPORT ' + json.dumps({'prefix': sys.prefix, 'shim': os.environ.get('IMAGE_PYTHON_SHIM'),"
    " 'has_launcher': has, 'tinypkg': tinypkg.HELLO, 'params': open(os.environ['PARAMETERS']).read(),"
    " 'env': {k: os.environ.get(k) for k in ('PATH', 'PYTHONHOME', 'PYTHONPATH', 'LD_LIBRARY_PATH', 'NODE_RANK',"
    " 'WORLD_SIZE', 'LAUNCHER_ATTEMPT', 'RUN_NAME')}}))"
)


def test_the_injected_entrypoint_runs_an_mcli_spec_in_the_images_environment(runtime, repo, tmp_path):
    image_bin = make_image(tmp_path / "image")
    spec = {
        "name": "llm-foundry-abc123",
        "image": IMAGE,
        "integrations": [
            {
                "integration_type": "git_repo",
                "git_repo": f"file://{repo}",
                "path": "llm-foundry",
                "pip_install": "--no-index tinypkg-0.1-py3-none-any.whl",
            }
        ],
        "parameters": {"max_seq_len": 128, "_hidden": 1},
        "command": f'cd llm-foundry && python3 train.py --seed 7 && echo token=$HF_TOKEN && python3 -c "{REPORT}"',
    }
    r = entrypoint(runtime, image_bin, spec, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "integration 1/1: git_repo" in out
    assert "train.py says from the cloned repo ['--seed', '7']" in out
    assert SECRET not in out and "token=" in out  # masked
    report = json.loads(next(line for line in out.splitlines() if line.startswith("REPORT "))[7:])
    # The command's python3 is the image's own: its prefix, its shim, no launcher importable.
    assert report["prefix"] == str(tmp_path / "image" / "venv")
    assert report["shim"] == "1" and report["has_launcher"] is False
    assert report["tinypkg"] == "from the cloned repo"  # pip_install ran the image's pip
    assert yaml.safe_load(report["params"]) == {"max_seq_len": 128}
    env = report["env"]
    # Nothing of ours on it but the directory of `launcher-heartbeat` (docs/resilience.md),
    # which holds no program of the image's name.
    heartbeat_dir, image_path = env["PATH"].split(os.pathsep)
    assert image_path == str(image_bin) and Path(heartbeat_dir).name.startswith("launcher-watch-")
    assert env["PYTHONHOME"] is None and env["PYTHONPATH"] is None
    assert env["LD_LIBRARY_PATH"] == "/opt/image/lib"
    assert (env["NODE_RANK"], env["WORLD_SIZE"], env["RUN_NAME"]) == ("0", "2", "llm-foundry-abc123")
    assert env["LAUNCHER_ATTEMPT"] == "2"  # JobSet restart 1 is our attempt 2
    assert f"in image {IMAGE}" in out


def test_an_image_without_bash_fails_at_once_naming_it(runtime, tmp_path):
    image_bin = make_image(tmp_path / "image", with_bash=False)
    r = entrypoint(
        runtime,
        image_bin,
        {"name": "x", "image": "alpine:3.20", "command": "echo never"},
        tmp_path,
        **{contract.IMAGE: "alpine:3.20"},
    )
    assert r.returncode == contract.EXIT_SETUP
    assert f"error: image alpine:3.20 has no bash on its PATH ({image_bin})" in r.stdout
    assert "never" not in r.stdout.replace("echo never", "")


def test_the_runtime_holds_only_what_the_entrypoint_needs(runtime):
    python = runtime.volume / "python" / "bin" / "python3"
    probe = "import sys, json, launcher.entrypoint.main, launcher.spec.plan, launcher.spec.models; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(["/usr/bin/env", "-i", str(python), "-I", "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    top = {m.split(".")[0] for m in json.loads(done.stdout)}
    assert {"pydantic", "yaml", "launcher"} <= top
    assert not top & {"torch", "kubernetes", "click", "rich", "numpy", "composer"}
    for heavy in ("torch", "kubernetes", "composer"):
        gone = subprocess.run(["/usr/bin/env", "-i", str(python), "-I", "-c", f"import {heavy}"], capture_output=True)
        assert gone.returncode != 0, f"{heavy} is importable in the runtime"
    assert (runtime.volume / "VERSION").read_text().strip() == __import__("launcher").__version__


def test_the_runtime_dockerfile_assembles_with_the_same_command():
    """images/runtime/Dockerfile: python-build-standalone install_only for both arches, then the
    one assembly recipe this file's fixture runs, and the init container's command."""
    from dockerfile_parse import DockerfileParser

    df = DockerfileParser(path=str(Path(__file__).resolve().parents[2] / "images" / "runtime" / "Dockerfile"))
    runs = " ".join(i["value"] for i in df.structure if i["instruction"] == "RUN")
    assert "-m launcher.entrypoint.bundle build --python /opt/pbs/python --out /opt/launcher-runtime" in runs
    assert "install_only.tar.gz" in runs and "python-build-standalone" in runs
    assert "amd64) arch=x86_64" in runs and "arm64) arch=aarch64" in runs
    cmd = [i["value"] for i in df.structure if i["instruction"] == "CMD"]
    assert json.loads(cmd[-1]) == ["launcher-runtime-install", "/launcher"]
    env = " ".join(i["value"] for i in df.structure if i["instruction"] == "ENV")
    assert "PATH=/opt/launcher-runtime/bin" in env  # where bundle puts launcher-runtime-install
