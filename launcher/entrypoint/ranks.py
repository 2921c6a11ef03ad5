"""The rank environment that composer's launcher and torchrun both read.

composer (composer/cli/launcher.py) reads LOCAL_WORLD_SIZE (processes on this
node), WORLD_SIZE (all processes; multi-node only when larger than
LOCAL_WORLD_SIZE), NODE_RANK, MASTER_ADDR and MASTER_PORT. torchrun takes the
default of each flag from PET_<FLAG>: PET_NNODES, PET_NPROC_PER_NODE,
PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT (its static rendezvous then
meets at MASTER_ADDR:MASTER_PORT). One process per GPU, or one per node on CPU.
"""

from __future__ import annotations

from typing import overload

from launcher.pod import contract


@overload
def _int(env: dict[str, str], name: str) -> int | None: ...
@overload
def _int(env: dict[str, str], name: str, default: int) -> int: ...
def _int(env: dict[str, str], name: str, default: int | None = None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def rank_env(spec, env: dict[str, str]) -> dict[str, str]:
    """Raises ValueError when what the backend gave is inconsistent."""
    nodes = _int(env, contract.NODES) or spec.nodes
    node_rank = _int(env, "NODE_RANK")
    if node_rank is None:
        node_rank = _int(env, "JOB_COMPLETION_INDEX", 0)
    if nodes < 1 or not 0 <= node_rank < nodes:
        raise ValueError(f"node rank {node_rank} is not within the run's {nodes} node(s)")
    # The backend knows the GPUs a node really has (the local backend may have none
    # whatever the spec asks), so only it says; 0 means CPU.
    gpus = _int(env, contract.GPUS_PER_NODE, 0)
    if gpus < 0:
        raise ValueError(f"{contract.GPUS_PER_NODE} must not be negative, got {gpus}")
    # On CPU the composer launcher runs one process per node.
    local_world = gpus if gpus > 0 else 1
    master_addr = env.get("MASTER_ADDR") or ""
    if not master_addr:
        if nodes > 1:
            raise ValueError("MASTER_ADDR is not set; a multi-node run needs rank 0's address")
        master_addr = "127.0.0.1"
    master_port = _int(env, "MASTER_PORT", 29500)
    if not 0 < master_port < 65536:
        raise ValueError(f"MASTER_PORT must be a TCP port, got {master_port}")
    out: dict[str, str] = {}
    if env.get(contract.RESTART_ATTEMPT) not in (None, ""):  # the JobSet's first attempt plus its restarts
        out[contract.ATTEMPT] = str(contract.attempt_number(env))
    return {
        **out,
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
