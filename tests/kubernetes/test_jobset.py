"""The JobSet form against the fake cluster run as a program with its JobSet controller
(`python tests/fakes/kube_api.py`): group restarts happen in the cluster with no
launcher process alive, disruptions are free, exhausted retries end FAILED; and an
llm-foundry-style mcli YAML runs through the injected runtime in an image without the
launcher."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.entrypoint.conftest import commit_file, git
from tests.entrypoint.images import RUNTIME_IMAGE_GLOB, build_runtime, make_image, wheel
from tests.fakes.git_http import GitHTTPServer
from tests.kubernetes.test_backend import worker

LAUNCHER = [sys.executable, "-m", "launcher"]
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
# attempt 1: rank 1 fails with code 3 while rank 0 is still busy; attempt 2: both succeed.
FAIL_RANK_1_ONCE = worker(
    "--lines", "6", "--interval", "0.1", "--fail-rank", "1", "--fail-code", "3", "--fail-attempt", "1"
)


def launcher(*args: str) -> int:
    try:
        return run_cli(cli, list(args))
    except SystemExit as e:
        return int(e.code or 0)


def api_get(kube, path: str) -> dict:
    with urllib.request.urlopen(kube.url + path, timeout=10) as resp:
        return json.loads(resp.read())


def jobset_status(kube, name: str) -> dict:
    return api_get(kube, f"{JOBSETS}/{name}").get("status") or {}


def submit_detached(tmp_path: Path, spec: dict) -> str:
    """`launcher run` without --follow, as its own process: it exits, and nothing of the
    launcher runs afterwards until the test asks."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = subprocess.run(
        [*LAUNCHER, "run", "-f", str(path), "--cluster", "fake"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    assert "has no JobSet" not in done.stderr  # no "no JobSet" warning on a cluster that serves it
    if (spec.get("scheduling") or {}).get("retry_on_system_failure"):
        assert (
            "scheduling.retry_on_system_failure: the JobSet controller restarts a disrupted run without limit"
            in done.stderr
        )
    else:
        assert "JobSet" not in done.stderr
    return re.search(r"Run (\S+) submitted", done.stdout + done.stderr).group(1)


def describe(capsys, name: str) -> str:
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    return capsys.readouterr().out


@pytest.fixture
def jobset_cluster(fake_kube_program):
    return fake_kube_program("--nodes", "2", profile={"entrypoint_mode": "image"})


def _spec(command: str, **scheduling) -> dict:
    return {
        "name": "group",
        "image": "ghcr.io/example/launcher:test",
        "command": command,
        "compute": {"gpu_type": "none", "nodes": 2},
        "scheduling": scheduling,
    }


def _restart_once(kube, tmp_path) -> str:
    name = submit_detached(tmp_path, _spec(FAIL_RANK_1_ONCE, max_retries=1))
    status = wait_until(
        lambda: (s := jobset_status(kube, name)).get("terminalState") and s,
        90,
        interval=0.3,
        message="the JobSet to complete",
    )
    assert status["terminalState"] == "Completed" and status["restarts"] == 1
    return name


def test_the_cluster_restarts_the_group_with_no_launcher_watching(jobset_cluster, tmp_path, capsys):
    name = _restart_once(jobset_cluster, tmp_path)
    out = describe(capsys, name)
    assert "Status:     COMPLETED" in out
    assert "Attempt 1: FAILED (rank 1 exited with code 3)" in out  # from the Job controller's event
    assert "Attempt 2: COMPLETED" in out
    assert re.search(r"\n  0\s+\S+\s+COMPLETED\s+0\s*\n  1\s+\S+\s+COMPLETED\s+0", out)  # attempt 2's exit codes
    capsys.readouterr()
    assert launcher("logs", name, "--attempt", "2", "--rank", "1") == 0
    logs = capsys.readouterr().out
    assert "rank 1 attempt 2 starting" in logs and "rank 1 done" in logs  # LAUNCHER_ATTEMPT = restart-attempt + 1


def test_describe_shows_the_exit_code_of_an_attempt_nobody_watched(jobset_cluster, tmp_path, capsys):
    name = _restart_once(jobset_cluster, tmp_path)
    out = describe(capsys, name)
    assert re.search(r"Attempt 1: FAILED \(rank 1 exited with code 3\)", out)
    assert re.search(r"\n  1\s+\S+\s+FAILED\s+3\s", out)


def test_a_preemption_does_not_count_against_max_retries(jobset_cluster, tmp_path, capsys):
    kube = jobset_cluster
    command = (
        f'if [ "$LAUNCHER_ATTEMPT" = 1 ]; then {worker("--forever", "--interval", "0.2")}; '
        f"else {worker('--lines', '2')}; fi"
    )
    name = submit_detached(tmp_path, _spec(command, max_retries=0, retry_on_system_failure=True))
    pods = f"/api/v1/namespaces/default/pods?labelSelector=launcher.dev/run%3D{name}"
    running = wait_until(
        lambda: [p for p in api_get(kube, pods)["items"] if (p.get("status") or {}).get("phase") == "Running"],
        90,
        interval=0.3,
        message="attempt 1 running",
    )
    kube.evict(running[0]["metadata"]["name"])
    status = wait_until(
        lambda: (s := jobset_status(kube, name)).get("terminalState") and s,
        90,
        interval=0.3,
        message="the JobSet to complete",
    )
    assert status["terminalState"] == "Completed"
    assert status["restarts"] == 1 and status.get("restartsCountTowardsMax", 0) == 0
    out = describe(capsys, name)
    assert "Status:     COMPLETED" in out
    assert re.search(
        r"Attempt 1: FAILED \(rank \d was stopped by the cluster: DisruptionTarget; "
        r"not counted against max_retries \(a disruption\)\)",
        out,
    )
    assert "Attempt 2: COMPLETED" in out


def test_exhausting_max_retries_ends_failed_with_the_reason(jobset_cluster, tmp_path, capsys):
    kube = jobset_cluster
    command = worker("--lines", "6", "--interval", "0.1", "--fail-rank", "1", "--fail-code", "3")
    name = submit_detached(tmp_path, _spec(command, max_retries=1))
    status = wait_until(
        lambda: (s := jobset_status(kube, name)).get("terminalState") and s,
        90,
        interval=0.3,
        message="the JobSet to fail",
    )
    assert status["terminalState"] == "Failed" and status["restarts"] == 1
    out = describe(capsys, name)
    assert re.search(r"Status:     FAILED \(rank 1 exited with code 3; .*max number of restarts", out)
    assert "Exit code:  3" in out
    assert "Attempt 1: FAILED" in out and "Attempt 2: FAILED" in out


LLM_FOUNDRY_YAML = """\
name: mpt-125m-pretrain
image: mosaicml/pytorch:2.1.2_cu121-python3.10-ubuntu20.04
compute:
  gpu_type: none
  nodes: 1
integrations:
- integration_type: git_repo
  git_repo: {repo}
  git_branch: main
  pip_install: --no-index tinypkg-0.1-py3-none-any.whl
  ssh_clone: false
command: |
  cd llm-foundry/scripts
  composer train/train.py train/yamls/pretrain/mpt-125m.yaml max_duration=1ba
parameters:
  max_seq_len: 128
  global_train_batch_size: 8
"""

TRAIN_PY = """\
import json, os, sys
import tinypkg
try:
    import launcher
    has_launcher = True
except ImportError:
    has_launcher = False
print("TRAIN " + json.dumps({"argv": sys.argv[1:], "prefix": sys.prefix, "has_launcher": has_launcher,
                             "tinypkg": tinypkg.HELLO, "params": open(os.environ["PARAMETERS"]).read(),
                             "path": os.environ["PATH"], "attempt": os.environ.get("LAUNCHER_ATTEMPT")}))
"""


def test_an_llm_foundry_mcli_yaml_runs_through_the_injected_runtime(fake_kube_program, tmp_path, capsys):
    runtime = build_runtime(tmp_path / "runtime")
    image_root = tmp_path / "pytorch-image"
    image_bin = make_image(image_root)
    # The image's `composer`: a tiny stand-in with the image's own python in its shebang.
    composer = image_bin / "composer"
    composer.write_text(
        f"#!{image_root}/venv/bin/python3\nimport runpy, sys\nsys.argv = sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    composer.chmod(0o755)
    # llm-foundry, served over git's smart HTTP on 127.0.0.1.
    work = tmp_path / "llm-foundry"
    (work / "scripts" / "train").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    wheel(work / "tinypkg-0.1-py3-none-any.whl")
    git("add", "tinypkg-0.1-py3-none-any.whl", cwd=work)
    commit_file(work, "scripts/train/train.py", TRAIN_PY, "train")
    served = tmp_path / "git"
    (served / "mosaicml").mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(work), str(served / "mosaicml" / "llm-foundry.git")], check=True
    )
    server = GitHTTPServer(served).start()
    try:
        fake_kube_program(
            "--nodes",
            "1",
            "--image",
            f"{RUNTIME_IMAGE_GLOB}={runtime.out}",
            "--image",
            f"mosaicml/pytorch:*={image_root}",
            profile={"entrypoint_mode": "inject"},
        )
        spec = tmp_path / "mpt-125m.yaml"
        spec.write_text(LLM_FOUNDRY_YAML.format(repo=f"{server.url}/mosaicml/llm-foundry.git"))
        capsys.readouterr()
        code = launcher("run", "-f", str(spec), "--cluster", "fake", "--follow")
        out, err = capsys.readouterr()
    finally:
        server.stop()
    assert code == 0, out + err
    assert "integration 1/1: git_repo" in out
    report = json.loads(next(line for line in out.splitlines() if "TRAIN " in line).split("TRAIN ", 1)[1])
    assert report["argv"] == ["train/yamls/pretrain/mpt-125m.yaml", "max_duration=1ba"]
    assert report["prefix"] == str(image_root / "venv") and report["has_launcher"] is False
    assert report["tinypkg"] == "from the cloned repo"
    # The image's PATH, behind only the directory of `launcher-heartbeat` (docs/resilience.md).
    heartbeat_dir, image_path = report["path"].split(os.pathsep)
    assert image_path == str(image_bin) and Path(heartbeat_dir).name.startswith("launcher-watch-")
    assert yaml.safe_load(report["params"]) == {"max_seq_len": 128, "global_train_batch_size": 8}
    assert report["attempt"] == "1"


