"""The layers of the launcher's packages, as pyproject.toml's import-linter contracts state
them ([tool.importlinter]), and no module importing itself through others."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import needs

needs("importlinter", reason="the layer contracts need the dev extra: pip install -e '.[dev]'")
import grimp

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_every_import_keeps_the_layer_contracts() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = ANSI.sub("", done.stdout + done.stderr)
    assert done.returncode == 0, report
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken", report), report


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("launcher", exclude_type_checking_imports=True, cache_dir=None)
    cycles: dict[frozenset[str], str] = {}
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                cycles.setdefault(frozenset(back), " -> ".join((module, *back)))
    assert not cycles, "import cycles:\n" + "\n".join(cycles.values())
