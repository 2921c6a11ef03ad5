"""Two processes under TorchDistributor, through the fake workspace: the driver starts local
pyspark (java is here), TorchDistributor runs one barrier task per node, each runs torchrun
with --nproc_per_node=1 and our entrypoint, and the command's gloo all-reduce really meets."""

from __future__ import annotations

import re

import pytest

from tests.conftest import needs

needs("torch")
needs("pyspark")

pytestmark = [pytest.mark.train, pytest.mark.slow]

COMMAND = (
    "python -c \"import os, torch, torch.distributed as d; d.init_process_group('gloo'); "
    "t = torch.tensor([float(d.get_rank() + 1)]); d.all_reduce(t); "
    "print('sum', t.item(), 'rank', d.get_rank(), 'of', d.get_world_size(), 'local', os.environ['LOCAL_RANK'])\""
)


def test_two_nodes_all_reduce_under_torch_distributor(cli):
    spec = cli.spec("allreduce", f"name: allreduce\ncompute: {{cluster: dbx, nodes: 2}}\ncommand: |\n  {COMMAND}\n")
    r = cli("run", "-f", str(spec), "--follow", timeout=400)
    assert r.returncode == 0, (r.stdout, r.stderr)
    # Every process is a node of its own with LOCAL_RANK 0, as TorchDistributor makes them.
    for rank in (0, 1):
        assert re.search(rf"^\[rank {rank}\] sum 3\.0 rank {rank} of 2 local 0$", r.stdout, re.M), r.stdout
    name = re.search(r"Run (\S+) (?:started|completed)", r.stderr + r.stdout).group(1)
    logs = cli("logs", name, "--rank", "1")
    assert logs.returncode == 0, logs.stderr
    assert "sum 3.0 rank 1 of 2 local 0" in logs.stdout
    assert "sum 3.0 rank 0 of 2" not in logs.stdout
