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
        "a retry after a hardware failure runs on it again"
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
    assert any(w.startswith("resilience.straggler_factor: a straggler is named in describe once") for w in warnings)
    plain = plan_run(spec("plain-abc123", compute={"gpus": 8, "gpu_type": "h100_80gb"}), PROFILE, []).warnings
    assert not [w for w in plain if w.startswith("resilience.")]
