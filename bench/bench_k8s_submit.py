"""API requests and wall time to submit a Kubernetes run of 1, 8, 64 and 512 nodes.

Submits 8-GPU-per-node runs through the real kubernetes client to the fake cluster run
as a program (`python tests/fakes/kube_api.py`), and counts the requests the server
saw. The count must stay flat in N: a run is a ConfigMap and a JobSet, whatever the
number of nodes, plus one discovery request. Each run is deleted after it is measured.

    .venv/bin/python bench/bench_k8s_submit.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NODES = (1, 8, 64, 512)


def bench_form(form: str, repeat: int) -> None:
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.config import load_config
    from launcher.spec.models import RunSpec
    from tests.fakes.kube.fixtures import KubeProgram, write_profile

    home = Path(os.environ["LAUNCHER_HOME"])
    work = Path(tempfile.mkdtemp(prefix=f"bench-k8s-{form.lower()}-"))
    kube = KubeProgram(work, "--nodes", "1")
    write_profile(home, kube)
    backend = KubernetesBackend(load_config().profile("fake"))
    try:
        for nodes in NODES:
            times, counts, verbs = [], [], ""
            for i in range(repeat + 1):
                spec = RunSpec(name=f"bench-{nodes}-{i}", image="ghcr.io/example/trainer:1", command="true",
                               compute={"gpus": 8 * nodes, "gpu_type": "h100_80gb"})
                before = len(kube.requests)
                t0 = time.perf_counter()
                run = backend.submit(spec, [])
                elapsed = time.perf_counter() - t0
                seen = kube.requests[before:]
                backend.delete(spec.name)
                assert not run.warnings, run.warnings
                if i == 0:
                    continue  # the first call warms pydantic's model builds and the connection
                times.append(elapsed)
                counts.append(len(seen))
                verbs = ", ".join(f"{m} {k or v}" for m, k, v in seen)
            assert len(set(counts)) == 1, counts
            print(f"{form:>7} {nodes:>6} {counts[0]:>9}  {verbs:<44} {statistics.median(times) * 1000:>10.1f}")
    finally:
        backend.close()
        kube.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    os.environ["LAUNCHER_HOME"] = tempfile.mkdtemp(prefix="bench-k8s-")
    print(f"{'form':>7} {'nodes':>6} {'requests':>9}  {'by verb':<44} {'submit ms':>10}")
    bench_form("JobSet", args.repeat)


if __name__ == "__main__":
    main()
