"""This process's place among the recipe's processes, from the environment torchrun sets;
the recipe's entry (main) and its data loading (data) both read it."""

from __future__ import annotations

import os


def process_ranks() -> tuple[int, int, int]:
    """(RANK, LOCAL_RANK, WORLD_SIZE): (0, 0, 1) for a process started without torchrun."""
    return (
        int(os.environ.get("RANK", "0")),
        int(os.environ.get("LOCAL_RANK", "0")),
        int(os.environ.get("WORLD_SIZE", "1")),
    )
