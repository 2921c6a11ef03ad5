"""The health gate before the command (resilience.preflight): real local runs of 2 ranks,
with the standard library's rendezvous (no torch here) and a device tool on PATH that
fails on one rank, as nvidia-smi does for a GPU that fell off the bus."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from launcher.entrypoint.preflight import check_devices, rendezvous

TWO_RANKS = """\
name: {name}
compute: {{nodes: 2}}
command: echo "the command ran on rank $NODE_RANK"
resilience: {{preflight: true}}
"""

FAKE_NVIDIA_SMI = """#!/bin/sh
if [ "$NODE_RANK" = 1 ]; then
  echo "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error" >&2
  exit 255
fi
echo "0, NVIDIA H100 80GB HBM3, 81559 MiB"
"""


# DCGM 4.x's `dcgmi diag -r 1 -j`: a banner line, then the report; a result and its
# test's summary both say Fail.
FAKE_DCGMI_FAILING = """#!/bin/sh
echo "Successfully ran diagnostic for group."
cat <<'EOF'
{"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "software", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"}],
   "test_summary": {"status": "Pass"}},
  {"name": "Page Retirement/Row Remap", "results": [
     {"entity_group": "GPU", "entity_id": 1, "status": "Fail",
      "warnings": [{"warning": "GPU 1 had uncorrectable memory errors and row remapping failed.", "error_id": 83}]}],
   "test_summary": {"status": "Fail"}}]}]}}
EOF
exit 226
"""

# DCGM 3.x's layout, all passed.
FAKE_DCGMI_PASSING = """#!/bin/sh
cat <<'EOF'
{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
  {"name": "Denylist", "results": [{"status": "Pass"}]},
  {"name": "Environment Variables", "results": [{"gpu_ids": "0", "status": "Pass"}]}]}], "version": "3.1.8"}}
EOF
"""

# No nv-hostengine to talk to: says nothing of the GPUs.
FAKE_DCGMI_NO_HOST_ENGINE = """#!/bin/sh
echo "Error: unable to establish a connection to the specified host: localhost" >&2
echo "Error: Unable to connect to host engine. Host engine connection invalid/disconnected." >&2
exit 255
"""


def tools_dir(root: Path, **tools: str) -> Path:
    """A folder of executables named as the keys (nvidia_smi is nvidia-smi)."""
    folder = root / "tools"
    folder.mkdir(exist_ok=True)
    for name, text in tools.items():
        tool = folder / name.replace("_", "-")
        tool.write_text(text)
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder


def test_two_ranks_pass_the_gate_and_the_log_says_how_long_it_took(cli):
    spec = cli.cwd / "gated.yaml"
    spec.write_text(TWO_RANKS.format(name="gated"))
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in (0, 1):
        logs = cli("logs", "gated", "--rank", str(rank)).stdout
        assert "preflight: no nvidia-smi on PATH: no GPU to check on this rank" in logs
        # Where torch is importable by the rank's python3, a gloo all-reduce; else the
        # standard library's rendezvous (tested on its own below).
        assert "preflight: passed in " in logs
        assert "(gloo all-reduce)" in logs or "(rendezvous at rank 0 (no torch in this rank))" in logs
        assert logs.index("preflight: passed in") < logs.index(f"the command ran on rank {rank}")


def test_a_rank_whose_gpu_fails_ends_the_attempt_as_hardware_before_the_command(cli, tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    cli.env["PATH"] = f"{tools}{os.pathsep}{cli.env['PATH']}"
    spec = cli.cwd / "badgpu.yaml"
    spec.write_text(TWO_RANKS.format(name="badgpu"))
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode != 0, r.stdout + r.stderr
    assert "the command ran" not in r.stdout
    rec = json.loads(cli("describe", "run", "badgpu", "-o", "json").stdout)
    failure = rec["failure"]
    assert failure["class"] == "hardware" and failure["retried_as"] == "system"
    # The gate's verdict ("hardware: preflight: ...") or, where the supervisor ended rank 1
    # before it wrote that, the same line from its log ("[launcher] preflight: ...").
    assert failure["evidence"].startswith("rank 1: "), failure
    assert failure["evidence"].endswith(
        " preflight: nvidia-smi failed (exit code 255): "
        "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"
    ), failure
    assert (
        "preflight: nvidia-smi lists 1 GPU(s): 0, NVIDIA H100 80GB HBM3, 81559 MiB"
        in cli("logs", "badgpu", "--rank", "0").stdout
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_standard_library_rendezvous_sums_the_failed_device_checks():
    port = free_port()
    answers: dict[int, int | str] = {}
    others = [
        threading.Thread(target=lambda r=r: answers.__setitem__(r, rendezvous("127.0.0.1", port, r, 3, r == 2, 10.0)))
        for r in (1, 2)
    ]
    for t in others:
        t.start()
    answers[0] = rendezvous("127.0.0.1", port, 0, 3, False, 10.0)
    for t in others:
        t.join(timeout=15)
    assert answers == {0: 1, 1: 1, 2: 1}  # every rank learns that one rank's devices failed


def test_a_rank_that_never_joins_is_named_by_rank_0():
    assert rendezvous("127.0.0.1", free_port(), 0, 2, False, 1.0) == "rank(s) 1 did not join within 1 s"


def test_a_failed_dcgm_diagnostic_ends_the_attempt_as_hardware_naming_the_test(cli, tmp_path):
    """One rank: a device check that failed ends the gate at once (nothing to tell others,
    no torch started)."""
    tools = tools_dir(tmp_path, nvidia_smi=FAKE_NVIDIA_SMI, dcgmi=FAKE_DCGMI_FAILING)
    cli.env["PATH"] = f"{tools}{os.pathsep}{cli.env['PATH']}"
    spec = cli.cwd / "baddcgm.yaml"
    spec.write_text(TWO_RANKS.format(name="baddcgm").replace("nodes: 2", "nodes: 1"))
    r = cli("run", "-f", str(spec), "--follow")
    assert r.returncode != 0, r.stdout + r.stderr
    rec = json.loads(cli("describe", "run", "baddcgm", "-o", "json").stdout)
    assert rec["failure"]["class"] == "hardware"
    assert rec["failure"]["evidence"] == (
        "rank 0: hardware: preflight: dcgmi diag -r 1 failed: GPU 1: Page Retirement/Row Remap: "
        "GPU 1 had uncorrectable memory errors and row remapping failed."
    )
    logs = cli("logs", "baddcgm").stdout
    assert "preflight: nvidia-smi lists 1 GPU(s)" in logs and "preflight: failed after" in logs
    assert "the command ran" not in logs and "all-reduce" not in logs and "rendezvous" not in logs


@pytest.mark.parametrize(
    ("dcgmi", "said"),
    [
        (FAKE_DCGMI_PASSING, "preflight: dcgmi diag -r 1 passed in "),
        (
            FAKE_DCGMI_NO_HOST_ENGINE,
            "preflight: dcgmi diag -r 1 gave no report (exit code 255: Error: Unable to connect to host engine. "
            "Host engine connection invalid/disconnected.): not counted",
        ),
    ],
    ids=["passed", "no-host-engine"],
)
def test_a_dcgm_diagnostic_that_passes_or_cannot_run_is_no_finding(tmp_path, capfd, dcgmi, said):
    tools = tools_dir(tmp_path, dcgmi=dcgmi)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}/usr/bin:/bin", "NODE_RANK": "0"}
    assert check_devices(env, 10.0) is None
    assert said in capfd.readouterr().out
