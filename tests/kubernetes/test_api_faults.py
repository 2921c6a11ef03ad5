"""The Kubernetes client's failures, as a user meets them: one exception boundary (a clear
line that names the cluster profile, exit 1 for the server, 2 for bad input), bounded
retries of 5xx and connection failures (never of a 4xx), idempotent creates, and
`get runs` that stays fast and keeps showing the other profiles' runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from launcher.backends.base import RunStatus
from launcher.backends.kubernetes.kubeapi import DEFAULT_RETRY, KubeApi, KubeError
from launcher.backends.kubernetes.profiles import load_profile
from launcher.config import load_config
from launcher.errors import InputError
from tests.fakes.kube.faults import unreachable_server
from tests.kubernetes.conftest import make_backend
from tests.kubernetes.test_backend import follow, run_spec, worker
from tests.kubernetes.test_cli import launcher


def add_profile(home: Path, name: str, server: str) -> None:
    """A cluster profile whose kubeconfig points at `server`."""
    kubeconfig = home / f"kubeconfig-{name}"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": name,
                "clusters": [{"name": name, "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": "u", "namespace": "default"}}],
            }
        )
    )
    path = home / "config.yaml"
    config = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    config.setdefault("current", "local")
    config.setdefault("clusters", {})[name] = {
        "backend": "kubernetes",
        "kubeconfig": str(kubeconfig),
        "namespace": "default",
        "image": "ghcr.io/example/launcher:test",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def local_run(tmp_path: Path) -> str:
    spec = tmp_path / "local.yaml"
    spec.write_text(yaml.safe_dump({"name": "here", "image": "none", "command": "true"}))
    assert launcher("run", "-f", str(spec), "--backend", "local", "--follow") == 0
    return "here"


def test_persistent_503_is_one_clear_warning_and_the_other_runs_still_show(fake_kube, tmp_path, capsys):
    local_run(tmp_path)
    fake_kube.faults.api_errors = 10_000
    capsys.readouterr()
    assert launcher("get", "runs", "-o", "name") == 0
    out, err = capsys.readouterr()
    assert out.startswith("here-")  # the local run is listed
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(
        "! cluster fake: cannot list ConfigMaps: 503 ServiceUnavailable: "
        "the server is currently unable to handle the request"
    )
    assert lines[0].count("fake") == 1 and "HTTP response headers" not in err and "Reason:" not in err


def test_a_read_that_keeps_failing_is_tried_a_bounded_number_of_times(fake_kube):
    backend = make_backend()
    fake_kube.faults.api_errors = 10_000
    before = fake_kube.count()
    with pytest.raises(KubeError) as err:
        backend.get("some-run")
    assert fake_kube.count() - before == DEFAULT_RETRY.tries
    assert err.value.exit_code == 1 and err.value.status == 503
    assert str(err.value) == (
        "cluster fake: cannot read ConfigMap some-run: 503 ServiceUnavailable: the server is "
        f"currently unable to handle the request (tried {DEFAULT_RETRY.tries} times)"
    )
    backend.close()


def test_a_4xx_is_never_retried_and_is_bad_input(fake_kube):
    api = KubeApi(load_profile(load_config().profile("fake")))
    before = fake_kube.count(method="POST")
    with pytest.raises(KubeError) as err:
        api.create("ConfigMap", {"metadata": {}, "data": {}})  # no name: 422 Invalid
    assert fake_kube.count(method="POST") - before == 1
    assert err.value.status == 422 and err.value.exit_code == 2
    assert str(err.value).startswith("cluster fake: cannot create ConfigMap : 422 Invalid: ")
    api.close()


def test_a_transient_5xx_on_submit_is_retried(fake_kube):
    backend = make_backend()
    spec = run_spec("flaky-abc123", worker("--lines", "1"))
    fake_kube.faults.api_errors = 2
    backend.submit(spec, [])
    assert fake_kube.faults.api_errors == 0
    assert fake_kube.count(method="POST", kind="JobSet") == 3  # two 503s, then the create
    assert fake_kube.get("ConfigMap", "default", spec.name)
    backend.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cluster broken: kubeconfig not found: "),
        ("{not: [yaml", "cluster broken: cannot load the kubeconfig "),
        (
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "nope",
                    "contexts": [],
                    "clusters": [],
                    "users": [],
                }
            ),
            "cluster broken: cannot load the kubeconfig ",
        ),
    ],
)
def test_a_bad_kubeconfig_is_bad_input_naming_the_profile(launcher_home, capsys, content, message):
    add_profile(launcher_home, "broken", "http://127.0.0.1:1")
    kubeconfig = launcher_home / "kubeconfig-broken"
    if content is None:
        kubeconfig.unlink()
    else:
        kubeconfig.write_text(content)
    with pytest.raises(KubeError) as err:
        make_backend("broken").get("x")
    assert err.value.exit_code == 2 and str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    capsys.readouterr()
    assert launcher("get", "runs") == 0
    err_text = capsys.readouterr().err
    assert err_text.count("! cluster broken: ") == 1 and "Traceback" not in err_text


def test_a_server_error_on_describe_is_one_line_and_exit_1(fake_kube, capsys):
    from launcher.sdk.index import RunIndex

    backend = make_backend()
    backend.submit(run_spec("described-abc123", worker("--lines", "1")), [])
    backend.close()
    # Submitted from this machine (as `launcher run` records it), so describe asks its cluster
    # alone. (A name no index knows is looked for everywhere: a profile that fails then is a
    # warning beside "no run named", test_listing_tells_the_truth.)
    RunIndex().record("described-abc123", load_config().profile("fake"))
    fake_kube.faults.api_errors = 10_000
    capsys.readouterr()
    assert launcher("describe", "run", "described-abc123") == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "✗ cluster fake: cannot read ConfigMap described-abc123: 503 ServiceUnavailable: the server is currently "
        f"unable to handle the request (tried {DEFAULT_RETRY.tries} times)"
    ]


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_each_server_error_class_is_retried_until_it_passes(fake_kube, status):
    backend = make_backend()
    spec = run_spec(f"class{status}-abc123", worker("--lines", "1"))
    backend.submit(spec, [])
    fake_kube.faults.inject("get", "configmaps", status=status, times=2)
    before = fake_kube.count(verb="get", kind="ConfigMap")
    assert backend.get(spec.name).name == spec.name
    assert fake_kube.count(verb="get", kind="ConfigMap") - before == 3  # two failures, then the answer
    backend.close()


@pytest.mark.parametrize("status", [400, 401, 403, 422])
def test_each_client_error_class_fails_at_once_as_bad_input(fake_kube, status):
    backend = make_backend()
    fake_kube.faults.inject("get", "configmaps", status=status, times=0)
    before = fake_kube.count(verb="get", kind="ConfigMap")
    with pytest.raises(KubeError) as err:
        backend.get("any-run")
    assert fake_kube.count(verb="get", kind="ConfigMap") - before == 1
    assert err.value.status == status and err.value.exit_code == 2
    assert str(err.value).startswith(f"cluster fake: cannot read ConfigMap any-run: {status} ")
    backend.close()


def kubectl_names(prog, run: str) -> list[str]:
    """What real kubectl sees of a run in the fake program: kind/name of its objects."""
    out = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(prog.kubeconfig),
            "get",
            "jobsets.jobset.x-k8s.io,configmaps",
            "-l",
            f"launcher.dev/run={run}",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return sorted(out.split())


needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl (apt install kubectl)")


@needs_kubectl
def test_retries_run_out_on_a_create_and_the_submit_leaves_nothing(fake_kube_program, capsys, tmp_path):
    prog = fake_kube_program()
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "nothing-left", "image": "x", "command": worker("--lines", "1")}))
    prog.faults.inject("create", "configmaps", status=500, times=0)
    capsys.readouterr()
    assert launcher("run", "-f", str(spec), "--cluster", "fake") == 1
    err = capsys.readouterr().err
    name = err.split("cannot create ConfigMap ")[1].split(":")[0]
    assert prog.count(method="POST", kind="ConfigMap") == DEFAULT_RETRY.tries
    assert f"(tried {DEFAULT_RETRY.tries} times); the run was not started and nothing of it is left" in err
    assert kubectl_names(prog, name) == []


@needs_kubectl
@pytest.mark.parametrize("resource", ["jobsets", "configmaps"])
def test_a_create_whose_answer_was_lost_is_not_a_second_run(fake_kube_program, resource):
    prog = fake_kube_program()
    backend = make_backend()
    spec = run_spec(f"lost-{resource}-abc123", worker("--lines", "1"))
    prog.faults.inject("create", resource, lose_response=True, times=1)
    run = backend.submit(spec, [])  # the create happened; its retry finds our own object
    assert run.name == spec.name
    kind = {"jobsets": "JobSet", "configmaps": "ConfigMap"}[resource]
    assert prog.count(method="POST", kind=kind) == 2
    assert kubectl_names(prog, spec.name) == [f"configmap/{spec.name}", f"jobset.jobset.x-k8s.io/{spec.name}"]
    assert follow(backend, spec.name)[-1].status is RunStatus.COMPLETED
    backend.close()


def test_a_create_that_meets_somebody_elses_object_is_not_taken_for_ours(fake_kube):
    backend = make_backend()
    spec = run_spec("taken-abc123", worker("--lines", "1"))
    backend.submit(spec, [])
    with pytest.raises(InputError, match="a run named 'taken-abc123' already exists"):
        backend.submit(spec, [])
    backend.close()


def test_unreachable_profiles_cost_one_short_wait_and_one_warning_each(launcher_home, tmp_path, capsys):
    local_run(tmp_path)
    with unreachable_server("refused") as refused, unreachable_server("stalled") as stalled:
        add_profile(launcher_home, "refused", refused)
        add_profile(launcher_home, "stalled", stalled)
        capsys.readouterr()
        started = time.monotonic()
        assert launcher("get", "runs", "-o", "name") == 0
        took = time.monotonic() - started
        # The same look in a fresh process, as a user runs it: an unreachable server is
        # settled by one TCP connect before the kubernetes client (a second of CPU) loads.
        code = (
            "import sys; from launcher.cli.main import main\n"
            "try: main(['get', 'runs', '-o', 'name'])\nexcept SystemExit as e: assert e.code == 0, e.code\n"
            "print('kubernetes' in sys.modules)"
        )
        fresh = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "LAUNCHER_HOME": str(launcher_home)},
        )
    out, err = capsys.readouterr()
    assert out.startswith("here-")
    warnings = sorted(ln for ln in err.splitlines() if ln.startswith("!"))
    assert len(warnings) == 2, err
    assert warnings[0].startswith("! cluster refused: cannot reach the API server: connection refused")
    assert warnings[1].startswith("! cluster stalled: cannot reach the API server: connecting timed out")
    # Both profiles are asked at once, each with a short connect timeout and no second try
    # (the old way, one after the other with retries, took over 5 s). Generous bound.
    assert took < 3, f"get runs took {took:.1f} s"
    assert fresh.stdout.splitlines()[0].startswith("here-"), fresh.stderr
    assert fresh.stdout.splitlines()[-1] == "False", "an unreachable profile loaded the kubernetes client"
    assert fresh.stderr.count("! cluster ") == 2


def test_the_reachability_check_reads_the_profiles_context_and_proxy(launcher_home, fake_kube, capsys):
    """The check before a listing connects where the client would: the profile's context
    (not the current one), or the cluster's proxy-url. A reachable server is then listed."""
    with unreachable_server("refused") as refused:
        kubeconfig = launcher_home / "kubeconfig-two"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "down",
                    "clusters": [
                        {"name": "down", "cluster": {"server": refused}},
                        {"name": "up", "cluster": {"server": fake_kube.url}},
                        {"name": "proxied", "cluster": {"server": fake_kube.url, "proxy-url": refused}},
                    ],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [
                        {"name": n, "context": {"cluster": n, "user": "u"}} for n in ("down", "up", "proxied")
                    ],
                }
            )
        )
        config_path = launcher_home / "config.yaml"
        config = yaml.safe_load(config_path.read_text())
        for context in ("up", "down", "proxied"):
            config["clusters"][f"ctx-{context}"] = {
                "backend": "kubernetes",
                "kubeconfig": str(kubeconfig),
                "context": context,
                "image": "ghcr.io/example/launcher:test",
            }
        config_path.write_text(yaml.safe_dump(config))
        capsys.readouterr()
        assert launcher("get", "runs") == 0
        err = capsys.readouterr().err
    assert "! cluster ctx-up" not in err, err
    assert f"! cluster ctx-down: cannot reach the API server: connection refused ({refused})" in err
    assert f"! cluster ctx-proxied: cannot reach the API server: connection refused ({fake_kube.url})" in err


def test_tls_trouble_is_one_line_naming_the_profile(fake_kube, launcher_home):
    # The fake speaks plain HTTP: a kubeconfig that says https fails the TLS handshake.
    add_profile(launcher_home, "tls", fake_kube.url.replace("http://", "https://"))
    with pytest.raises(KubeError) as err:
        make_backend("tls").get("x")
    assert str(err.value).startswith("cluster tls: cannot read ConfigMap x: TLS failed: ")
    assert "\n" not in str(err.value) and err.value.exit_code == 2
    assert err.value.hint == "check the certificate-authority in the kubeconfig"
