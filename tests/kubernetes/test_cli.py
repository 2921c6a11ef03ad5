"""The CLI on top of the Kubernetes backend: cluster profiles, dry-run YAML, and
`launcher run --backend kubernetes --follow` against the fake API server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from launcher.config import load_config
from tests.kubernetes.specs import assert_golden
from tests.kubernetes.test_backend import SECRET, worker


def launcher(*args: str) -> int:
    try:
        return run_cli(cli, list(args))
    except SystemExit as e:  # `run --follow` exits with the run's outcome
        return int(e.code or 0)


def test_cluster_add_list_use(launcher_home, capsys):
    assert (
        launcher(
            "cluster",
            "add",
            "gke",
            "--context",
            "gke_p_z_c",
            "--namespace",
            "ml",
            "--gpu-labels",
            "gke",
            "--queue",
            "team-a",
        )
        == 0
    )
    cfg = load_config()
    assert cfg.clusters["gke"] == {
        "backend": "kubernetes",
        "context": "gke_p_z_c",
        "namespace": "ml",
        "gpu_labels": "gke",
        "queue": "team-a",
    }
    assert cfg.current == "local"
    assert launcher("cluster", "use", "gke") == 0
    assert load_config().current == "gke"
    capsys.readouterr()
    assert launcher("cluster", "list") == 0
    out = capsys.readouterr().out
    assert re.search(r"\*\s+gke\s+kubernetes\s+gke_p_z_c\s+ml\s+team-a", out)
    assert re.search(r"local\s+local", out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cluster", "add", "gke"], "already exists"),
        (["cluster", "add", "local"], "built in"),
        (["cluster", "add", "x", "--default-gpu-type", "v100"], "unknown gpu_type 'v100'"),
        (["cluster", "use", "nope"], "no cluster profile named 'nope' (known: local, gke)"),
    ],
)
def test_cluster_errors_exit_2(launcher_home, capsys, args, message):
    assert launcher("cluster", "add", "gke") == 0  # the first add succeeds; a repeat fails
    capsys.readouterr()
    assert launcher(*args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help_does_not_import_kubernetes():
    code = (
        "import sys; from launcher.cli.main import main; sys.argv=['launcher','cluster','--help'];\n"
        "try: main()\nexcept SystemExit: pass\n"
        "assert 'kubernetes' not in sys.modules, 'kubernetes imported'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("ok")


def _spec_file(tmp_path: Path, **fields) -> Path:
    spec = {
        "name": "hello",
        "image": "ghcr.io/example/trainer:2.0",
        "command": "composer train.py",
        "parameters": {"lr": 0.001},
        **fields,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _profile_settings(**settings) -> None:
    """Set fields of the `fake` profile in config.yaml."""
    from launcher.config import config_path

    path = config_path()
    config = yaml.safe_load(path.read_text())
    config["clusters"]["fake"].update(settings)
    path.write_text(yaml.safe_dump(config))


@pytest.mark.parametrize("case", ["dry-run-2x8", "dry-run-cpu-secret"])
def test_dry_run_yaml_golden(fake_kube, tmp_path, capsys, case):
    """`launcher run --dry-run -o yaml` prints the manifests; the random name suffix is
    normalised. Regenerate with UPDATE_GOLDEN=1 after an intended change."""
    assert launcher("secret", "create", "env", "API_TOKEN=" + SECRET, "--cluster", "fake") == 0
    _profile_settings(entrypoint_mode="zipapp")  # the shipped default, which the golden files show
    fields = (
        {"compute": {"gpus": 16, "gpu_type": "h100_80gb"}}
        if case == "dry-run-2x8"
        else {"compute": {"gpu_type": "none"}, "secrets": ["api-token"]}
    )
    capsys.readouterr()
    before = len(fake_kube.requests)
    assert (
        launcher("run", "-f", str(_spec_file(tmp_path, **fields)), "--cluster", "fake", "--dry-run", "-o", "yaml") == 0
    )
    out, err = capsys.readouterr()
    assert len(fake_kube.requests) == before  # rendered from the profile alone
    assert SECRET not in out + err
    text = re.sub(r"hello-[a-z0-9]{6}", "hello-XXXXXX", out)
    assert_golden(case, text)
    doc = yaml.safe_load(out)
    assert [m["kind"] for m in doc["items"]] == ["ConfigMap", "JobSet"]  # the shipped defaults: JobSet, zipapp
    if case == "dry-run-cpu-secret":
        assert "secrets: a dry-run does not contact cluster fake" in err and "(api-token, in namespace default" in err


def test_dry_run_never_contacts_the_cluster(launcher_home, tmp_path, capsys):
    """A profile whose server is down, and one whose kubeconfig is missing: the dry-run renders
    at once from the profile (the JobSet form and zipapp mode of the shipped defaults)."""
    import socket
    import time

    with socket.socket() as s:  # a port nobody listens on: connecting would be refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "down",
                "clusters": [{"name": "down", "cluster": {"server": f"https://10.255.255.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "down", "context": {"cluster": "down", "user": "u"}}],
            }
        )
    )
    (launcher_home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "current": "local",
                "clusters": {
                    "down": {"backend": "kubernetes", "kubeconfig": str(kubeconfig)},
                    "gone": {"backend": "kubernetes", "kubeconfig": str(tmp_path / "missing")},
                },
            }
        )
    )
    spec = _spec_file(tmp_path, compute={"gpus": 16, "gpu_type": "h100_80gb"})
    for cluster in ("down", "gone"):
        capsys.readouterr()
        began = time.monotonic()
        assert launcher("run", "-f", str(spec), "--cluster", cluster, "--dry-run", "-o", "json") == 0
        elapsed = time.monotonic() - began
        assert elapsed < 1.0, f"dry-run on {cluster} took {elapsed:.2f}s"
        doc = yaml.safe_load(capsys.readouterr().out)
        jobset = doc["items"][1]
        assert jobset["kind"] == "JobSet"
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod["containers"][0]["command"][:2] == ["/bin/sh", "-c"]  # zipapp, the default
        assert "entrypoint.pyz" in doc["items"][0]["binaryData"]
    # Nor does it load the kubernetes client: a fresh process renders without it.
    code = (
        "import sys; from launcher.cli.error_report import run_cli; from launcher.cli.main import cli;\n"
        f"code = run_cli(cli, ['run', '-f', {str(spec)!r}, '--cluster', 'down', '--dry-run']);\n"
        "assert code == 0, code; assert 'kubernetes' not in sys.modules, 'kubernetes imported'; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert done.stdout.strip().endswith("ok"), done.stderr


def test_run_follow_end_to_end(fake_kube, tmp_path, capsys):
    assert launcher("secret", "create", "env", "API_TOKEN=" + SECRET, "--cluster", "fake") == 0
    spec = _spec_file(
        tmp_path,
        command=worker("--lines", "4", "--interval", "0.05", "--print-env", "API_TOKEN"),
        compute={"nodes": 2},
        secrets=["api-token"],
    )
    capsys.readouterr()
    code = launcher("run", "-f", str(spec), "--backend", "kubernetes", "--follow")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "[rank 0] rank 0 line 3" in out and "[rank 1] rank 1 line 3" in out
    assert "[rank 1] the secret is ****" in out and SECRET not in out + err
    assert re.search(r"✔ Run hello-[a-z0-9]{6} completed", err)
    name = re.search(r"Run (hello-[a-z0-9]{6}) completed", err).group(1)

    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    out = capsys.readouterr().out
    assert "Status:     COMPLETED" in out and "Attempt 1: COMPLETED" in out
    assert launcher("logs", name, "--rank", "1") == 0
    assert "rank 1 line 3" in capsys.readouterr().out


def test_run_follow_failing_rank_exits_1_after_retry(fake_kube, tmp_path, capsys):
    spec = _spec_file(
        tmp_path,
        command=worker("--lines", "4", "--fail-rank", "1", "--fail-code", "3"),
        compute={"nodes": 2},
        scheduling={"max_retries": 1, "retry_backoff": {"first": "0.1s"}},
    )
    code = launcher("run", "-f", str(spec), "--cluster", "fake", "--follow")
    out, err = capsys.readouterr()
    assert code == 1
    assert "Attempt 1 ended: rank 1 exited with code 3. Restarting the whole group: attempt 2." in err
    # Each attempt's log is shown, or (no log_store here) said to be lost: on a loaded machine
    # the JobSet restart can delete attempt 1's pods before the follower reads them
    # (tests/kubernetes/test_history.py follows the same restart with an archive).
    lost = "the pods of attempt 1 are gone (JobSet restart); set log_store in the profile to keep logs" in err
    assert out.count("[rank 1] rank 1 fails with code 3") == 2 - lost, (out, err)
    assert re.search(r"✗ Run hello-[a-z0-9]{6} failed: rank 1 exited with code 3", err)
