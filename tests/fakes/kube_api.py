"""The fake Kubernetes cluster: a compatibility front for tests/fakes/kube/ (read its
package docstring), the pytest plugin that registers its fixtures, and the program:

    python tests/fakes/kube_api.py --kubeconfig PATH [--nodes N --gpus-per-node G] [--no-jobset]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, sys.path[0] is tests/fakes, whose http.py would shadow the stdlib's.
    sys.path[0] = str(Path(__file__).resolve().parents[2])
    from tests.fakes.kube.program import main

    sys.exit(main())

from tests.fakes.kube.cluster import FakeKube
from tests.fakes.kube.faults import FaultRule, Faults, unreachable_server
from tests.fakes.kube.fixtures import (
    KubeProgram,
    fake_kube,
    fake_kube_factory,
    fake_kube_program,
    fake_kueue,
    write_profile,
)
from tests.fakes.kube.jobs import COMPLETION_INDEX, CONTROLLER_UID
from tests.fakes.kube.scheduler import GPU

__all__ = [
    "COMPLETION_INDEX",
    "CONTROLLER_UID",
    "GPU",
    "FakeKube",
    "FaultRule",
    "Faults",
    "KubeProgram",
    "fake_kube",
    "fake_kube_factory",
    "fake_kube_program",
    "fake_kueue",
    "unreachable_server",
    "write_profile",
]
