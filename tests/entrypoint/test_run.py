"""Parameters, environment, ranks, waiting for rank 0, signals and exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import yaml

from launcher.pod import contract
from tests.entrypoint.conftest import free_port, read_until

PRINT_ENV = 'for v in {names}; do echo "$v=${{!v-<unset>}}"; done'


def printed(out: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith("["))


def test_parameters_file_and_environment(entry):
    spec = {
        "command": 'cat "$PARAMETERS"; echo "PARAMETERS=$PARAMETERS"; '
        + PRINT_ENV.format(
            names="RUN_NAME COMPOSER_RUN_NAME DATA_REMOTE DATA_LOCAL MY_FLAG PYTHONUNBUFFERED WANDB_PROJECT"
        ),
        "parameters": {"lr": 0.001, "model": {"layers": [1, 2]}, "_private": "dropped"},
        "env_variables": {"MY_FLAG": "on"},
        "data": {"remote": "dbfs:/Volumes/main/default/shards", "local": "/tmp/shards"},
        "integrations": [{"integration_type": "wandb", "project": "proj"}],
    }
    r = entry.run(spec)
    assert r.code == 0, r.out
    env = printed(r.out)
    params_file = entry.config_dir / "parameters.yaml"
    assert env["PARAMETERS"] == str(params_file)
    assert yaml.safe_load(params_file.read_text()) == {"lr": 0.001, "model": {"layers": [1, 2]}}
    assert env["RUN_NAME"] == env["COMPOSER_RUN_NAME"] == "test-run"
    assert env["DATA_REMOTE"] == "dbfs:/Volumes/main/default/shards" and env["DATA_LOCAL"] == "/tmp/shards"
    assert env["MY_FLAG"] == "on" and env["PYTHONUNBUFFERED"] == "1" and env["WANDB_PROJECT"] == "proj"
    assert "WANDB_API_KEY is not set" in r.out
    assert "note: the local backend runs with the current Python environment" in r.out


RANK_VARS = (
    "NODE_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT "
    "PET_NNODES PET_NPROC_PER_NODE PET_NODE_RANK PET_MASTER_ADDR PET_MASTER_PORT"
)


def test_rank_environment_for_gpu_nodes(entry):
    r = entry.run(
        {"command": PRINT_ENV.format(names=RANK_VARS)},
        rank=0,
        nodes=2,
        port=23456,
        extra={"LAUNCHER_GPUS_PER_NODE": "8", "MASTER_ADDR": "run-0.run-svc"},
    )
    assert r.code == 0, r.out
    assert {k: v for k, v in printed(r.out).items() if k in RANK_VARS.split()} == {
        "NODE_RANK": "0",
        "WORLD_SIZE": "16",
        "LOCAL_WORLD_SIZE": "8",
        "MASTER_ADDR": "run-0.run-svc",
        "MASTER_PORT": "23456",
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "8",
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": "run-0.run-svc",
        "PET_MASTER_PORT": "23456",
    }


def test_cpu_nodes_run_one_process_each(entry):
    r = entry.run(
        {"command": PRINT_ENV.format(names=RANK_VARS), "compute": {"gpus": 16, "nodes": 2}},
        nodes=2,
        extra={"LAUNCHER_GPUS_PER_NODE": "0"},
    )
    assert r.code == 0, r.out
    env = printed(r.out)
    assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["PET_NPROC_PER_NODE"]) == ("2", "1", "1")


def test_bad_rank_from_the_backend_is_a_setup_error(entry):
    r = entry.run({"command": "true"}, rank=2, nodes=2)
    assert r.code == contract.EXIT_SETUP
    assert "node rank 2 is not within the run's 2 node(s)" in r.out


def test_node_rank1_starts_its_command_without_waiting_for_rank0s_port(entry):
    # Nothing listens on MASTER_PORT, and rank 0 never starts: a plain command still runs
    # on rank 1 at once (torch's store retries its own connections), locally and on
    # Kubernetes once the address resolves.
    for backend in ("local", "kubernetes"):
        began = time.monotonic()
        r = entry.run(
            {"command": PRINT_ENV.format(names="NODE_RANK PET_NODE_RANK WORLD_SIZE")},
            rank=None,
            nodes=2,
            port=free_port(),
            extra={
                "JOB_COMPLETION_INDEX": "1",
                "LAUNCHER_BACKEND": backend,
                "LAUNCHER_ON_HOST": "1" if backend == "local" else "0",
            },
        )
        assert r.code == 0, r.out
        assert time.monotonic() - began < 20
        env = printed(r.out)
        assert (env["NODE_RANK"], env["PET_NODE_RANK"], env["WORLD_SIZE"]) == ("1", "1", "2")
        assert "waiting for node rank 0" not in r.out


def test_unresolvable_master_addr_times_out_clearly(entry):
    began = time.monotonic()
    r = entry.run(
        {"command": "touch command-ran"},
        rank=1,
        nodes=2,
        extra={
            "LAUNCHER_BACKEND": "kubernetes",
            "LAUNCHER_ON_HOST": "0",
            "LAUNCHER_RENDEZVOUS_TIMEOUT": "1.5",
            "MASTER_ADDR": "rank0.does-not-exist.invalid",
        },
    )
    assert r.code == contract.EXIT_RENDEZVOUS, r.out
    assert time.monotonic() - began < 15
    assert "waiting for node rank 0's address rank0.does-not-exist.invalid to resolve (up to 1.5s)" in r.out
    assert "error: node rank 0's address rank0.does-not-exist.invalid did not resolve within 1.5s" in r.out
    assert not (entry.workdir / "command-ran").exists()


def test_exit_codes_are_propagated(entry):
    assert entry.run({"command": "exit 3"}).code == 3
    r = entry.run({"command": "echo before; kill -KILL $$"})
    assert r.code == 128 + signal.SIGKILL
    assert f"[launcher] exit code {128 + signal.SIGKILL}: the command ran" in r.out


def test_a_system_failure_past_the_free_restarts_ends_with_the_counted_code(entry):
    # A GPU the health gate finds gone: a hardware failure, code 70, which a JobSet with
    # retry_on_system_failure restarts free; past LAUNCHER_FREE_RESTARTS restarts, 73 (counted).
    tools = entry.tmp / "tools"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:3B:00.0' >&2\nexit 255\n")
    smi.chmod(0o755)
    spec = {"command": "touch command-ran", "resilience": {"preflight": True}}
    path = f"{tools}{os.pathsep}{os.environ['PATH']}"
    first = entry.run(spec, extra={"PATH": path, "LAUNCHER_FREE_RESTARTS": "2", "LAUNCHER_RESTART_ATTEMPT": "1"})
    assert first.code == 70, first.out
    last = entry.run(spec, extra={"PATH": path, "LAUNCHER_FREE_RESTARTS": "2", "LAUNCHER_RESTART_ATTEMPT": "2"})
    assert last.code == 73, last.out
    assert (
        "[launcher] exit code 73 for 70: the JobSet has restarted 2 times, past the free restarts a run may have "
        "(LAUNCHER_FREE_RESTARTS=2), so this failure counts against max_retries"
    ) in last.out
    assert not (entry.workdir / "command-ran").exists()


def test_sigterm_reaches_the_commands_trap(entry):
    cmd = "trap 'echo got TERM; exit 7' TERM; echo ready; while true; do sleep 0.1; done"
    proc = entry.start({"command": cmd})
    read_until(proc, "ready")
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=20)[0]
    assert proc.returncode == 7, rest
    assert "got TERM" in rest
    assert "received SIGTERM: passed it on to the running process group" in rest


def test_sigterm_reaches_the_whole_process_group(entry, tmp_path):
    # A child of the command (as torchrun's workers are) gets the signal too, and the time
    # to act on it: the shell that leads the group dies of SIGTERM at once, while the child
    # takes a second in its handler (saving a checkpoint) before it writes the marker.
    marker = tmp_path / "child-got-term"
    cmd = (
        f'python -c "import signal, sys, time, pathlib; '
        f"signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1), pathlib.Path('{marker}').touch(), sys.exit(0))); "
        f"print('ready', flush=True); time.sleep(60)\"; echo child done"
    )
    proc = entry.start({"command": cmd})
    read_until(proc, "ready")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert marker.exists()


def test_sigkill_after_the_grace_period(entry):
    proc = entry.start({"command": "trap '' TERM; echo ready; sleep 60"}, extra={"LAUNCHER_GRACE_SECONDS": "1"})
    read_until(proc, "ready")
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=20)[0]
    assert proc.returncode == 128 + signal.SIGKILL, rest
    assert time.monotonic() - began < 10
    assert "did not exit within 1s: sending SIGKILL" in rest


def test_sigterm_while_waiting_for_rank0_stops_at_once(entry):
    proc = entry.start(
        {"command": "touch command-ran"},
        rank=1,
        nodes=2,
        port=free_port(),
        extra={
            "LAUNCHER_BACKEND": "kubernetes",
            "LAUNCHER_ON_HOST": "0",
            "MASTER_ADDR": "rank0.does-not-exist.invalid",
        },
    )
    read_until(proc, "waiting for node rank 0")
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=10)[0]
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "stopped by SIGTERM before the command started" in rest
    assert not (entry.workdir / "command-ran").exists()


def test_background_jobs_do_not_keep_the_run_alive(entry):
    began = time.monotonic()
    r = entry.run({"command": "sleep 60 & echo started a background job"}, timeout=30)
    assert r.code == 0
    assert time.monotonic() - began < 20


def test_secret_values_are_masked_in_the_output(entry):
    r = entry.run(
        {"command": 'echo "token is $MY_TOKEN"'},
        extra={"MY_TOKEN": "s3cr3t-value-123", "LAUNCHER_MASK_ENV": "MY_TOKEN"},
    )
    assert r.code == 0
    assert "token is ****" in r.out and "s3cr3t-value-123" not in r.out
    assert "secrets MY_TOKEN (masked in this log)" in r.out


def test_an_unexpected_error_leaves_its_masked_traceback_in_the_rank_log(entry):
    # A backend that breaks the entrypoint's contract: the restart count it passes with a
    # log archive is not a number (here, a secret's value), and int() raises a ValueError
    # that quotes it, an error the entrypoint does not expect. The value is also the run's secret, so the
    # traceback is masked with the run's values. (A clone URL that urllib cannot read was
    # the example before: the spec refuses it now, on the host and here.)
    token = "s3cr3t-value-456"
    r = entry.run(
        {"command": "echo never runs"},
        extra={
            contract.RESTART_ATTEMPT: token,
            "LAUNCHER_LOG_ARCHIVE": str(entry.run_dir / "archive"),
            "GIT_TOKEN": token,
            "LAUNCHER_MASK_ENV": "GIT_TOKEN",
        },
    )
    assert r.code == contract.EXIT_SETUP, r.out
    lines = r.out.splitlines()
    assert "[launcher] Traceback (most recent call last):" in lines, r.out
    start = lines.index("[launcher] Traceback (most recent call last):")
    summary = lines.index(
        "[launcher] error: the entrypoint failed: ValueError: invalid literal for int() with base 10: '****'"
    )
    traceback = lines[start:summary]
    assert any("launcher/entrypoint/main.py" in line and "start_archive" in line for line in traceback)
    assert traceback[-1] == "[launcher] ValueError: invalid literal for int() with base 10: '****'"
    assert token not in r.out
    assert "never runs" not in r.out and lines[-1].startswith("[launcher] exit code 67 after ")


def test_unreadable_spec_is_its_own_exit_code(entry):
    env = entry.env({"command": "true"})
    (entry.run_dir / "spec-0.json").write_text('{"name": "x", "command": "true", "bogus": 1}')
    done = subprocess.run([sys.executable, "-m", "launcher.entrypoint"], env=env, capture_output=True, text=True)
    assert done.returncode == contract.EXIT_SPEC
    assert "cannot read the submitted spec" in done.stdout and "bogus" in done.stdout
