"""Pod start overhead in the fake cluster: from the container's start to the command's first
line, for each entrypoint mode.

- zipapp (the default): the sh shim finds the image's /usr/bin/python3 and runs the entrypoint's
  zipapp from the ConfigMap with it, isolated and without site-packages;
- inject: the init container copies the injected runtime (assembled as the runtime image holds
  it, tests/entrypoint/images.py) into the pod, then its Python runs the entrypoint; the clock
  starts with the init container;
- image: the image has the launcher (the fake runs it with this interpreter and its
  environment: pydantic and all).

Each run is one node whose command is `echo FIRST-LINE`, submitted through the real client to
the fake (in this process, so the kubelet's start time of each container can be read), with
the same pod isolation (a private mount namespace where the machine allows it) for every
mode. The first run of each mode is a warm-up and is not counted.

    .venv/bin/python bench/bench_pod_start.py [--repeat 5]
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

IMAGE = "registry.example/system-python:1"
HOST_IMAGE = "ghcr.io/example/launcher:test"  # unmapped: runs with this interpreter
FIRST_LINE = "FIRST-LINE"


def image_dir(root: Path) -> Path:
    """An image whose only Python is the system's, and bash."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python3").symlink_to("/usr/bin/python3")
    (root / "bin" / "bash").symlink_to("/bin/bash")
    return root


def overhead_ms(kube, backend, name: str, image: str) -> float:
    from launcher.spec.models import RunSpec
    from tests.conftest import wait_until

    spec = RunSpec(name=name, image=image, command=f"echo {FIRST_LINE}", compute={"gpu_type": "none"})
    backend.submit(spec, [])

    def finished():
        with kube.lock:
            pods = [p for (kind, _, _), p in kube.objects.items()
                    if kind == "Pod" and p["metadata"].get("labels", {}).get("launcher.dev/run") == name]
            if pods and pods[0]["status"].get("phase") in ("Succeeded", "Failed"):
                return pods[0]
        return None

    pod = wait_until(finished, 120, interval=0.05, message=f"run {name} to finish")
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    rt = kube.kubelet.runtimes[pod["metadata"]["uid"]]
    first = rt.containers[pod["spec"]["containers"][0]["name"]]
    line_ns = next(ns for ns, text in first.lines if text == FIRST_LINE)
    started = min(c.started_ns for c in rt.containers.values())  # the init container's, where there is one
    backend.delete(name)
    return (line_ns - started) / 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-pod-start-"))
    os.environ["LAUNCHER_HOME"] = str(home)
    from launcher.backends.kubernetes.backend import KubernetesBackend
    from launcher.config import load_config
    from launcher.pod import zipapp
    from tests.entrypoint.images import RUNTIME_IMAGE_GLOB, build_runtime
    from tests.fakes.kube.cluster import FakeKube
    from tests.fakes.kube.fixtures import write_profile

    runtime = build_runtime(home / "runtime")
    kube = FakeKube(nodes=[{"name": "fake-node-0", "gpus": 0, "labels": {"kubernetes.io/hostname": "fake-node-0"}}],
                    jobset=True, images={IMAGE: str(image_dir(home / "image")), RUNTIME_IMAGE_GLOB: str(runtime.out)})
    kube.start()
    print(f"zipapp: {len(zipapp.build())} bytes; pods isolated: {kube.kubelet.isolation_skip_reason or 'yes'}")
    print(f"{'mode':<8} {'image':<36} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    try:
        for mode, image in (("zipapp", IMAGE), ("inject", IMAGE), ("image", HOST_IMAGE)):
            write_profile(home, kube, entrypoint_mode=mode)
            backend = KubernetesBackend(load_config().profile("fake"))
            try:
                times = [overhead_ms(kube, backend, f"start-{mode}-{i}", image) for i in range(args.repeat + 1)][1:]
            finally:
                backend.close()
            print(f"{mode:<8} {image:<36} {statistics.median(times):>10.1f} {min(times):>8.1f} {max(times):>8.1f}")
            time.sleep(0.2)
    finally:
        kube.close()


if __name__ == "__main__":
    main()
