"""Every field of mosaicml-cli 0.8.3's run config loads (models/run_config.py RunConfig,
utils/utils_config.py SchedulingConfig and ComputeConfig), platform-only fields with one
note, and mcli's integration types with the variables mcli sets."""

from __future__ import annotations

import pytest

from launcher.errors import SpecError
from launcher.spec.load import load_spec_text

BASE = "name: x\nimage: mosaicml/pytorch\ncommand: echo hi\n"

# Read from the 0.8.3 wheel: the RunConfig dataclass and the two TypedDicts.
RUN_CONFIG = {
    "name": "x",
    "parent_name": "p",
    "image": "mosaicml/pytorch",
    "gpu_type": "a100_80gb",
    "gpu_num": 8,
    "cpus": 4,
    "cluster": "r1z1",
    "scheduling": {},
    "compute": {},
    "parameters": {"a": 1},
    "integrations": [],
    "env_variables": {"A": "1"},
    "metadata": {"m": 1},
    "command": "echo hi",
    "dependent_deployment": {"name": "d"},
}
SCHEDULING = {
    "priority": "low",
    "resumable": True,
    "preemptible": True,
    "retryOnSystemFailure": True,
    "max_retries": 2,
    "retry_on_system_failure": True,
    "max_duration": 1.5,
    "watchdogEnabled": False,
}
COMPUTE = {
    "cluster": "r1z1",
    "instance": "oci.bm.gpu.b4.8",
    "nodes": 1,
    "node_names": ["n1"],
    "gpu_type": "a100_80gb",
    "gpus": 8,
    "cpus": 4,
}


# Where each field lands in the loaded spec: mcli's top-level gpu_num, gpu_type, cluster and
# cpus move into compute; camel-case scheduling names become the snake-case ones.
RUN_CONFIG_LANDS = {
    "name": "name",
    "parent_name": "parent_name",
    "image": "image",
    "gpu_type": "compute.gpu_type",
    "gpu_num": "compute.gpus",
    "cpus": "compute.cpus",
    "cluster": "compute.cluster",
    "parameters": "parameters",
    "integrations": "integrations",
    "env_variables": "env_variables",
    "metadata": "metadata",
    "command": "command",
    "dependent_deployment": "dependent_deployment",
}
SCHEDULING_LANDS = {"retryOnSystemFailure": "retry_on_system_failure", "watchdogEnabled": "watchdog_enabled"}


def _load(text: str):
    return load_spec_text(text, "run.yaml")


def _at(spec, dotted: str):
    value = spec
    for attr in dotted.split("."):
        value = getattr(value, attr)
    return value


@pytest.mark.parametrize("field", sorted(RUN_CONFIG))
def test_each_top_level_field_of_083_loads_where_it_belongs(field):
    import yaml

    doc = yaml.safe_load(BASE)
    doc[field] = RUN_CONFIG[field]
    spec = _load(yaml.safe_dump(doc)).spec
    if field in ("scheduling", "compute"):  # empty sections: every field keeps its default
        assert _at(spec, field) == type(_at(spec, field))()
    else:
        assert _at(spec, RUN_CONFIG_LANDS[field]) == RUN_CONFIG[field]


@pytest.mark.parametrize("section, fields", [("scheduling", SCHEDULING), ("compute", COMPUTE)])
def test_each_scheduling_and_compute_field_of_083_loads_where_it_belongs(section, fields):
    import yaml

    for key, value in fields.items():
        doc = yaml.safe_load(BASE)
        doc[section] = {key: value}
        spec = _load(yaml.safe_dump(doc)).spec
        assert _at(spec, f"{section}.{SCHEDULING_LANDS.get(key, key)}") == value, key


def test_camel_case_retry_maps_and_resumable_no_longer_suggests_preemptible():
    loaded = _load(BASE + "scheduling:\n  retryOnSystemFailure: true\n  resumable: true\n")
    assert loaded.spec.scheduling.retry_on_system_failure is True
    assert any("scheduling.resumable" in w and "ignored here" in w for w in loaded.warnings)


def test_platform_only_fields_get_one_note_at_the_first():
    loaded = _load(BASE + "optimization_level: 1\nplatform: r1z1\ndependent_deployment: {name: d}\n")
    notes = [w for w in loaded.warnings if "ignored here" in w]
    assert notes == [
        "run.yaml:4: optimization_level, platform, dependent_deployment: only the MosaicML platform "
        "acts on these fields; accepted and ignored here"
    ]


def test_mlflow_and_comet_become_environment_variables():
    spec = _load(
        BASE + "integrations:\n"
        "  - {integration_type: mlflow, experiment_name: /Users/me/exp, model_registry_uri: databricks-uc}\n"
        "  - {integration_type: comet_ml, project_name: p}\n"
    ).spec
    env = spec.env_for_run("x-abc123")
    assert env["MLFLOW_EXPERIMENT_NAME"] == "/Users/me/exp" and env["MLFLOW_TRACKING_URI"] == "databricks"
    assert env["MLFLOW_REGISTRY_URI"] == "databricks-uc"
    assert env["COMET_PROJECT_NAME"] == "p" and "COMET_WORKSPACE" not in env


def test_a_misspelled_integration_field_still_fails_with_its_line():
    with pytest.raises(SpecError) as e:
        _load(BASE + "integrations:\n  - integration_type: mlflow\n    experiment: /Users/me/exp\n")
    text = str(e.value)
    assert "run.yaml:6" in text and "integrations.0.experiment" in text
