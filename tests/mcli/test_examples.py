"""mcli's documented SDK examples, run with only the import line changed
(`from mcli import ...` -> `from launcher.mcli import ...`), each in a fresh Python against
the local backend, and the run examples on the fake cluster too.

Where each comes from: RUN_STATUS and CLUSTER_UTILIZATION are mcli's "Run Lifecycle" page
as it is written (docs.mosaicml.com/projects/mcli/en/latest/training/run_lifecycle.html);
RUN_STATUS_ORDER is the Example sections of RunStatus.before, after and is_terminal in
mosaicml-cli 0.8.3 (mcli/utils/utils_run_status.py), which its API reference shows, run
under doctest. Those are the only runnable SDK examples to be had here: mcli's repository
cannot be fetched, the docs pages are stored only as their openings, 0.8.3's README has no
code, and its other docstrings no examples.
The others are the calls mcli's "Manage a run with the SDK" page and its API reference
(training/working_with_runs.html, python/python_api.html) document, in the shapes they
document them: a run from a RunConfig or a YAML, wait_for_run_status, the logs joined as
one str, get_runs(statuses=[...]), stop_run, create_secret with an MCLIEnvVarSecret,
create_interactive_run, future=True. A test only sets the scene (a run to find, a YAML to
read) and reads what the example printed, as a user would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def as_launcher(code: str) -> str:
    """The example with its mcli imports pointed at launcher.mcli, and nothing else changed."""
    out = re.sub(r"^(\s*)from mcli import ", r"\1from launcher.mcli import ", code, flags=re.M)
    out = re.sub(r"^(\s*)import mcli$", r"\1import launcher.mcli as mcli", out, flags=re.M)
    changed = [(a, b) for a, b in zip(code.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed and all("mcli import" in a or a.strip() == "import mcli" for a, _ in changed)
    return out


@dataclass
class Example:
    code: str
    """mcli's example as documented (its own imports)."""
    expect: str
    """A regular expression the whole of what it prints must match."""
    setup: str = ""
    """launcher.mcli code run first, in the same Python: the scene the example assumes."""
    files: dict[str, str] | None = None
    """Files in its working directory."""
    profiles: dict[str, dict] | None = None
    """Cluster profiles added to config.yaml."""
    doctest: bool = False
    """`code` is an import line, a blank line, then doctest text (a docstring's Example
    section, as written): the examples run under doctest, in the import's namespace."""


HELLO_WORLD_YAML = """\
name: hello-world
image: bash
command: echo 'Hello World!'
compute:
  gpus: 0
"""

