"""`exec -- true` round trip on the Kubernetes backend, against `kubectl exec`, on the fake cluster.

A one-rank run that sleeps is submitted to the fake API server (in this process); then, each
`--repeat` times (after one warm-up):
  backend.exec     KubernetesBackend.exec(run, ["true"]) in this process: the pod lookup (a
                   labelled list) and the pods/exec WebSocket (v5) to the exit status
  exec process     the same from a fresh Python process (imports, kubeconfig, lookup, exec):
                   what `launcher exec RUN -- true` costs
  kubectl exec     `kubectl exec POD -- true`, a fresh process (discovery cached after the first)
Medians in milliseconds. The fake runs `true` as a local process, so the numbers are the
client's and the protocol's cost, not a real kubelet's.

    .venv/bin/python bench/bench_exec_kubernetes.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

EXEC_PROCESS = """
import sys
from launcher.backends.kubernetes.backend import KubernetesBackend
from launcher.config import load_config
sys.exit(KubernetesBackend(load_config().profile("fake")).exec(sys.argv[1], ["true"]))
"""


def median_ms(fn, repeat: int) -> float:
    fn()  # warm-up: connections, imports, kubectl's discovery cache
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-exec-k8s-"))
    os.environ["LAUNCHER_HOME"] = str(work / "home")
    (work / "home").mkdir()

    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.config import load_config
    from launcher.spec.models import RunSpec
    from tests.fakes.kube.cluster import FakeKube
    from tests.fakes.kube.fixtures import write_profile

    kube = FakeKube().start()
    write_profile(work / "home", kube)
    kubeconfig = kube.write_kubeconfig(work / "kubeconfig")
    backend = KubernetesBackend(load_config().profile("fake"))
    name = "bench-exec-abc123"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    devnull = subprocess.DEVNULL
    try:
        backend.submit(RunSpec.model_validate({"name": name, "command": "sleep 600"}), [])
        deadline = time.monotonic() + 60
        while not [p for p in kube.pods("default", f"launcher.dev/run={name}") if p["status"].get("phase") == "Running"]:
            if time.monotonic() > deadline:
                raise SystemExit("the run's pod did not start in 60 s")
            time.sleep(0.05)
        pod = kube.pods("default", f"launcher.dev/run={name}")[0]["metadata"]["name"]
        sys.stdin = open(os.devnull)  # exec relays stdin: give it an empty one

        def in_process():
            assert backend.exec(name, ["true"]) == 0

        def process():
            subprocess.run([sys.executable, "-c", EXEC_PROCESS, name], env=env, stdin=devnull, check=True)

        rows = [("backend.exec (in process)", median_ms(in_process, args.repeat)),
                ("exec from a fresh process", median_ms(process, max(3, args.repeat // 4)))]
        kubectl = shutil.which("kubectl")
        if kubectl:
            kenv = {"PATH": os.environ["PATH"], "HOME": str(work), "KUBECONFIG": str(kubeconfig)}
            rows.append(("kubectl exec", median_ms(lambda: subprocess.run(
                [kubectl, "exec", pod, "--", "true"], env=kenv, stdin=devnull, check=True), max(3, args.repeat // 4))))
        print(f"{'exec -- true, median':<30}{'ms':>10}")
        for label, ms in rows:
            print(f"{label:<30}{ms:>10.1f}")
    finally:
        backend.stop(name)
        backend.close()
        kube.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
