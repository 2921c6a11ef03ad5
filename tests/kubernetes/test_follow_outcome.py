"""`run --follow` as a new user sees it, against the fake cluster run as a program: a run
whose image does not pull says why, and a run that completed after the JobSet controller
restarted past an attempt exits 0, its lost attempt a warning."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.kubernetes.test_backend import worker
from tests.kubernetes.test_history import REPO, cli


def spec_file(tmp_path: Path, **fields) -> Path:
    spec = {"name": "follow", "image": "ghcr.io/example/launcher:test", "compute": {"gpu_type": "none"}, **fields}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_run_follow_says_why_the_image_did_not_pull(fake_kube_program, tmp_path, capsys):
    kube = fake_kube_program(profile={"entrypoint_mode": "image"})
    kube.faults.set(bad_images=["ghcr.io/example/missing:1"])
    spec = spec_file(tmp_path, image="ghcr.io/example/missing:1", command="true")
    code, out, err = cli(capsys, "run", "-f", str(spec), "--cluster", "fake", "--follow")
    assert code == 1, err
    assert "never started a container" not in err
    assert re.search(
        r"✗ Run follow-[a-z0-9]{6} failed: rank 0: ErrImagePull: failed to pull and unpack image "
        r'"ghcr.io/example/missing:1": not found',
        err,
    ), err
    assert "Traceback" not in err
    name = re.search(r"Run (follow-[a-z0-9]{6}) failed", err).group(1)
    # `logs` says the same reason.
    code, out, err = cli(capsys, "logs", name)
    assert (code, out) == (1, "")
    assert (
        f"attempt 1 of run {name} never started a container (FAILED: rank 0: ErrImagePull: failed to pull and "
        'unpack image "ghcr.io/example/missing:1": not found), so it has no logs'
    ) in err


def test_run_follow_exits_0_when_the_run_completes_after_a_lost_attempt(fake_kube_program, tmp_path, capsys):
    fake_kube_program("--nodes", "2", profile={"entrypoint_mode": "image"})
    # Attempt 1 fails after a line (the follower reads it); attempt 2 fails at once, and its pods
    # are gone before a follower gets to them; attempt 3 completes.
    command = (
        'if [ "$LAUNCHER_ATTEMPT" = 2 ] && [ "$NODE_RANK" = 1 ]; then exit 4; fi; '
        f"{worker('--lines', '4', '--interval', '0.3', '--fail-rank', '0', '--fail-code', '3', '--fail-attempt', '1')}"
    )
    spec = spec_file(
        tmp_path,
        command=command,
        compute={"gpu_type": "none", "nodes": 2},
        scheduling={"max_retries": 2},
        env_variables={"PYTHONPATH": str(REPO)},
    )
    code, out, err = cli(capsys, "run", "-f", str(spec), "--cluster", "fake", "--follow")
    assert code == 0, err
    assert re.search(r"✔ Run follow-[a-z0-9]{6} completed", err), err
    assert "[rank 0] rank 0 attempt 3 starting" in out and "[rank 1] rank 1 done" in out, out
    # Attempt 2's log, where the follower came too late for it, is a warning, never the outcome.
    for line in err.splitlines():
        if "are gone" in line:
            assert line.startswith("! Run follow-") and "the pods of attempt 2 are gone (JobSet restart)" in line
    assert "Traceback" not in err
    # Without a log_store, what the follow read of attempt 1 (which a restart ended) was kept
    # as the JobSet controller deleted its pods (where the follower read it at all).
    name = re.search(r"Run (follow-[a-z0-9]{6}) completed", err).group(1)
    if "the pods of attempt 1 are gone" not in err:
        code, out, err = cli(capsys, "logs", name, "--attempt", "1")
        assert code == 0, err
        assert "[rank 0] rank 0 fails with code 3" in out and "[rank 0] [launcher] exit code 3" in out, out
        assert "[rank 1] rank 1 attempt 1 starting" in out, out
