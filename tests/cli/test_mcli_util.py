"""mcli's `util`, `config` and the run YAML's JSON Schema (`launcher schema`), as a user
runs them (issue 22, part N). `util` is checked against the fake cluster, with a node
half used, and on this machine, which has no GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.mcli.yamls import TABLE, render

REPO = Path(__file__).resolve().parents[2]
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def node(name: str, gpus: int, labels: dict[str, str]) -> dict:
    return {"name": name, "gpus": gpus, "labels": {"kubernetes.io/hostname": name, **labels}}


def pod(name: str, *, node: str | None, phase: str, gpus: list[int], limits_only: bool = False) -> dict:
    """A pod bound to `node` (None: not scheduled), one container per entry of `gpus`."""

    def resources(n: int) -> dict:
        return (
            {"limits": {"nvidia.com/gpu": str(n)}}
            if limits_only
            else {"requests": {"nvidia.com/gpu": str(n)}, "limits": {"nvidia.com/gpu": str(n)}}
        )

    spec: dict = {
        "containers": [{"name": f"c{i}", "image": "busybox", "resources": resources(n)} for i, n in enumerate(gpus)]
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}}


@pytest.fixture
def half_used(fake_kube_factory):
    """An H100 node with 4 of its 8 GPUs requested, a full A100 node in another namespace,
    and a CPU node. The pods that hold nothing: one that ended, one not yet scheduled."""
    kube = fake_kube_factory(
        nodes=[node("h100-0", 8, H100), node("a100-0", 8, A100), node("cpu-0", 0, {})], run_controllers=False
    )
    kube.store.ensure_namespace("team-b")
    for ns, body in [
        ("default", pod("trainer", node="h100-0", phase="Running", gpus=[3, 1])),
        ("default", pod("finished", node="h100-0", phase="Succeeded", gpus=[4])),
        ("default", pod("waiting", node=None, phase="Pending", gpus=[8])),
        ("team-b", pod("other-team", node="a100-0", phase="Running", gpus=[8], limits_only=True)),
    ]:
        kube.store.create("Pod", ns, body)
    return kube


def test_util_counts_the_fake_clusters_gpus_by_type_with_a_half_used_node(cli, half_used):
    r = cli("util", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [
        {"cluster": "local", "backend": "local", "gpu_type": "none", "nodes": 1, "gpus": 0, "used": 0, "free": 0},
        {
            "cluster": "fake",
            "backend": "kubernetes",
            "gpu_type": "a100_80gb",
            "nodes": 1,
            "gpus": 8,
            "used": 8,
            "free": 0,
        },
        {
            "cluster": "fake",
            "backend": "kubernetes",
            "gpu_type": "h100_80gb",
            "nodes": 1,
            "gpus": 8,
            "used": 4,
            "free": 4,
        },
        {"cluster": "fake", "backend": "kubernetes", "gpu_type": "none", "nodes": 1, "gpus": 0, "used": 0, "free": 0},
    ]
    table = cli("util", "--cluster", "fake")
    assert table.returncode == 0, table.stderr
    assert re.search(r"^fake\s+h100_80gb\s+1\s+8\s+4\s+4$", table.stdout, re.M), table.stdout
    assert re.search(r"^CLUSTER\s+GPU TYPE\s+NODES\s+GPUS\s+USED\s+FREE$", table.stdout, re.M)
    assert "local" not in table.stdout
    assert cli("util", "fake").stdout == table.stdout  # mcli names the cluster without a flag
    unknown = cli("util", "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr and "Traceback" not in unknown.stderr


def test_util_counts_a_runs_pods_once_the_scheduler_binds_them(cli, fake_kube_factory):
    from tests.conftest import wait_until
    from tests.kubernetes.conftest import make_backend
    from tests.kubernetes.test_backend import run_spec

    fake_kube_factory(nodes=[node("h100-0", 8, H100)])
    backend = make_backend()
    try:
        backend.submit(run_spec("holder-abc123", "sleep 30", compute={"gpus": 4, "gpu_type": "h100_80gb"}), [])

        def h100() -> dict:
            r = cli("util", "--cluster", "fake", "-o", "json")
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)[0]

        wait_until(lambda: h100()["used"] == 4, 30, interval=0.2, message=lambda: f"4 GPUs used: {h100()}")
        assert h100() == {
            "cluster": "fake",
            "backend": "kubernetes",
            "gpu_type": "h100_80gb",
            "nodes": 1,
            "gpus": 8,
            "used": 4,
            "free": 4,
        }
        backend.stop("holder-abc123")
        wait_until(lambda: h100()["used"] == 0, 30, interval=0.2, message=lambda: f"no GPU used: {h100()}")
    finally:
        backend.close()


def test_util_names_gpu_types_by_the_profiles_own_entries_first_then_its_label_scheme(cli, fake_kube_factory):
    kube = fake_kube_factory(
        nodes=[
            node("l4-0", 4, {"cloud.google.com/gke-accelerator": "nvidia-l4"}),
            node("big-0", 8, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "pool": "big"}),
            node("bare-0", 2, {}),
        ],
        run_controllers=False,
        profile={
            "gpu_labels": "gke",
            "gpu_types": {"big_h100": {"node_selector": {"pool": "big"}, "gpus_per_node": 8}},
        },
    )
    kube.store.create("Pod", "default", pod("on-l4", node="l4-0", phase="Running", gpus=[1]))
    r = cli("util", "--cluster", "fake", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [(u["gpu_type"], u["gpus"], u["used"]) for u in json.loads(r.stdout)] == [
        ("big_h100", 8, 0),
        ("l4", 4, 1),
        ("unlabelled", 2, 0),
    ]


def test_util_with_the_cluster_away_warns_and_still_shows_this_machine(cli, half_used):
    half_used.close()
    r = cli("util")
    assert r.returncode == 0, r.stderr
    assert "cluster fake" in r.stderr and "Traceback" not in r.stderr
    assert re.search(r"^local\s+none \(CPU only\)\s+1\s+0\s+0\s+0$", r.stdout, re.M), r.stdout
    alone = cli("util", "--cluster", "fake")
    assert alone.returncode == 1 and "cluster fake" in alone.stderr and "Traceback" not in alone.stderr


def test_util_on_this_machine_without_a_gpu_says_cpu_only(cli):
    cli.env["CUDA_VISIBLE_DEVICES"] = ""  # as on a machine without GPUs, whatever this one has
    r = cli("util")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^local\s+none \(CPU only\)\s+1\s+0\s+0\s+0$", r.stdout, re.M), r.stdout


def test_util_on_a_machine_with_gpus_counts_what_its_unfinished_runs_ask_for(cli, tmp_path):
    """nvidia-smi, as a stand-in on PATH that answers as on a two-GPU machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        "case \"$*\" in *--query-gpu=name*) printf 'NVIDIA H100 80GB HBM3\\nNVIDIA H100 80GB HBM3\\n';; esac\n"
    )
    smi.chmod(0o755)
    cli.env["PATH"] = f"{bin_dir}:{cli.env['PATH']}"
    cli.env.pop("CUDA_VISIBLE_DEVICES", None)
    spec = cli.spec("holds-a-gpu", "name: holds-a-gpu\ncompute: {gpus: 1}\ncommand: sleep 60\n")
    assert cli("run", "-f", str(spec)).returncode == 0
    cli.wait_status(None, {"RUNNING"})
    r = cli("util", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [
        {
            "cluster": "local",
            "backend": "local",
            "gpu_type": "NVIDIA H100 80GB HBM3",
            "nodes": 1,
            "gpus": 2,
            "used": 1,
            "free": 1,
        }
    ]
    assert cli("stop", "holds-a-gpu", "-y").returncode == 0
    after = json.loads(cli("util", "-o", "json").stdout)
    assert (after[0]["used"], after[0]["free"]) == (0, 2)


def test_config_shows_the_profile_the_home_and_versions(cli, fake_kube):
    r = cli("config")
    assert r.returncode == 0, r.stderr
    assert "Profile:   local (local backend)" in r.stdout
    assert "Profiles:  local, fake" in r.stdout
    assert f"Home:      {cli.home} (from LAUNCHER_HOME)" in r.stdout
    assert re.search(rf"^  launcher\s+{re.escape(version('launcher'))}$", r.stdout, re.M)
    assert re.search(rf"^  python\s+{sys.version_info.major}\.{sys.version_info.minor}\.", r.stdout, re.M)
    assert re.search(rf"^  pydantic\s+{re.escape(version('pydantic'))}$", r.stdout, re.M)
    record = json.loads(cli("config", "-o", "json").stdout)
    assert record["current"] == {"name": "local", "backend": "local"}
    assert record["config"] == str(cli.home / "config.yaml")

    assert cli("cluster", "use", "fake").returncode == 0
    assert json.loads(cli("config", "-o", "json").stdout)["current"] == {"name": "fake", "backend": "kubernetes"}


def test_config_reads_versions_without_importing_the_libraries(cli):
    """torch takes seconds to import: `config` reads the installed metadata instead."""
    probe = (
        "import sys; from launcher.cli.main import main; sys.argv = ['launcher', 'config']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('imported:', sorted(m for m in ('torch', 'kubernetes', 'databricks', 'transformers') "
        "if m in sys.modules))"
    )
    r = subprocess.run(
        [sys.executable, "-c", probe], env=cli.env, cwd=cli.cwd, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert re.search(r"^  torch\s", r.stdout, re.M) and "imported: []" in r.stdout, r.stdout


def schema_validator(cli) -> jsonschema.Draft202012Validator:
    r = cli("schema")
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_accepts_every_runspec_and_mcli_yaml(cli):
    validator = schema_validator(cli)
    documents = {str(p.relative_to(REPO)): p.read_text() for p in sorted((REPO / "runspecs").glob("*.yaml"))}
    documents.update(
        {
            f"tests/mcli {key}": render(template, "http://127.0.0.1:9/org/repo.git")
            for key, (template, *_) in TABLE.items()
        }
    )
    assert len(documents) >= 10
    for where, text in documents.items():
        errors = [
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(yaml.safe_load(text))
        ]
        assert errors == [], where  # each also validates and dry-runs: tests/mcli/test_yamls.py


@pytest.mark.parametrize(
    "document, field",
    [
        ({"name": "x", "command": "y", "compute": {"gpuz": 8}}, "compute"),
        ({"command": "y"}, ""),  # neither name nor run_name
        ({"name": "x", "command": "y", "scheduling": {"max_retries": -1}}, "scheduling.max_retries"),
        ({"name": "x", "command": "y", "integrations": [{"integration_type": "git_repo"}]}, "integrations.0"),
        ({"name": "x", "command": "y", "compute": {"memory": "lots"}}, "compute.memory"),
    ],
)
def test_schema_flags_what_validate_refuses(cli, document, field):
    validator = schema_validator(cli)
    errors = list(validator.iter_errors(document))
    assert errors, document
    assert any(".".join(map(str, e.absolute_path)).startswith(field) for e in errors)
    assert cli("validate", "-f", str(cli.spec("bad", yaml.safe_dump(document)))).returncode == 2


def test_schema_knows_mcli_spellings_and_each_fields_aliases(cli):
    validator = schema_validator(cli)
    legacy = {
        "run_name": "old",
        "gpu_num": 0,
        "cluster": "local",
        "command": "true",
        "env_variables": [{"key": "A", "value": 1}],
        "scheduling": {"retryOnSystemFailure": True, "watchdogEnabled": False, "watchdog_enabled": False},
    }
    assert list(validator.iter_errors(legacy)) == []
    top = validator.schema["properties"]
    assert top["run_name"]["deprecated"] is True and top["gpu_num"]["deprecated"] is True
