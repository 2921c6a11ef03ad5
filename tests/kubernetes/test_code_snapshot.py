"""A code snapshot on Kubernetes: `run --code DIR` puts the packed tree in a ConfigMap (or a
Secret, with the profile's code_in_secret) <run>-code, mounted at /mnt/code; the zipapp
entrypoint checks its digest and lays it over the pod's working directory. Against the fake
cluster run as a program, with an image whose only Python is the system's."""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.error
import urllib.request

import kubernetes_validate
import pytest

from launcher.backends.kubernetes.render import plan_run, render_code_object
from launcher.pod.code_archive import digest_of
from launcher.spec.models import Code
from tests.cli.test_code_snapshot import git_tree
from tests.kubernetes.specs import PROFILE, secrets, spec
from tests.kubernetes.test_jobset import launcher
from tests.kubernetes.test_render import NEWEST, pod_spec, validate
from tests.kubernetes.test_zipapp import IMAGE, SYSTEM_PYTHON, ZIPAPP, image_dir, pods_of


def api_get(kube, path: str) -> dict | None:
    try:
        with urllib.request.urlopen(kube.url + path, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def code_spec(tmp_path, name: str, command: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        json.dumps({"name": name, "image": IMAGE, "command": command, "compute": {"gpu_type": "none", "nodes": 1}})
    )
    return path


@pytest.mark.parametrize("in_secret", [False, True])
def test_an_uncommitted_module_reaches_the_pod(fake_kube_program, tmp_path, capsys, in_secret):
    tree = git_tree(tmp_path / "tree")
    image_bin = image_dir(tmp_path / "image", SYSTEM_PYTHON)
    kube = fake_kube_program(
        "--nodes",
        "1",
        "--image",
        f"{IMAGE}={image_bin.parent}",
        profile={**ZIPAPP, "code_in_secret": in_secret},
    )
    capsys.readouterr()
    listing = "python3 -c 'import os; print(\"FILES\", *sorted(os.listdir()))'"
    spec_file = code_spec(tmp_path, "code-k8s", f"{listing} && python3 main.py")
    code = launcher("run", "-f", str(spec_file), "--cluster", "fake", "--code", str(tree), "--follow")
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "helper says uncommitted" in out
    files = next(line.split()[1:] for line in out.splitlines() if line.startswith("FILES "))
    assert files == [".gitignore", "helper.py", "main.py"]  # not the ignored directory, not .git
    name = re.search(r"Run (\S+) started", out + err).group(1)
    kind = "secrets" if in_secret else "configmaps"
    obj = api_get(kube, f"/api/v1/namespaces/default/{kind}/{name}-code")
    packed = base64.b64decode((obj.get("data") if in_secret else obj["binaryData"])["code.tar.gz"])
    assert re.search(r"code: 3 file\(s\) of snapshot sha256:", out)
    pod = pods_of(kube, name)[0]
    assert {"name": "code", "mountPath": "/mnt/code", "readOnly": True} in pod["spec"]["containers"][0]["volumeMounts"]
    capsys.readouterr()
    assert launcher("describe", "run", name, "-o", "json") == 0
    record = json.loads(capsys.readouterr().out)
    assert record["spec"]["code"]["digest"] == digest_of(packed)
    other = api_get(kube, f"/api/v1/namespaces/default/{'configmaps' if in_secret else 'secrets'}/{name}-code")
    assert other is None  # one object carries it
    assert launcher("delete", "run", name, "-y") == 0
    assert api_get(kube, f"/api/v1/namespaces/default/{kind}/{name}-code") is None


def test_a_tree_past_the_configmap_limit_is_refused_before_anything_is_submitted(fake_kube_program, tmp_path, capsys):
    tree = git_tree(tmp_path / "tree")
    (tree / "assets").mkdir()
    (tree / "assets" / "blob.bin").write_bytes(os.urandom(800 * 1024))
    kube = fake_kube_program("--nodes", "1", profile=ZIPAPP)
    capsys.readouterr()
    code = launcher("run", "-f", str(code_spec(tmp_path, "too-big", "true")), "--cluster", "fake", "--code", str(tree))
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "over the 700.0 KiB a run of the kubernetes backend takes" in err
    assert "assets/blob.bin (800.0 KiB)" in err and "exclude: [assets]" in err
    assert api_get(kube, "/api/v1/namespaces/default/configmaps")["items"] == []
    assert api_get(kube, "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")["items"] == []


@pytest.mark.parametrize("in_secret", [False, True])
def test_the_code_object_and_the_pod_that_mounts_it_validate(in_secret, tmp_path):
    profile = PROFILE.model_copy(update={"code_in_secret": in_secret})
    data = b"\x1f\x8b packed bytes"
    run = spec(code=Code(path=".", digest=digest_of(data)))
    manifests = plan_run(run, profile, secrets()).manifests
    obj = render_code_object(run, profile, data)
    for manifest in [*manifests, obj]:
        validate(manifest, NEWEST)
    volume = next(v for v in pod_spec(manifests)["volumes"] if v["name"] == "code")
    assert volume == (
        {"name": "code", "secret": {"secretName": f"{run.name}-code"}}
        if in_secret
        else {"name": "code", "configMap": {"name": f"{run.name}-code"}}
    )
    plan = json.loads(manifests[0]["data"]["plan.json"])
    assert plan["code"] == {"digest": digest_of(data), "file": "/mnt/code/code.tar.gz"}
    assert obj["kind"] == ("Secret" if in_secret else "ConfigMap")
    assert "launcher.dev/run" not in obj["metadata"]["labels"]  # not taken for the run's record
    # Without a snapshot nothing of it is rendered.
    plain = plan_run(spec(), profile, secrets()).manifests
    assert all(v["name"] != "code" for v in pod_spec(plain)["volumes"])
    assert "code" not in json.loads(plain[0]["data"]["plan.json"])
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**obj, "binaryData": 1}, NEWEST, strict=True)


