"""The CLI on the backend contract: `validate` refuses what `run` refuses (both ask
Backend.check, as `run --dry-run` does), each command reads config.yaml, each profile
and each kubeconfig once (the LAUNCHER_DEBUG counter, in a fresh process), and neither
the CLI nor the dashboard imports the other."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from launcher.backends.base import Backend
from launcher.backends.capabilities import Exec, Feature
from launcher.backends.local.backend import max_local_nodes
from launcher.backends.registry import BACKENDS
from tests.fakes.kube.fixtures import write_profile

LAUNCHER = Path(__file__).resolve().parents[2] / "launcher"
LONG_NAME = "a" * 50  # mcli takes it; with a suffix, JobSet's pod name <name>-node-0-0-abcde would be 72 characters


def refusals(cli, spec: Path, *args: str) -> dict[str, str]:
    """The one error line of validate, run --dry-run and run for the same spec and target;
    each must exit 2 without a traceback."""
    lines = {}
    for command in (["validate"], ["run", "--dry-run"], ["run"]):
        r = cli(*command, "-f", str(spec), *args)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        lines[" ".join(command)] = next(line for line in r.stderr.splitlines() if line.startswith("✗"))
    return lines


def test_a_50_character_name_is_cut_to_fit_by_validate_dry_run_and_run_alike(cli, fake_kube_factory):
    """The name is cut to fit every pod name of both forms (up to 10,000 nodes), on every
    backend: validate, run --dry-run and run agree, and the run completes (the fake's JobSet
    webhook refuses the pod names the real one refuses)."""
    kube = fake_kube_factory()
    spec = cli.spec(
        "long",
        f"""
        name: {LONG_NAME}
        image: python:3.11-slim
        compute: {{nodes: 2}}
        command: "true"
    """,
    )
    cut = "a" * 38
    validated = cli("validate", "-f", str(spec), "--cluster", "fake")
    assert validated.returncode == 0, validated.stderr
    assert (
        f"name {LONG_NAME!r} becomes {cut!r} (lowercase letters, digits and '-'; at most 38 characters before "
        "the suffix, so every pod name fits Kubernetes)"
    ) in validated.stderr
    assert re.search(rf"^name: {cut}-[a-z0-9]{{6}}$", validated.stdout, re.M), validated.stdout
    dry = cli("run", "-f", str(spec), "--cluster", "fake", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert re.search(rf"name: {cut}-[a-z0-9]{{6}}$", dry.stdout, re.M), dry.stdout
    assert "a" * 39 not in dry.stdout
    submitted = cli("run", "-f", str(spec), "--cluster", "fake", "--follow")
    assert submitted.returncode == 0, submitted.stderr
    [name] = cli("get", "runs", "-o", "name").stdout.split()
    assert re.fullmatch(rf"{cut}-[a-z0-9]{{6}}", name)
    assert {p["spec"]["hostname"] for p in kube.pods(labels=f"launcher.dev/run={name}")} == {
        f"{name}-node-0-0",
        f"{name}-node-0-1",
    }
    assert cli.describe(LONG_NAME)["name"] == name  # the spec's name still finds the run


@pytest.mark.parametrize("target", [["--cluster", "fake"], ["--backend", "local"]])
def test_what_the_target_cannot_honour_is_warned_by_validate_as_by_run(cli, fake_kube_factory, target):
    fake_kube_factory()
    spec = cli.spec(
        "spot",
        """
        name: spot
        image: python:3.11-slim
        command: "true"
        scheduling: {preemptible: true}
    """,
    )
    said = {}
    for command in (["validate"], ["run", "--dry-run"], ["run"]):
        r = cli(*command, "-f", str(spec), *target)
        assert r.returncode == 0, (command, r.stderr)
        said[" ".join(command)] = [line for line in r.stderr.splitlines() if line.startswith("! ")]
    assert said["validate"] and all(lines == said["validate"] for lines in said.values()), said
    assert said["validate"][0].startswith("! scheduling.preemptible: ")


def test_a_gpu_type_the_profile_lacks_is_refused_by_validate_as_by_run(cli, fake_kube):
    spec = cli.spec(
        "v100",
        """
        name: gpu
        image: python:3.11-slim
        compute: {gpus: 8, gpu_type: v100}
        command: "true"
    """,
    )
    lines = refusals(cli, spec, "--cluster", "fake")
    assert set(lines.values()) == {lines["validate"]}, lines
    assert lines["validate"].startswith("✗ compute.gpu_type: unknown gpu_type 'v100' on cluster fake (known: ")
    assert not [r for r in fake_kube.requests if r[0] == "POST"]


def test_more_nodes_than_this_machine_runs_are_refused_by_validate_as_by_run(cli):
    nodes = max_local_nodes() + 1
    spec = cli.spec(
        "wide",
        f"""
        name: wide
        image: none
        compute: {{nodes: {nodes}}}
        command: "true"
    """,
    )
    lines = refusals(cli, spec, "--backend", "local")
    assert set(lines.values()) == {
        f"✗ {spec}:4:18: compute.nodes: {nodes} is more than the local backend runs on this machine: "
        f"at most {max_local_nodes()} (4 per CPU core, {max_local_nodes() // 4} cores); "
        "each node is a process here"
    }, lines


def counted(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if line.startswith("debug: counted: ")]
    return line.removeprefix("debug: counted: ")


def test_each_profile_and_kubeconfig_is_read_once_per_command(cli, fake_kube, launcher_home):
    write_profile(launcher_home, fake_kube, name="other")  # a second profile, the same kubeconfig file
    kubeconfig = launcher_home / "kubeconfig"
    cli.env["LAUNCHER_DEBUG"] = "1"
    spec = cli.spec(
        "hello",
        """
        name: hello
        image: python:3.11-slim
        command: "echo hi"
    """,
    )

    dry = cli("run", "-f", str(spec), "--dry-run", "--cluster", "fake")
    assert dry.returncode == 0, dry.stderr
    assert "kind: List" in dry.stdout
    assert counted(dry.stderr) == "config read 1; profile load 1 (fake 1); kubeconfig read 0"

    submitted = cli("run", "-f", str(spec), "--cluster", "fake")
    assert submitted.returncode == 0, submitted.stderr
    assert counted(submitted.stderr) == f"config read 1; profile load 1 (fake 1); kubeconfig read 1 ({kubeconfig} 1)"
    [name] = re.findall(r"Run (hello-[a-z0-9]{6}) submitted", submitted.stdout + submitted.stderr)

    listed = cli("get", "runs", "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [name]  # the same namespace through both profiles: one place, listed once
    assert counted(listed.stderr) == (
        f"config read 1; profile load 3 (fake 1, local 1, other 1); kubeconfig read 1 ({kubeconfig} 1)"
    )


def test_without_debug_nothing_is_counted_aloud(cli, fake_kube):
    r = cli("get", "runs")
    assert r.returncode == 0, r.stderr
    assert "debug:" not in r.stderr


def test_a_profile_of_an_unknown_backend_is_refused_naming_the_known(cli, launcher_home):
    (launcher_home / "config.yaml").write_text("clusters:\n  box:\n    backend: slurm\n")
    r = cli("get", "runs", "--cluster", "box")
    assert r.returncode == 2, r.stderr
    assert f"clusters.box.backend must be one of {', '.join(BACKENDS)}, got 'slurm'" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_backend_states_each_feature_once():
    def backend(bases: tuple[type, ...], unsupported: dict) -> type:
        methods = {
            name: lambda *a, **k: None
            for name in (
                "open",
                "check",
                "plan",
                "secret_store",
                "submit",
                "get",
                "list",
                "logs",
                "stop",
                "delete",
                "exec",
            )
        }
        return type("Third", (Backend, *bases), {"name": "third", "UNSUPPORTED": unsupported, **methods})

    everything_but_exec = {f: "not here" for f in Feature if f is not Feature.EXEC}
    assert backend((Exec,), everything_but_exec)().supports(Feature.EXEC)
    with pytest.raises(TypeError, match="EXEC needs the Exec mixin or a reason in UNSUPPORTED"):
        backend((), everything_but_exec)
    with pytest.raises(TypeError, match="provides EXEC .Exec. and names it unsupported"):
        backend((Exec,), {f: "not here" for f in Feature})


def test_no_backend_name_is_compared_outside_its_own_folder():
    """Callers ask for a capability (Backend.supports), never a backend's name."""
    names = set(BACKENDS)
    found = []
    for path in LAUNCHER.rglob("*.py"):
        rel = path.relative_to(LAUNCHER).as_posix()
        if any(rel.startswith(f"backends/{name}/") for name in names):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            operands = (node.left, *node.comparators) if isinstance(node, ast.Compare) else ()
            if (
                any(isinstance(n, ast.Constant) and n.value in names for n in operands)
                and "backend" in ast.unparse(node).lower()
            ):  # a storage scheme or a data engine "local" is no backend
                found.append(f"{rel}:{node.lineno}")
    assert found == []


def imported_modules(package: Path) -> dict[str, set[str]]:
    """Every module each file of `package` imports (at the top or inside a function)."""
    out = {}
    for path in package.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        out[str(path.relative_to(LAUNCHER.parent))] = names
    return out


@pytest.mark.parametrize(("package", "other"), [("ui", "launcher.cli"), ("cli", "launcher.ui")])
def test_neither_the_cli_nor_the_dashboard_imports_the_other(package, other):
    found = {
        path: sorted(n for n in names if n == other or n.startswith(other + "."))
        for path, names in imported_modules(LAUNCHER / package).items()
    }
    assert {path: names for path, names in found.items() if names} == {}
    assert found, f"no files under launcher/{package}"


def test_debug_in_process_counts_aloud_once_and_leaves_the_next_command_quiet(launcher_home, capsys):
    from launcher.cli.error_report import run_cli
    from launcher.cli.main import cli as launcher_cli

    assert run_cli(launcher_cli, ["--debug", "cluster", "list"]) == 0
    assert "debug: counted: config read 0; profile load 0; kubeconfig read 0" in capsys.readouterr().err
    assert run_cli(launcher_cli, ["cluster", "list"]) == 0
    assert "debug:" not in capsys.readouterr().err
