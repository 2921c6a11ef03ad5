"""The seed's YAML (runspecs/hf-finetune-volume.yaml, which tests/databricks/test_seed_flow.py
runs on the fake workspace) is the same file on every backend: `validate` and `run --dry-run`
take it unchanged for the Databricks profile, the local backend and the fake Kubernetes
cluster."""

from __future__ import annotations

import pytest

from tests.train.conftest import REPO

SPEC = REPO / "runspecs" / "hf-finetune-volume.yaml"


@pytest.mark.parametrize("cluster", ["dbx", "local", "fake"])
def test_the_seed_yaml_validates_and_plans_unchanged_on_every_backend(fake_kube, cli, workspace, cluster):
    before = SPEC.read_text()
    r = cli("secret", "create", "databricks", "--host", workspace.host, input=workspace.token)
    assert r.returncode == 0, r.stderr
    for verb in (("validate",), ("run", "--dry-run")):
        r = cli(*verb, "-f", str(SPEC), "--cluster", cluster)
        assert r.returncode == 0, (verb, r.stdout, r.stderr)
        assert "✗" not in r.stderr and workspace.token not in r.stdout + r.stderr
        if cluster == "dbx" and verb[0] == "run":
            assert "driver: 2 process(es) under TorchDistributor" in r.stdout + r.stderr
    assert SPEC.read_text() == before