def test_a_large_tree_goes_through_the_code_store(fake_kube_program, s3, tmp_path, capsys):
    """Past 700 KiB packed, the snapshot goes to the profile's code_store (moto S3 here), with
    the credentials of its code_store_secret, and the zipapp's stdlib S3 client fetches it."""
    from launcher.backends.kubernetes.secrets import KubernetesSecretStore
    from launcher.config import load_config
    from launcher.secrets.kinds import Secret, SecretKind

    tree = git_tree(tmp_path / "tree")
    (tree / "assets").mkdir()
    blob = os.urandom(900 * 1024)
    (tree / "assets" / "blob.bin").write_bytes(blob)
    image_bin = image_dir(tmp_path / "image", SYSTEM_PYTHON)
    env = s3.env()
    kube = fake_kube_program(
        "--nodes",
        "1",
        "--image",
        f"{IMAGE}={image_bin.parent}",
        profile={**ZIPAPP, "code_store": f"s3://{s3.bucket}/code/", "code_store_secret": "code-s3"},
    )
    KubernetesSecretStore(load_config().profile("fake")).create(
        Secret(
            "code-s3",
            SecretKind.S3,
            {
                "credentials": f"[default]\naws_access_key_id = {env['AWS_ACCESS_KEY_ID']}\n"
                f"aws_secret_access_key = {env['AWS_SECRET_ACCESS_KEY']}\n",
                "config": f"[default]\nregion = us-east-1\nendpoint_url = {s3.endpoint}\n",
            },
        )
    )
    capsys.readouterr()
    check = (
        "python3 main.py && python3 -c 'import hashlib; "
        'print("BLOB", hashlib.sha256(open("assets/blob.bin", "rb").read()).hexdigest())\''
    )
    code = launcher(
        "run", "-f", str(code_spec(tmp_path, "big-code", check)), "--cluster", "fake", "--code", str(tree), "--follow"
    )
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "helper says uncommitted" in out
    import hashlib

    assert f"BLOB {hashlib.sha256(blob).hexdigest()}" in out
    name = re.search(r"Run (\S+) started", out + err).group(1)
    assert s3.keys(f"code/{name}/") == [f"code/{name}/code.tar.gz"]
    assert api_get(kube, f"/api/v1/namespaces/default/configmaps/{name}-code") is None
    pod = pods_of(kube, name)[0]
    assert all(v["name"] != "code" for v in pod["spec"]["volumes"])


def test_the_runs_own_code_secret_not_yet_there_is_no_failure():
    """A pod may try to mount <run>-code before submit has created it: only a user's missing
    secret is fatal."""
    from launcher.backends.base import RunStatus
    from launcher.backends.kubernetes.attempts import rank_view

    pod = {
        "metadata": {
            "name": "r-0-abcde",
            "labels": {"launcher.dev/run": "r"},
            "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
        },
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ContainerCreating"}}}],
        },
    }

    def event(secret: str) -> dict:
        return {
            "reason": "FailedMount",
            "involvedObject": {"kind": "Pod", "name": "r-0-abcde"},
            "lastTimestamp": "2025-01-01T00:00:01Z",
            "message": f'MountVolume.SetUp failed for volume "v" : secret "{secret}" not found',
        }

    assert rank_view(pod, [event("r-code")]).status is RunStatus.STARTING
    assert rank_view(pod, [event("hf-token")]).status is RunStatus.FAILED
