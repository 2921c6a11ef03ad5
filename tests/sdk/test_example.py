"""The SDK page's example (docs/sdk.md), run as written: create a run, wait for it, plot its loss
with matplotlib. Only its spec differs: tests/kubernetes/worker.py logs the trainer's
metric records in a second, where the page's trains an MPT. On the local backend and
on the fake cluster (the current profile, as `launcher cluster use fake` makes it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.sdk.conftest import REPO, spec_file, worker

EXAMPLE_SPEC = 'RunConfig.from_file("runspecs/mpt-tiny-local.yaml")'
STEPS = 6


def sdk_example() -> str:
    text = (REPO / "docs" / "sdk.md").read_text()
    section = text[text.index("# The Python SDK") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert EXAMPLE_SPEC in code, "the SDK page's example loads its spec as this test expects"
    return code


def run_example(specs: Path, tmp_path: Path, monkeypatch) -> dict:
    """Exec the SDK page's example in a fresh namespace, in a working directory of its own;
    its spec is a worker that logs STEPS metric points."""
    monkeypatch.setenv("MPLBACKEND", "Agg")  # no display: matplotlib draws into the PNG only
    spec = spec_file(specs, "example", worker("--lines", str(STEPS), "--metrics", "--interval", "0.05"))
    work = tmp_path / "notebook"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict = {}
    exec(
        compile(sdk_example().replace(EXAMPLE_SPEC, f"RunConfig.from_file({str(spec)!r})"), "docs/sdk.md", "exec"),
        namespace,
    )
    return namespace


def check(namespace: dict, backend: str) -> None:
    run, loss = namespace["run"], namespace["loss"]
    assert run.status == "COMPLETED" and run.backend == backend
    assert run.config["parameters"]["max_duration"] == "20ba"  # the config's change reached the run
    assert loss["step"].tolist() == list(range(STEPS))
    assert loss["value"].tolist() == pytest.approx([1 / (s + 1) for s in range(STEPS)])
    png = Path("loss.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000


def test_the_sdk_example_on_the_local_backend(specs, tmp_path, monkeypatch, capsys):
    check(run_example(specs, tmp_path, monkeypatch), "local")
    assert capsys.readouterr().out == ""  # the SDK prints nothing; the example prints nothing either


def test_the_sdk_example_on_the_fake_cluster(fake_kube, launcher_home, specs, tmp_path, monkeypatch, capsys):
    path = launcher_home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["current"] = "fake"  # as `launcher cluster use fake` leaves it
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    check(run_example(specs, tmp_path, monkeypatch), "kubernetes")
    assert capsys.readouterr().out == ""
