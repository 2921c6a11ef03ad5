"""On Kubernetes (the fake cluster, runc: only a container has a /dev/termination-log), a
retried attempt resumes from the newest complete checkpoint in an s3:// save_folder (moto,
listed by the pod's zipapp with the standard library alone), and `describe` says the step it
resumed from, read from the pods' termination messages; the steps lost where the attempt
before it is still known (its pods, or its summary in the record), nothing where the JobSet's
restart took them."""

from __future__ import annotations

import pytest

from tests.fakes.kube.runc import runc_check
from tests.kubernetes.test_restart_update import record
from tests.kubernetes.test_runc import ZIPAPP
from tests.resilience.test_kubernetes_excluded_nodes import launcher
from tests.resilience.test_kubernetes_pod_faults import submit

RESUMES = """\
echo "attempt $LAUNCHER_ATTEMPT resumes from ${LAUNCHER_RESUME_FROM-nothing}"
[ "$LAUNCHER_ATTEMPT" = 3 ] && exit 0
for step in 21 25 30; do echo "@@launcher.heartbeat {\\"step\\": $step}"; sleep 0.2; done
exit 1
"""


@pytest.mark.skipif(runc_check() is not None, reason=f"runc runtime unavailable: {runc_check()}")
def test_a_retry_resumes_from_s3_and_describe_says_from_which_step(fake_kube_program, s3, tmp_path, capsys):
    for key, data in {
        "ckpt/ep0-ba10-rank0.pt": b"weights",
        "ckpt/ep0-ba20-rank0.pt": b"newer weights",
        "ckpt/ep0-ba30-rank0.pt.partial": b"half",  # the upload a crash interrupted
    }.items():
        s3.client.put_object(Bucket=s3.bucket, Key=key, Body=data)
    fake_kube_program("--runtime", "runc", "--nodes", "1", profile=ZIPAPP)
    url = f"s3://{s3.bucket}/ckpt/ep0-ba20-rank0.pt"
    code, name = submit(
        tmp_path,
        capsys,
        "resumes",
        RESUMES,
        "--follow",
        parameters={"save_folder": f"s3://{s3.bucket}/ckpt"},
        env_variables=s3.env(),
        scheduling={"max_retries": 1},
    )
    assert code != 0
    rec = record(capsys, name)
    assert [a["status"] for a in rec["attempts"]] == ["FAILED", "FAILED"], rec
    first, second = rec["attempts"]
    assert first["resumed"] is None
    # Attempt 1's pods went with the JobSet's restart: its last step is unknown, so are the steps lost.
    assert second["resumed"] == {"from": url, "step": 20, "steps_lost": None}
    assert second["failure"]["last_step"] == 30  # from its pod's termination message
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    assert f"  Resumed: from {url} (step 20)\n" in capsys.readouterr().out
    capsys.readouterr()
    assert launcher("logs", name, "--attempt", "2") == 0
    logs = capsys.readouterr().out
    assert f"[launcher] resume: attempt 2 resumes from {url} (step 20) (LAUNCHER_RESUME_FROM)" in logs
    assert f"attempt 2 resumes from {url}" in logs

    # A restart by hand: attempt 2's summary (its last step) is kept, so attempt 3's steps lost are known.
    capsys.readouterr()
    assert launcher("run", "-r", name, "--follow") == 0
    third = record(capsys, name)["attempts"][2]
    assert third["status"] == "COMPLETED" and third["resumed"] == {"from": url, "step": 20, "steps_lost": 10}
    capsys.readouterr()
    assert launcher("describe", "run", name) == 0
    assert f"  Resumed: from {url} (step 20); 10 steps lost\n" in capsys.readouterr().out
