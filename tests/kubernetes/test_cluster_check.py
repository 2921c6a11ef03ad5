"""The runtime image a first real run needs: `cluster add` warns when a profile's runtime
image is the package's unpublished default, and `launcher cluster check` asks each cluster,
with one short-lived pod per image, whether it can pull it. Against the fake, whose kubelet
answers ErrImagePull for the images in faults.bad_images and runs the runtime image from a
directory."""

from __future__ import annotations

import json
import shutil

import pytest

from launcher.backends.kubernetes.profiles import RUNTIME_IMAGE
from launcher.cli.error_report import run_cli
from launcher.cli.main import cli
from tests.conftest import wait_until
from tests.fakes.kube.fixtures import write_profile

PROBE_PODS = "launcher.dev/probe=image-pull"
UNPUBLISHED = f"runtime_image {RUNTIME_IMAGE} is the package's default, which is published nowhere"


def launcher(*args: str) -> int:
    try:
        return run_cli(cli, list(args))
    except SystemExit as e:
        return int(e.code or 0)


@pytest.fixture
def inject_kube(fake_kube_factory, launcher_home, tmp_path):
    """The fake with a profile in inject mode, whose pods pull the runtime image: an image
    directory with `true` in it."""
    image = tmp_path / "runtime-image"
    (image / "bin").mkdir(parents=True)
    (image / "bin" / "true").symlink_to(shutil.which("true"))
    kube = fake_kube_factory(images={RUNTIME_IMAGE: str(image)})
    write_profile(launcher_home, kube, entrypoint_mode="inject")
    return kube


def probe_pods_gone(kube) -> bool:
    return not [p for p in kube.pods() if (p["metadata"].get("labels") or {}).get("launcher.dev/probe")]


def test_cluster_add_warns_about_the_unpublished_default_runtime_image(inject_kube, launcher_home, capsys):
    kubeconfig = str(inject_kube.write_kubeconfig(launcher_home / "kubeconfig"))
    assert (
        launcher(
            "cluster", "add", "first", "--kubeconfig", kubeconfig, "--context", "fake", "--entrypoint-mode", "inject"
        )
        == 0
    )
    err = capsys.readouterr().err
    assert f"! cluster first: {UNPUBLISHED}" in err and "`launcher cluster check NAME` tries the pull" in err
    # A runtime image of one's own, or a mode that pulls none (zipapp, the default, and image).
    for quiet in (
        ["--entrypoint-mode", "inject", "--runtime-image", "ghcr.io/me/launcher-runtime:0.1.0"],
        ["--entrypoint-mode", "image"],
        [],
    ):
        assert (
            launcher("cluster", "add", "second", "--kubeconfig", kubeconfig, "--context", "fake", "--replace", *quiet)
            == 0
        )
        assert "published nowhere" not in capsys.readouterr().err


def test_check_says_the_cluster_can_pull_the_runtime_image_and_removes_its_pod(inject_kube, capsys):
    assert launcher("cluster", "check", "fake") == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["✔ fake: the cluster answers (JobSet served)", f"✔ fake: can pull {RUNTIME_IMAGE}"]
    assert "published nowhere" not in err  # this cluster pulls it (a mirror, a preloaded image)
    assert len([r for r in inject_kube.requests if r[1] == "Pod" and r[2] == "create"]) == 1
    wait_until(lambda: probe_pods_gone(inject_kube), 20, message="the probe pod to be deleted")


def test_check_reports_a_pull_error_and_exits_1(inject_kube, capsys):
    inject_kube.faults.bad_images = [RUNTIME_IMAGE]
    assert launcher("cluster", "check") == 1
    out, err = capsys.readouterr()
    assert (
        f"✗ fake: cannot pull {RUNTIME_IMAGE}: ErrImagePull: failed to pull and unpack image "
        f'"{RUNTIME_IMAGE}": not found' in out
    )
    assert f"! fake: {UNPUBLISHED}" in err
    wait_until(lambda: probe_pods_gone(inject_kube), 20, message="the probe pod to be deleted")
    capsys.readouterr()
    assert launcher("cluster", "check", "-o", "json") == 1
    report = json.loads(capsys.readouterr().out)
    assert report[0]["profile"] == "fake" and report[0]["reachable"] is True
    assert report[0]["images"] == [
        {
            "image": RUNTIME_IMAGE,
            "pulled": False,
            "detail": f'ErrImagePull: failed to pull and unpack image "{RUNTIME_IMAGE}": not found',
        }
    ]


def test_a_pod_that_never_starts_is_no_answer_within_the_timeout(inject_kube, capsys):
    inject_kube.faults.hold_pods = True
    assert launcher("cluster", "check", "fake", "--timeout", "1") == 1
    out = capsys.readouterr().out
    assert (
        f"! fake: could not tell whether it can pull {RUNTIME_IMAGE}: no answer within 1 s (ContainerCreating)" in out
    )
    inject_kube.faults.hold_pods = False
    wait_until(lambda: probe_pods_gone(inject_kube), 20, message="the probe pod to be deleted")


def test_an_unreachable_cluster_exits_1_and_image_mode_pulls_nothing(inject_kube, launcher_home, capsys):
    import yaml

    from tests.fakes.kube.cluster import kubeconfig
    from tests.fakes.kube.faults import unreachable_server

    write_profile(launcher_home, inject_kube, name="own-image", entrypoint_mode="image")
    with unreachable_server("refused") as url:
        down = launcher_home / "down-kubeconfig"
        down.write_text(json.dumps(kubeconfig(url, "fake")))
        config = yaml.safe_load((launcher_home / "config.yaml").read_text())
        config["clusters"]["down"] = {"backend": "kubernetes", "kubeconfig": str(down), "context": "fake"}
        (launcher_home / "config.yaml").write_text(yaml.safe_dump(config))
        assert launcher("cluster", "check", "own-image", "down") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "✔ own-image: the cluster answers (JobSet served)"
    assert len(out) == 2 and out[1].startswith("✗ down: ") and "cluster down" in out[1], out
    assert not [r for r in inject_kube.requests if r[1] == "Pod" and r[2] == "create"]


def test_a_probe_the_cluster_refuses_is_no_answer(inject_kube, capsys):
    inject_kube.faults.inject("create", "pods", status=403, times=1)
    assert launcher("cluster", "check", "fake") == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "✔ fake: the cluster answers (JobSet served)"
    assert (
        out[1].startswith(f"! fake: could not tell whether it can pull {RUNTIME_IMAGE}: the probe pod could not run: ")
        and "403" in out[1]
    ), out


def test_an_unknown_profile_is_a_usage_error(launcher_home, capsys):
    assert launcher("cluster", "check", "nope") == 2
    assert "no cluster profile named 'nope'" in capsys.readouterr().err
