"""API requests and wall time to submit a Kubernetes run of 1, 8, 64 and 512 nodes.

Submits 8-GPU-per-node runs through the real kubernetes client to the fake API
server of the tests (tests/fakes/kube_api.py, controllers off: nothing runs), and
counts the requests the server saw. Both numbers must stay flat in N: a run is a
ConfigMap, a Service and one Indexed Job, whatever the number of nodes. It also
reports what one `get` costs on a just-submitted run.

    .venv/bin/python bench/bench_k8s_submit.py [--repeat 5]
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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    os.environ["LAUNCHER_HOME"] = tempfile.mkdtemp(prefix="bench-k8s-")
    home = Path(os.environ["LAUNCHER_HOME"])

    t0 = time.perf_counter()
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.config import load_config
    from launcher.spec.models import RunSpec
    from tests.fakes.kube_api import FakeKube, write_profile
    imported = time.perf_counter() - t0

    kube = FakeKube(run_controllers=False).start()
    write_profile(home, kube)
    t0 = time.perf_counter()
    backend = KubernetesBackend(load_config().profile("fake"))
    _ = backend.api  # kubeconfig + client
    connected = time.perf_counter() - t0
    print(f"import of the backend and kubernetes: {imported * 1000:.0f} ms; client from kubeconfig: {connected * 1000:.0f} ms")
    print(f"{'nodes':>6} {'requests':>9} {'by verb':<34} {'submit ms (median)':>19} {'get requests':>13} {'get ms':>7}")
    try:
        for nodes in (1, 8, 64, 512):
            times, counts = [], []
            verbs = ""
            get_reqs, get_ms = 0, 0.0
            for i in range(args.repeat + 1):
                spec = RunSpec(name=f"bench-{nodes}-{i}", image="ghcr.io/example/trainer:1", command="true",
                               compute={"gpus": 8 * nodes, "gpu_type": "h100_80gb"})
                before = len(kube.requests)
                t0 = time.perf_counter()
                backend.submit(spec, [])
                elapsed = time.perf_counter() - t0
                seen = kube.requests[before:]
                if i == 0:
                    continue  # the first call warms pydantic's model builds
                times.append(elapsed)
                counts.append(len(seen))
                verbs = ", ".join(f"{m} {k}" for m, k, _ in seen)
                before = len(kube.requests)
                t0 = time.perf_counter()
                backend.get(spec.name)
                get_ms = (time.perf_counter() - t0) * 1000
                get_reqs = len(kube.requests) - before
            assert len(set(counts)) == 1
            print(f"{nodes:>6} {counts[0]:>9} {verbs:<34} {statistics.median(times) * 1000:>19.1f} "
                  f"{get_reqs:>13} {get_ms:>7.1f}")
    finally:
        backend.close()
        kube.close()


if __name__ == "__main__":
    main()
