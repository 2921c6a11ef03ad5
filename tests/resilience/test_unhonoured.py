"""What a backend cannot do of the resilience section is a named warning (validate, the
dry-run and run show them), never dropped in silence."""

from __future__ import annotations

from launcher.backends.kubernetes.render import plan_run
from tests.kubernetes.specs import PROFILE, spec


def test_the_local_backend_says_it_has_one_node_to_retry_on(cli):
    path = cli.spec("gated", "name: gated\ncommand: 'true'\nresilience: {hang_timeout: 5m}\n")
    r = cli("run", "-f", str(path), "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (
        "resilience.exclude_faulty_nodes: the local backend has one node (this machine): "
        "a retry after a hardware failure runs on it again, and a straggler is named but never "
        "treated as a fault of its node (resilience.straggler_grace)"
    ) in r.stderr
    plain = cli.spec("plain", "name: plain\ncommand: 'true'\n")
    assert "resilience" not in cli("run", "-f", str(plain), "--dry-run").stderr  # nothing asked, nothing said


def test_kubernetes_names_what_its_jobset_cannot_do():
    warnings = plan_run(
        spec("res-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}, resilience={"hang_timeout": "10m"}),
        PROFILE,
        [],
    ).warnings
    assert any(w.startswith("resilience.exclude_faulty_nodes: a restart by the JobSet controller") for w in warnings)
    assert not any(w.startswith("resilience.hang_timeout") for w in warnings)  # a system failure there too
    # One node: no straggler to pin, and none of this is said.
    assert not any("straggler" in w for w in warnings)
    retried = plan_run(
        spec(
            "lag-abc123",
            compute={"nodes": 2, "gpus": 16, "gpu_type": "h100_80gb"},
            scheduling={"max_retries": 1},
            resilience={},
        ),
        PROFILE,
        [],
    ).warnings
    # A straggler past its grace ends its own pod, whose node its events still give after a
    # JobSet restart has deleted it: `run -r` keeps off it, and nothing needs saying.
    assert not any("straggler" in w for w in retried), retried
    plain = plan_run(spec("plain-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}), PROFILE, []).warnings
    assert not [w for w in plain if w.startswith("resilience.")]
