"""The documentation site: `mkdocs build --strict` as CI runs it, so a broken link, a
missing anchor or a generated page that no longer builds fails the suite; and the generated
pages say what the code says (every command of the CLI, every field of the run spec)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from launcher.spec.models import RunSpec

REPO = Path(__file__).resolve().parents[1]


def build(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of the site under config_dir, importing this checkout's launcher."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=config_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(REPO, out)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}{result.stderr}"
    return out


def headings(page: Path) -> set[str]:
    return set(re.findall(r'<h\d id="([^"]+)"', page.read_text()))


def documented_group() -> click.Group:
    """The click group docs/cli.md's `::: mkdocs-click` directive names (its :module: and
    :command:), so the test checks the very group the page is generated from."""
    page = (REPO / "docs" / "cli.md").read_text()
    module = re.search(r"^\s+:module: (\S+)$", page, re.MULTILINE).group(1)
    command = re.search(r"^\s+:command: (\S+)$", page, re.MULTILINE).group(1)
    return getattr(importlib.import_module(module), command)


def test_the_cli_page_documents_every_command(site):
    ids = headings(site / "cli" / "index.html")
    cli = documented_group()
    with click.Context(cli) as ctx:
        commands = cli.list_commands(ctx)
    assert commands, "the launcher group lists its commands"
    missing = [name for name in commands if f"launcher-{name}" not in ids]
    assert not missing, f"the CLI page has no section for: {missing}"


def test_the_run_spec_page_lists_every_field(site):
    page = (site / "run-spec" / "index.html").read_text()
    for name, field in RunSpec.model_fields.items():
        assert f"<code>{field.alias or name}</code>" in page, f"the run spec reference lacks {name}"


def test_a_broken_link_fails_the_build(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "bench").mkdir()
    shutil.copy(REPO / "bench" / "RESULTS.md", copy / "bench" / "RESULTS.md")
    page = copy / "docs" / "sdk.md"
    page.write_text(page.read_text() + "\nSee [the old page](reconciler.md).\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode != 0
    assert "reconciler.md" in result.stdout + result.stderr


def test_the_readme_is_a_front_page_with_the_ci_test_command():
    readme = (REPO / "README.md").read_text()
    # The line of .ci/run that makes the venv and runs the suite (mypy follows it).
    ci_lines = (REPO / ".ci" / "run").read_text().strip().splitlines()
    ci_command = next(line for line in ci_lines if line.startswith("python3 -m venv .venv && "))
    assert ci_lines[-1] in (ci_command, ".venv/bin/mypy launcher")
    assert f"\n{ci_command}\n" in readme, "the README's test command is the one .ci/run runs"
    assert len(readme.splitlines()) <= 150, "the reference belongs on the documentation site"
