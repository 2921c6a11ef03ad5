"""A code snapshot of this repository itself (`launcher run --code .`): the time to pick and
pack its files (launcher.sdk.code_selection.build: git ls-files, the credential and size
checks, the deterministic .tar.gz), the time to unpack it (launcher.pod.snapshot.unpack, as a
rank does), and its size, against `git archive HEAD | gzip` (committed files only) and its
extraction with tar.

    .venv/bin/python bench/bench_code_snapshot.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from launcher.sdk.code_selection import build
from launcher.pod.snapshot import unpack
from launcher.spec.models import Code

ROOT = Path(__file__).resolve().parent.parent


def timed(fn, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs

    pack_s, snap = timed(lambda: build(Code(path=str(ROOT))), runs)

    def unpack_once() -> float:
        with tempfile.TemporaryDirectory() as d:
            unpack(snap.data, Path(d), snap.digest)

    unpack_s, _ = timed(unpack_once, runs)

    def git_archive() -> bytes:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True, check=True)
        return subprocess.run(["gzip", "-6"], input=archive.stdout, capture_output=True, check=True).stdout

    git_s, git_data = timed(git_archive, runs)

    def git_extract() -> None:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(["tar", "-xzf", "-", "-C", d], input=git_data, check=True)

    git_x, _ = timed(git_extract, runs)
    again = build(Code(path=str(ROOT)))
    print(f"repository {ROOT} (median of {runs} runs)")
    print(f"  launcher snapshot: {snap.files} files, {snap.unpacked / 1e6:.2f} MB -> {snap.size / 1e6:.2f} MB packed; "
          f"pack {pack_s * 1000:.0f} ms, unpack {unpack_s * 1000:.0f} ms; same digest packed again: "
          f"{again.digest == snap.digest}")
    print(f"  git archive HEAD | gzip: {len(git_data) / 1e6:.2f} MB; pack {git_s * 1000:.0f} ms, "
          f"tar -xz {git_x * 1000:.0f} ms")


if __name__ == "__main__":
    main()