def test_a_cluster_without_jobset_is_named_with_its_install_command(fake_kube_program, tmp_path, capsys):
    """`cluster add` and `cluster check` say that the cluster serves no JobSet and print the one
    command that installs it; `run` refuses with the same words, exit 2, creating nothing."""
    with_jobset = fake_kube_program("--nodes", "1")
    without = fake_kube_program("--no-jobset", "--nodes", "1")
    install = "kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/"
    assert launcher("cluster", "add", "js", "--kubeconfig", str(with_jobset.kubeconfig), "--context", "fake") == 0
    assert "JobSet served (asked the cluster)" in capsys.readouterr().err
    assert launcher("cluster", "add", "plain", "--kubeconfig", str(without.kubeconfig), "--context", "fake") == 2
    err = capsys.readouterr().err
    words = "cluster plain serves no JobSet (jobset.x-k8s.io/v1alpha2), which runs every launcher run on Kubernetes"
    assert words in err and install in err, err
    assert "plain" in yaml.safe_load((Path(os.environ["LAUNCHER_HOME"]) / "config.yaml").read_text())["clusters"]
    assert launcher("cluster", "check", "plain") == 1
    out = capsys.readouterr().out
    assert f"✗ plain: {words}" in out and install in out, out
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec(worker("--lines", "1"), max_retries=2) | {"compute": {"gpu_type": "none"}}))
    assert launcher("run", "-f", str(spec), "--cluster", "plain") == 2
    err = capsys.readouterr().err
    assert words in err and install in err and "Traceback" not in err, err
    assert api_get(without, "/api/v1/namespaces/default/configmaps?labelSelector=launcher.dev%2Frun")["items"] == []
