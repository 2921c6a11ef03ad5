"""`validate` and `run` build the spec models with pydantic's plugins off (finding them scans
every installed distribution: bench/README.md), and nothing else: a run's own process, and a
user's PYDANTIC_DISABLE_PLUGINS, find pydantic's plugins as they would without the launcher.

The plugin here is a real one, found the way pydantic finds any: an entry point in the
`pydantic` group of a distribution on sys.path."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = ("import os, pydantic; m = type('ModelOfTheRun', (pydantic.BaseModel,), {'__annotations__': {'x': int}}); "
         "m(x=1); print('child sees PYDANTIC_DISABLE_PLUGINS=' + repr(os.environ.get('PYDANTIC_DISABLE_PLUGINS')))")

RUN = f"name: plugins\ncommand: |\n  {sys.executable} -c \"{CHILD}\"\n"


@pytest.fixture
def spy_plugin(cli, tmp_path: Path) -> Path:
    """A pydantic plugin that writes each model whose validator it is given to a file; its path."""
    site = tmp_path / "site"
    (site / "spyplugin-0.dist-info").mkdir(parents=True)
    (site / "spyplugin-0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: spyplugin\nVersion: 0\n")
    (site / "spyplugin-0.dist-info" / "entry_points.txt").write_text("[pydantic]\nspy = spyplugin:plugin\n")
    (site / "spyplugin.py").write_text(textwrap.dedent("""\
        import os

        class Spy:
            def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind, config, settings):
                with open(os.environ["SPY_LOG"], "a") as f:
                    f.write(schema_type_path.name + "\\n")
                return None, None, None

        plugin = Spy()
        """))
    log = tmp_path / "spy.log"
    cli.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), cli.env.get("PYTHONPATH")]))
    cli.env["SPY_LOG"] = str(log)
    return log


def seen(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_run_finds_the_pydantic_plugins_its_launcher_did_not_use(cli, spy_plugin):
    spec = cli.spec("plugins", RUN)
    r = cli("validate", "-f", str(spec))
    assert r.returncode == 0, r.stderr
    assert seen(spy_plugin) == []  # the spec models were built without the plugin
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "child sees PYDANTIC_DISABLE_PLUGINS=None" in r.stdout
    assert "ModelOfTheRun" in seen(spy_plugin)  # the run's own model went through it
    assert "RunConfig" not in seen(spy_plugin)


def test_a_users_own_pydantic_disable_plugins_is_left_as_it_is(cli, spy_plugin):
    cli.env["PYDANTIC_DISABLE_PLUGINS"] = "some-other-plugin"
    spec = cli.spec("plugins", RUN)
    r = cli("run", "-f", str(spec), "--follow", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "child sees PYDANTIC_DISABLE_PLUGINS='some-other-plugin'" in r.stdout
    assert "RunConfig" in seen(spy_plugin)  # the user turned off another plugin, not this one
