"""On Kubernetes (the fake cluster program, its pods in runc containers of a Debian image
running the shipped zipapp entrypoint): a failed rank's class reaches the host through the
pod's termination message, which the entrypoint leaves as `CLASS: evidence`; the host
reads no log to tell it."""

from __future__ import annotations

import json

import pytest

from tests.fakes.kube.runc import runc_check
from tests.kubernetes.test_jobset import launcher
from tests.kubernetes.test_runc import IMAGE, ZIPAPP, built_image, spec_file

pytestmark = pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."


def start(fake_kube_program) -> None:
    image = built_image("bookworm-python3")
    fake_kube_program("--runtime", "runc", "--nodes", "1", "--image", f"{IMAGE}={image}", profile=ZIPAPP)


def describe(capsys, name: str) -> dict:
    capsys.readouterr()
    assert launcher("describe", "run", name, "-o", "json") == 0
    return json.loads(capsys.readouterr().out)


def test_a_pod_that_printed_an_xid_fails_as_hardware(fake_kube_program, tmp_path, capsys):
    start(fake_kube_program)
    command = f"echo '{XID}'; echo later lines; exit 1"
    capsys.readouterr()
    code = launcher(
        "run", "-f", str(spec_file(tmp_path, "xid-pod", command, image=IMAGE)), "--cluster", "fake", "--follow"
    )
    out, err = capsys.readouterr()
    assert code == 1, out + err
    # In a pod the entrypoint ends with the class's code, which the JobSet's failurePolicy reads.
    assert f"rank 0 exited with code 70: hardware: {XID}" in out + err
    assert "[launcher] exit code 70 for the command's 1: a hardware failure" in out + err
    rec = describe(capsys, "xid-pod")
    failure = rec["attempts"][0]["failure"]
    assert failure["class"] == "hardware" and failure["evidence"] == f"rank 0: hardware: {XID}"
    assert failure["retried_as"] == "system"


def test_a_plain_failure_keeps_its_reason_and_is_user(fake_kube_program, tmp_path, capsys):
    start(fake_kube_program)
    capsys.readouterr()
    code = launcher(
        "run", "-f", str(spec_file(tmp_path, "plain-pod", "exit 3", image=IMAGE)), "--cluster", "fake", "--follow"
    )
    out, err = capsys.readouterr()
    assert code == 1, out + err
    rec = describe(capsys, "plain-pod")
    assert rec["attempts"][0]["reason"].startswith("rank 0 exited with code 3")
    assert ": user" not in rec["attempts"][0]["reason"]
    assert rec["attempts"][0]["failure"]["class"] == "user"