EXAMPLES = {
    # run_lifecycle.html, "The status of a run can be monitored using" (verbatim).
    "run_status": Example(
        setup="""\
            import launcher.mcli as _m
            _m.wait_for_run_status(_m.create_run(_m.RunConfig(name='run', image='bash', command='echo hi', compute={'gpus': 0})), 'COMPLETED', timeout=120)
            """,
        code="""\
            from mcli import get_run

            run = get_run('run')
            print(run.status)

            run = run.refresh()
            print(run.status)
            """,
        expect=r"COMPLETED\nCOMPLETED\n",
    ),
    # run_lifecycle.html, "You can view active and queued runs on all clusters using" (verbatim).
    # mosaicml-cli 0.8.3, mcli/utils/utils_run_status.py: the Example sections of
    # RunStatus.before, RunStatus.after and RunStatus.is_terminal (verbatim), after the
    # import of the name they use.
    "run_status_order": Example(
        doctest=True,
        code="""\
            from mcli import RunStatus

            >>> RunStatus.RUNNING.before(RunStatus.COMPLETED)
            True
            >>> RunStatus.PENDING.before(RunStatus.RUNNING)
            True
            >>> RunStatus.COMPLETED.after(RunStatus.RUNNING)
            True
            >>> RunStatus.RUNNING.after(RunStatus.PENDING)
            True
            >>> RunStatus.RUNNING.is_terminal()
            False
            >>> RunStatus.COMPLETED.is_terminal()
            True
            """,
        expect=r"TestResults\(failed=0, attempted=6\)\n",
    ),
    "cluster_utilization": Example(
        profiles={"name": {"backend": "local"}},
        code="""\
            from mcli import get_cluster

            cluster = get_cluster("name")

            gpus_available = sum(i.gpus_available for i in cluster.utilization.cluster_instance_utils)
            print(f"{cluster.name}: "
                  f"{len(cluster.utilization.active_runs_by_user)} active, "
                  f"{len(cluster.utilization.queued_runs_by_user)} queued, "
                  f"{gpus_available} GPUs available")
            """,
        expect=r"name: 0 active, 0 queued, \d+ GPUs available\n",
    ),
    # working_with_runs.html: create a run from a RunConfig, wait for it, read its logs.
    "create_wait_logs": Example(
        code="""\
            from mcli import RunConfig, RunStatus, create_run, get_run_logs, wait_for_run_status

            config = RunConfig(
                name='hello-world',
                image='bash',
                command='echo "Hello World!"',
                compute={'gpus': 0},
            )
            run = create_run(config)
            run = wait_for_run_status(run, RunStatus.COMPLETED, timeout=120)
            print(run.status)
            print(run.config.command)
            logs = ''.join(get_run_logs(run))
            print('Hello World!' in logs)
            print(run.get_gpu_hours())
            """,
        expect=r'COMPLETED\necho "Hello World!"\nTrue\n0(\.0)?\n',
    ),
    # working_with_runs.html: a run from the YAML of mcli's hello-world, created as a Future.
    "from_file_future": Example(
        files={"hello_world.yaml": HELLO_WORLD_YAML},
        code="""\
            from mcli import RunConfig, create_run, wait_for_run_status

            config = RunConfig.from_file('hello_world.yaml')
            future = create_run(config, future=True)
            run = future.result()
            run = wait_for_run_status(run, 'completed')
            print(run.name.startswith('hello-world'), run.status)
            """,
        expect=r"True COMPLETED\n",
    ),
    # working_with_runs.html "Getting runs": filters by status.
    "get_runs_statuses": Example(
        setup="""\
            import launcher.mcli as _m
            _m.wait_for_run_status(_m.create_run(_m.RunConfig(name='done', image='bash', command='true', compute={'gpus': 0})), 'COMPLETED', timeout=120)
            _m.wait_for_run_status(_m.create_run(_m.RunConfig(name='busy', image='bash', command='sleep 120', compute={'gpus': 0})), 'RUNNING', timeout=120)
            """,
        code="""\
            from mcli import RunStatus, get_runs

            runs = get_runs(statuses=[RunStatus.RUNNING])
            print([r.name.rsplit('-', 1)[0] for r in runs])
            runs = get_runs(statuses=['COMPLETED'])
            print([r.name.rsplit('-', 1)[0] for r in runs])
            print(len(get_runs()))
            """,
        expect=r"\['busy'\]\n\['done'\]\n2\n",
    ),
    # working_with_runs.html "Stopping runs".
    "stop_run": Example(
        code="""\
            from mcli import RunConfig, create_run, stop_run, wait_for_run_status

            run = create_run(RunConfig(name='long-run', image='bash', command='sleep 300', compute={'gpus': 0}))
            wait_for_run_status(run, 'RUNNING')
            run = stop_run(run, reason='not needed any more')
            run = wait_for_run_status(run, 'STOPPED', timeout=60)
            print(run.status, run.status.is_terminal())
            """,
        expect=r"STOPPED True\n",
    ),
    # The secrets' SDK (create_secret, get_secrets, delete_secrets) with mcli's Secret objects.
    "env_secret": Example(
        code="""\
            from mcli import MCLIEnvVarSecret, RunConfig, SecretType, create_run, create_secret, delete_secrets, get_run_logs, get_secrets, wait_for_run_status

            secret = MCLIEnvVarSecret(name='wandb', secret_type=SecretType.environment, key='WANDB_API_KEY', value='0123456789abcdef')
            create_secret(secret)
            print([(s.name, s.secret_type.value) for s in get_secrets()])
            run = create_run(RunConfig(name='uses-secret', image='bash', command='test "$WANDB_API_KEY" = 0123456789abcdef && echo the key is set', compute={'gpus': 0}))
            run = wait_for_run_status(run, 'COMPLETED', timeout=120)
            print('the key is set' in ''.join(get_run_logs(run)))
            delete_secrets(['wandb'])
            print(get_secrets())
            """,
        expect=r"\[\('wandb', 'environment'\)\]\nTrue\n\[\]\n",
    ),
    # create_interactive_run: a run that waits for `connect`.
    "interactive": Example(
        code="""\
            from mcli import RunConfig, create_interactive_run, stop_run, wait_for_run_status

            run = create_interactive_run(RunConfig(name='interactive', image='bash', compute={'gpus': 0}), seconds=600)
            run = wait_for_run_status(run, 'RUNNING')
            print(run.status, run.run_type.value)
            stop_run(run)
            """,
        expect=r"RUNNING INTERACTIVE\n",
    ),
}


DOCTEST = """
import doctest
_examples = doctest.DocTestParser().get_doctest({examples!r}, dict(globals()), "mcli", None, 0)
_runner = doctest.DocTestRunner()
_runner.run(_examples)
print(_runner.summarize(verbose=False))
"""
"""Runs a docstring's examples, reporting each that fails, then the count."""


def run_example(example: Example, home: Path, work: Path) -> subprocess.CompletedProcess:
    if example.profiles:
        path = home / "config.yaml"
        config = yaml.safe_load(path.read_text()) if path.exists() else {}
        config.setdefault("clusters", {}).update(example.profiles)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
    for name, text in (example.files or {}).items():
        (work / name).write_text(text)
    code = as_launcher(textwrap.dedent(example.code))
    if example.doctest:
        imports, _, examples = code.partition("\n\n")
        code = imports + DOCTEST.format(examples=examples)
    program = textwrap.dedent(example.setup) + code
    env = {**os.environ, "LAUNCHER_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", program], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )


def check(example: Example, done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(example.expect, done.stdout), done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_on_the_local_backend(name, launcher_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    check(EXAMPLES[name], run_example(EXAMPLES[name], launcher_home, work))


# cluster_utilization asks for a local profile; run_status_order starts no run.
ON_THE_FAKE_CLUSTER = sorted(set(EXAMPLES) - {"cluster_utilization", "run_status_order"})


@pytest.mark.parametrize("name", ON_THE_FAKE_CLUSTER)
def test_example_on_the_fake_cluster(name, fake_kube, launcher_home, tmp_path):
    path = launcher_home / "config.yaml"
    config = yaml.safe_load(path.read_text())
    config["current"] = "fake"  # as `launcher cluster use fake` leaves it
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    work = tmp_path / "work"
    work.mkdir()
    check(EXAMPLES[name], run_example(EXAMPLES[name], launcher_home, work))
    from launcher.sdk import get_runs

    runs = get_runs()
    assert runs and {r.backend for r in runs} == {"kubernetes"}  # the example's runs went to the cluster


def test_only_the_import_line_changes():
    code = "import mcli\nfrom mcli import create_run\nrun = create_run(cfg)  # mcli\n"
    assert as_launcher(code) == "import launcher.mcli as mcli\nfrom launcher.mcli import create_run\n" + (
        "run = create_run(cfg)  # mcli\n"
    )
