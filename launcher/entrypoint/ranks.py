"""The rank environment that composer's launcher and torchrun both read."""

from __future__ import annotations

from launcher.entrypoint import contract


def rank_env(spec, env: dict[str, str]) -> dict[str, str]:
    nodes = int(env.get(contract.NODES) or spec.nodes)
    node_rank = int(env.get("NODE_RANK") or env.get("JOB_COMPLETION_INDEX") or 0)
    gpus_per_node = int(env.get(contract.GPUS_PER_NODE) or 0)
    # On CPU the composer launcher runs one process per node.
    local_world = gpus_per_node if gpus_per_node > 0 else 1
    master_addr = env.get("MASTER_ADDR") or "127.0.0.1"
    master_port = env.get("MASTER_PORT") or "29500"
    out = {
        "NODE_RANK": str(node_rank),
        "WORLD_SIZE": str(nodes * local_world),
        "LOCAL_WORLD_SIZE": str(local_world),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "PET_NNODES": str(nodes),
        "PET_NPROC_PER_NODE": str(local_world),
        "PET_NODE_RANK": str(node_rank),
        "PET_MASTER_ADDR": master_addr,
        "PET_MASTER_PORT": str(master_port),
    }
    return out
