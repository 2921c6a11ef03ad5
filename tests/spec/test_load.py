"""Loading run YAMLs: every mcli field, overrides, names, and precise errors."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from launcher.errors import SpecError
from launcher.spec.load import Overrides, load_spec, load_spec_text
from launcher.spec.models import GitRepoIntegration, PipPackagesIntegration, WandbIntegration
from launcher.spec.names import MAX_RUN_NAME, sanitize, unique_run_name

MCLI_FULL = textwrap.dedent(
    """\
    run_name: llm-pretrain
    image: mosaicml/llm-foundry:2.7.0_cu128-latest
    gpu_num: 16
    gpu_type: a100_80gb
    cluster: r1z1
    integrations:
      - integration_type: git_repo
        git_repo: mosaicml/llm-foundry
        git_branch: main
        pip_install: -e .[gpu]
        ssh_clone: false
      - integration_type: pip_packages
        packages: [wandb, "datasets>=2"]
        upgrade: true
      - integration_type: apt_packages
        packages: [htop]
      - integration_type: wandb
        project: pretrain
        entity: team
    env_variables:
      - key: NCCL_DEBUG
        value: INFO
    command: |
      cd llm-foundry/scripts
      composer train/train.py /mnt/config/parameters.yaml
    parameters:
      max_seq_len: 2048
      _private: dropped
    scheduling:
      priority: low
      max_retries: 2
      retry_on_system_failure: true
      preemptible: true
      max_duration: 12.5
    metadata:
      team: research
    """
)


def load(text: str, overrides: Overrides | None = None):
    return load_spec_text(textwrap.dedent(text), "spec.yaml", overrides)


def errors_of(text: str | bytes, overrides: Overrides | None = None) -> list[str]:
    with pytest.raises(SpecError) as e:
        load_spec_text(textwrap.dedent(text) if isinstance(text, str) else text, "spec.yaml", overrides)
    return [i.render() for i in e.value.issues]


def test_an_mcli_yaml_loads_unchanged_with_deprecation_notes():
    loaded = load(MCLI_FULL)
    s = loaded.spec
    assert s.name == "llm-pretrain"
    assert s.compute.gpus == 16 and s.compute.gpu_type == "a100_80gb" and s.compute.cluster == "r1z1"
    assert isinstance(s.integrations[0], GitRepoIntegration) and s.integrations[0].pip_install == "-e .[gpu]"
    assert isinstance(s.integrations[1], PipPackagesIntegration) and s.integrations[1].upgrade
    assert isinstance(s.integrations[3], WandbIntegration)
    assert s.env_variables == {"NCCL_DEBUG": "INFO"}
    assert s.scheduling.max_retries == 2 and s.scheduling.max_duration == 12.5
    assert s.metadata == {"team": "research"}
    assert s.parameters_for_file() == {"max_seq_len": 2048}
    notes = "\n".join(loaded.warnings)
    for legacy in ("run_name", "gpu_num", "gpu_type", "cluster", "env_variables"):
        assert legacy in notes
    # Each note points at the line of the legacy field.
    assert "spec.yaml:3:" in notes  # gpu_num


def test_env_for_run_exports_run_and_data_names():
    s = load(
        """\
        name: r
        command: x
        data: {remote: "dbfs:/Volumes/main/default/vol/mds", local: /tmp/cache}
        env_variables: {A: 1, B: true}
        integrations: [{integration_type: wandb, project: p, tags: [a, b]}]
        """
    ).spec
    env = s.env_for_run("r-abc123")
    assert env["RUN_NAME"] == "r-abc123" and env["COMPOSER_RUN_NAME"] == "r-abc123"
    assert env["DATA_REMOTE"] == "dbfs:/Volumes/main/default/vol/mds" and env["DATA_LOCAL"] == "/tmp/cache"
    assert env["A"] == "1" and env["B"] == "true"
    assert env["WANDB_PROJECT"] == "p" and env["WANDB_TAGS"] == "a,b"


def test_overrides_apply_before_validation():
    s = load(
        """\
        name: base
        image: img:1
        command: x
        compute: {gpus: 8, gpu_type: a100_80gb}
        parameters: {optimizer: {lr: 0.1}}
        """,
        Overrides(
            name="renamed",
            image="img:2",
            gpus=16,
            gpu_type="h100_80gb",
            nodes=2,
            cluster="c",
            env=["FOO=bar=baz"],
            set=["parameters.optimizer.lr=1e-4", "parameters.new.deep=[1, 2]"],
            max_retries=3,
        ),
    ).spec
    assert s.name == "renamed" and s.image == "img:2"
    assert (s.compute.gpus, s.compute.gpu_type, s.compute.nodes, s.compute.cluster) == (16, "h100_80gb", 2, "c")
    assert s.env_variables == {"FOO": "bar=baz"}
    assert s.parameters == {"optimizer": {"lr": 1e-4}, "new": {"deep": [1, 2]}}
    assert s.scheduling.max_retries == 3


def test_a_bad_override_names_the_flag():
    errs = errors_of("name: a\ncommand: x\n", Overrides(gpus=-2))
    assert errs == ["--gpus -2: compute.gpus: must be zero or more, got -2"]
    # A field the flag creates is blamed on the flag, not on the spec file.
    errs = errors_of("name: a\ncommand: x\n", Overrides(set=["bogus.field=1"]))
    assert len(errs) == 1 and errs[0].startswith("--set bogus.field=1: bogus: unknown field"), errs
    errs = errors_of("name: a\ncommand: x\n", Overrides(set=["scheduling.max_retris=1"]))
    assert errs[0].startswith(
        "--set scheduling.max_retris=1: scheduling.max_retris: unknown field (did you mean 'max_retries'?)"
    ), errs
    assert errors_of("name: a\ncommand: x\n", Overrides(env=["NOEQUALS"])) == [
        "command line: --env takes KEY=VALUE, got 'NOEQUALS'"
    ]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("My Run!", "my-run"),
        ("__a__b__", "a-b"),
        ("123-train", "r-123-train"),
        ("UPPER_case.name", "upper-case-name"),
        ("x" * 100, "x" * (MAX_RUN_NAME - 7)),
    ],
)
def test_names_are_sanitised(raw, expected):
    assert sanitize(raw) == expected


def test_unique_names_fit_kubernetes_and_differ():
    names = {unique_run_name("a" * 200) for _ in range(50)}
    assert len(names) == 50
    for n in names:
        # The last pod hostname of a 10,000-node run, in both Kubernetes forms, fits a DNS label.
        assert len(n) <= MAX_RUN_NAME and len(f"{n}-9999") <= 63 and len(f"{n}-node-0-9999") <= 63
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", n)


# Each bad input, and the exact message a user sees.
BAD = [
    ("name: a\ncommand: x\ncompute:\n  gpus: -1\n", "spec.yaml:4:9: compute.gpus: must be zero or more, got -1"),
    ("name: a\ncommand: x\ncompute:\n  nodes: 0\n", "spec.yaml:4:10: compute.nodes: must be a positive integer, got 0"),
    ("name: a\ncommand: x\ngpu_nums: 8\n", "spec.yaml:3:1: gpu_nums: unknown field (did you mean 'gpu_num'?)"),
    ("name: a\ncommand: x\ncompute: {gpu: 8}\n", "spec.yaml:3:11: compute.gpu: unknown field (did you mean 'gpus'?)"),
    ("name: a\ncommand: x\nname: b\n", "spec.yaml:3:1: duplicate key 'name' (first defined on line 1)"),
    ("name: a\ncommand: [x\n", "spec.yaml:3:1: YAML syntax error: expected ',' or ']', but got '<stream end>'"),
    ("", "spec.yaml: file is empty"),
    ("# only a comment\n", "spec.yaml: file is empty"),
    ("- a\n- b\n", "spec.yaml:1:1: the top level must be a mapping of fields (name, image, command, ...), got a list"),
    ("just a string\n", "spec.yaml:1:1: the top level must be a mapping of fields"),
    (b"\x00\x01\x02binary", "spec.yaml: file is binary"),
    (b"name: \xff\xfe\n", "spec.yaml: file is not UTF-8 text"),
    ("command: x\n", "spec.yaml:1:1: name: is required"),
    ("name: a\n", "spec.yaml:1:1: command: is required"),
    ("name: a\ncommand: '  '\n", "spec.yaml:2:10: command: must not be empty"),
    (
        "name: a\ncommand: x\nimage: 'Not A Valid:Image Ref'\n",
        "spec.yaml:3:8: image: is not a valid Docker image reference",
    ),
    (
        "name: a\ncommand: x\nenv_variables: {1BAD: x}\n",
        "spec.yaml:3:16: env_variables: '1BAD' is not a valid environment variable name",
    ),
    (
        "name: a\ncommand: x\nenv_variables: [{key: A}]\n",
        "spec.yaml:3:17: env_variables.0: each item of the list form must be {key: NAME, value: VALUE}",
    ),
    (
        "name: a\ncommand: x\ndata: {remote: 'dbfs:/Volumes/main/x'}\n",
        "spec.yaml:3:16: data.remote: a Volume path is dbfs:/Volumes/<catalog>/<schema>/<volume>/...",
    ),
    (
        "name: a\ncommand: x\ndata: {remote: 'dbfs:/volumes/c/s/v'}\n",
        "data.remote: Unity Catalog paths are case-sensitive: did you mean dbfs:/Volumes/c/s/v?",
    ),
    ("name: a\ncommand: x\ndata: {remote: 'http://x/y'}\n", "data.remote: unsupported scheme http://"),
    (
        "name: a\ncommand: x\ndata: {remote: 'file:///data'}\n",
        "data.remote: file:// URLs are not supported by streaming; use the bare path '/data'",
    ),
    (
        "name: a\ncommand: x\nintegrations:\n  - integration_type: gti_repo\n",
        "spec.yaml:4:23: integrations.0.integration_type: must be one of git_repo, pip_packages, apt_packages, wandb, mlflow, comet_ml, got 'gti_repo' (did you mean 'git_repo'?)",
    ),
    (
        "name: a\ncommand: x\nintegrations:\n  - integration_type: git_repo\n    git_repo: o/r\n    git_brnch: dev\n",
        "spec.yaml:6:5: integrations.0.git_brnch: unknown field (did you mean 'git_branch'?)",
    ),
    ("name: a\ncommand: x\nintegrations:\n  - {git_repo: o/r}\n", "integrations.0: needs integration_type"),
    (
        "name: a\ncommand: x\nscheduling: {max_retries: many}\n",
        "spec.yaml:3:27: scheduling.max_retries: must be an integer, got 'many'",
    ),
    (
        "name: a\ncommand: x\nscheduling: {preemptible: maybe}\n",
        "scheduling.preemptible: must be true or false, got 'maybe'",
    ),
    ("name: a\ncommand: x\nrun_name: b\n", "spec.yaml:3:1: run_name: set both 'run_name' and 'name'; keep only 'name'"),
    ("name: a\ncommand: x\nsecrets: [a, a]\n", "secrets: secret 'a' is listed twice"),
    ("name: a\ncommand: x\ncompute: {memory: lots}\n", "compute.memory: must be a Kubernetes quantity"),
    ("name: '!!!'\ncommand: x\n", "spec.yaml:1:7: name: must contain at least one letter or digit"),
    ("name: a\ncommand: x\nparameters: [1]\n", "spec.yaml:3:13: parameters: must be a mapping, got a list"),
    ("name: a\ncommand: !!python/object/apply:os.system [ls]\n", "spec.yaml:2:10: unsupported YAML tag"),
    ("a: 1\n---\nb: 2\n", "spec.yaml:3:1: file holds several YAML documents"),
    ("name: a\ncommand: x\ncompute: {gpus: true}\n", "spec.yaml:3:17: compute.gpus: must be an integer, got True"),
    ("name: a\ncommand: x\ncompute: {gpus: '8'}\n", "spec.yaml:3:17: compute.gpus: must be an integer, got '8'"),
    (
        "name: a\ncommand: x\nscheduling: {max_retries: 101}\n",
        "spec.yaml:3:27: scheduling.max_retries: must be less than or equal to 100, got 101",
    ),
    (
        "name: a\ncommand: x\nintegrations:\n  - {integration_type: git_repo, git_repo: 'https://u:pa[ss@h.com/o/r'}\n",
        "spec.yaml:4:44: integrations.0.git_repo: is not a URL urllib can read: https://***@h.com/o/r",
    ),
    (
        "name: a\ncommand: x\nintegrations:\n  - {integration_type: git_repo, git_repo: o/r, host: 'git[hub.com'}\n",
        "integrations.0.host: is not a host name urllib can read (Invalid IPv6 URL)",
    ),
    (
        "name: a\ncommand: x\nintegrations:\n  - {integration_type: pip_packages, packages: [x], index_url: 'https://u:p]w@h/simple'}\n",
        "integrations.0.index_url: is not a URL urllib can read: https://***@h/simple",
    ),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m[:50] for _, m in BAD])
def test_bad_inputs_get_precise_messages(text, message):
    errs = errors_of(text)
    assert any(e.startswith(message) if message.startswith("spec.yaml") else message in e for e in errs), errs


def test_all_errors_are_reported_at_once_in_file_order():
    errs = errors_of("name: a\ncommand: x\ncompute: {gpus: -1}\nscheduling: {max_retries: -2}\nbogus: 1\n")
    assert [e.split(":")[1] for e in errs] == ["3", "4", "5"]


def test_alias_bombs_are_refused_quickly():
    import time

    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    start = time.monotonic()
    errs = errors_of("\n".join(lines) + "\n")
    assert time.monotonic() - start < 2
    assert "alias bomb" in errs[0]


def test_anchors_and_merge_keys_work():
    s = load(
        """\
        name: a
        command: x
        metadata:
          base: &base {team: ml, tier: 1}
          job:
            <<: *base
            tier: 2
        """
    ).spec
    assert s.metadata["job"] == {"team": "ml", "tier": 2}


def test_missing_file_and_directory(tmp_path: Path):
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_values_yaml_cannot_construct_are_spec_errors():
    assert errors_of("name: a\ncommand: x\nmetadata: {d: 2020-13-45}\n")[0].startswith(
        "spec.yaml:3:15: cannot read the value '2020-13-45'"
    )
    assert load("name: ._a\ncommand: x\nmetadata: {v: ._}\n").spec.metadata == {"v": "._"}  # not a float
    assert load("name: a\ncommand: x\nparameters: {lr: 1e-4, w: .5}\n").spec.parameters == {"lr": 1e-4, "w": 0.5}


def test_a_url_the_entrypoint_cannot_read_is_refused_without_its_password():
    for password in ("Qz[Wk", "Qz/Wk[Yv", "Xy]Zq:80Qw"):
        errs = errors_of(
            f"name: a\ncommand: x\nintegrations:\n  - integration_type: git_repo\n"
            f"    git_repo: 'https://alice:{password}@github.com/o/r'\n"
        )
        assert len(errs) == 1 and "https://***@github.com/o/r" in errs[0], errs
        # urllib's own message would quote a "port" cut from the password: no piece of it shows.
        pieces = [p for p in re.split(r"[\[\]/:]", password) if p]
        assert not [p for p in ["alice", *pieces] if p in errs[0]], errs


def test_strict_fields_keep_what_mcli_yamls_hold():
    spec = load_spec_text(
        "name: a\ncommand: x\ncompute: {gpus: 8}\nscheduling: {max_retries: 100}\n"
        "integrations:\n  - {integration_type: git_repo, git_repo: 'https://tok@github.com/o/r',"
        " host: 'https://gitlab.example.com:8443/'}\n",
        "spec.yaml",
    ).spec
    assert spec.compute.gpus == 8 and spec.scheduling.max_retries == 100
