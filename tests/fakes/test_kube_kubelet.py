"""The fake kubelet: init containers in order, emptyDir/configMap/secret volumes at their
absolute mountPath (in a private mount namespace, as root), images mapped to directories
with a clean environment, and a failing init container."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.fakes.kube.cluster import FakeKube
from tests.fakes.kube.kubelet import isolation_check
from tests.fakes.kube.tables import pod_status

NS = "default"
ISOLATION = isolation_check()


def wait_phase(kube, name: str, timeout: float = 20.0) -> dict:
    return wait_until(
        lambda: (pod := kube.get("Pod", NS, name))["status"].get("phase") in ("Succeeded", "Failed") and pod,
        timeout,
        message=f"pod {name} to succeed or fail",
    )


def log(kube, pod: dict, container: str) -> list[str]:
    return [text for _, text in kube.kubelet.container(pod, container).lines]


@pytest.fixture
def image(tmp_path) -> Path:
    """A stand-in for an image: its bin/ has a python3 of its own, env and sh."""
    root = tmp_path / "image"
    (root / "bin").mkdir(parents=True)
    shim = root / "bin" / "python3"
    shim.write_text('#!/bin/sh\necho "image python3 $*"\n')
    shim.chmod(0o755)
    for tool in ("env", "sh", "cat", "cp", "mkdir", "ls"):
        os.symlink(f"/bin/{tool}" if os.path.exists(f"/bin/{tool}") else f"/usr/bin/{tool}", root / "bin" / tool)
    return root


@pytest.mark.skipif(ISOLATION is not None, reason=f"no private mount namespaces here: {ISOLATION}")
def test_init_container_fills_an_empty_dir_that_the_main_container_runs_from(tmp_path, image):
    runtime = tmp_path / "runtime-image"
    (runtime / "bin").mkdir(parents=True)
    kube = FakeKube(images={"mosaicml/pytorch:*": str(image), "ghcr.io/example/runtime:*": "/usr"}).start()
    try:
        kube.create("ConfigMap", NS, {"metadata": {"name": "cfg"}, "data": {"run.yaml": "lr: 0.1\n"}})
        kube.create(
            "Secret", NS, {"metadata": {"name": "tok"}, "data": {"token": base64.b64encode(b"s3cret").decode()}}
        )
        script = "#!/bin/sh\necho runtime says $(cat /mnt/config/run.yaml) $(cat /etc/creds/token)\nexec python3 -V\n"
        kube.create(
            "Pod",
            NS,
            {
                "metadata": {"name": "inject"},
                "spec": {
                    "restartPolicy": "Never",
                    "initContainers": [
                        {
                            "name": "copy-runtime",
                            "image": "ghcr.io/example/runtime:1",
                            "command": [
                                "sh",
                                "-c",
                                f"mkdir -p /launcher/bin && printf '%s' '{script}' > /launcher/bin/entry && "
                                "chmod +x /launcher/bin/entry && echo copied",
                            ],
                            "volumeMounts": [{"name": "runtime", "mountPath": "/launcher"}],
                        }
                    ],
                    "containers": [
                        {
                            "name": "main",
                            "image": "mosaicml/pytorch:2.5",
                            "command": ["/launcher/bin/entry"],
                            "env": [{"name": "ONLY", "value": "mine"}],
                            "volumeMounts": [
                                {"name": "runtime", "mountPath": "/launcher"},
                                {"name": "config", "mountPath": "/mnt/config"},
                                {"name": "creds", "mountPath": "/etc/creds"},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "runtime", "emptyDir": {}},
                        {"name": "config", "configMap": {"name": "cfg"}},
                        {"name": "creds", "secret": {"secretName": "tok"}},
                    ],
                },
            },
        )
        pod = wait_phase(kube, "inject")
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert log(kube, pod, "copy-runtime") == ["copied"]
        assert log(kube, pod, "main") == ["runtime says lr: 0.1 s3cret", "image python3 -V"]
        assert [s["state"]["terminated"]["exitCode"] for s in pod["status"]["initContainerStatuses"]] == [0]
        # The volume lived in the pod's mount namespace only.
        assert not Path("/launcher/bin/entry").exists()
    finally:
        kube.close()


def test_a_mapped_image_runs_with_the_pods_env_only(image):
    kube = FakeKube(images={"mosaicml/pytorch:*": str(image)}).start()
    try:
        kube.create(
            "Pod",
            NS,
            {
                "metadata": {"name": "clean"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "mosaicml/pytorch:2.5",
                            "command": ["env"],
                            "env": [{"name": "ONLY", "value": "mine"}],
                        }
                    ],
                },
            },
        )
        pod = wait_phase(kube, "clean")
        env = dict(line.split("=", 1) for line in log(kube, pod, "main"))
        assert env.pop("PATH") == str(image / "bin") and env.pop("ONLY") == "mine"
        assert sorted(env) == ["HOME", "HOSTNAME", "MASTER_ADDR"]
        kube.create(
            "Pod",
            NS,
            {
                "metadata": {"name": "nopython"},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "mosaicml/pytorch:2.5", "command": ["python", "-V"]}],
                },
            },
        )
        term = wait_phase(kube, "nopython")["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["reason"], term["message"]) == ("StartError", 'exec: "python": executable file not found in $PATH')
    finally:
        kube.close()


def test_a_failing_init_container_fails_the_pod_before_the_main_one_runs():
    kube = FakeKube().start()
    try:
        kube.create(
            "Pod",
            NS,
            {
                "metadata": {"name": "broken"},
                "spec": {
                    "restartPolicy": "Never",
                    "initContainers": [
                        {"name": "setup", "image": "busybox", "command": ["sh", "-c", "echo no; exit 4"]}
                    ],
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo never"]}],
                },
            },
        )
        pod = wait_phase(kube, "broken")
        assert pod["status"]["phase"] == "Failed"
        assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 4
        assert pod_status(pod) == "Init:Error"
        assert kube.kubelet.container(pod, "main").proc is None
    finally:
        kube.close()


def test_on_failure_restarts_the_container_in_place_and_keeps_the_previous_log():
    kube = FakeKube().start()
    try:
        kube.create(
            "Pod",
            NS,
            {
                "metadata": {"name": "flaky"},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": [
                                "sh",
                                "-c",
                                "if [ -f seen ]; then echo second; else touch seen; echo first; exit 1; fi",
                            ],
                        }
                    ],
                },
            },
        )
        pod = wait_phase(kube, "flaky")
        cs = pod["status"]["containerStatuses"][0]
        assert pod["status"]["phase"] == "Succeeded" and cs["restartCount"] == 1
        assert cs["lastState"]["terminated"]["exitCode"] == 1
        import urllib.request

        base = f"{kube.url}/api/v1/namespaces/{NS}/pods/flaky/log"
        assert urllib.request.urlopen(base).read() == b"second\n"
        assert urllib.request.urlopen(base + "?previous=true").read() == b"first\n"
    finally:
        kube.close()
