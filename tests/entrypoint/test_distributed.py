"""Plain `torchrun script.py` and `composer script.py` across two node ranks, each
started by its own entrypoint as a backend would: the rank environment alone
makes them meet (gloo on CPU)."""

from __future__ import annotations

import pytest

from tests.entrypoint.conftest import free_port

pytestmark = [pytest.mark.train, pytest.mark.slow]

SCRIPT = """
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} on node {os.environ['NODE_RANK']}: sum {t.item():g}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.parametrize("launcher", ["torchrun", "composer"])
def test_two_nodes_meet_with_no_launcher_flags(entry, launcher):
    pytest.importorskip("torch")
    if launcher == "composer":
        pytest.importorskip("composer")
    (entry.workdir / "script.py").write_text(SCRIPT)
    port = free_port()
    spec = {"command": f"{launcher} script.py"}
    procs = [
        entry.start(
            spec, rank=rank, nodes=2, port=port, extra={"LAUNCHER_RENDEZVOUS_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}
        )
        for rank in (0, 1)
    ]
    out0 = procs[0].communicate(timeout=120)[0]
    if procs[0].returncode:
        entry.kill_all()  # as a backend would: rank 1 has no one to meet
    outs = [out0, procs[1].communicate(timeout=120)[0]]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "rank 0 of 2 on node 0: sum 3" in outs[0]
    # composer prints only local rank 0's output of each node; so does this check.
    assert "rank 1 of 2 on node 1: sum 3" in outs[1]
