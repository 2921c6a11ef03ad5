"""pip_install, pip_packages and apt_packages, with the local backend's per-run virtualenv."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from launcher.pod import contract
from tests.entrypoint.conftest import free_port

IMPORT_CHECK = (
    'cd / && python -c "import sys, tinypkg; print(tinypkg.GREETING); print(sys.prefix)" '
    '&& echo "VIRTUAL_ENV=$VIRTUAL_ENV" && echo "pip=$(command -v pip)"'
    " && python -c \"import yaml, launcher.entrypoint; print('inherits the current environment')\""
)


def pip_install_spec(repo, command=IMPORT_CHECK) -> dict:
    return {
        "command": command,
        "integrations": [
            {"integration_type": "git_repo", "git_repo": str(repo), "path": "tinyrepo", "pip_install": "--no-index ."}
        ],
    }


def test_pip_install_goes_into_the_run_virtualenv(entry, pkg_repo):
    r = entry.run(pip_install_spec(pkg_repo), extra={"LAUNCHER_VENV": str(entry.venv)})
    assert r.code == 0, r.out
    lines = r.out.splitlines()
    assert "hello from tinypkg" in lines
    assert str(entry.venv) in lines  # sys.prefix of the command's python
    assert f"VIRTUAL_ENV={entry.venv}" in lines
    assert f"pip={entry.venv}/bin/pip" in lines
    assert "inherits the current environment" in lines
    assert f"[launcher] creating the run's virtualenv {entry.venv}" in r.out
    # The user's own environment is untouched.
    mine = subprocess.run([sys.executable, "-c", "import tinypkg"], cwd="/", capture_output=True)
    assert mine.returncode != 0


def test_console_scripts_of_the_current_environment_run_with_the_run_python(entry, pkg_repo):
    # torchrun and composer are such scripts; pytest (installed with the dev extra) stands in for them.
    (entry.workdir / "probe_test.py").write_text(
        "import sys, tinypkg\n\ndef test_probe():\n    print('probe ran under', sys.prefix)\n"
    )
    command = "command -v pytest && pytest -q -s -p no:cacheprovider probe_test.py"
    r = entry.run(pip_install_spec(pkg_repo, command=command), extra={"LAUNCHER_VENV": str(entry.venv)})
    assert r.code == 0, r.out
    assert f"{entry.venv}/bin/pytest" in r.out.splitlines()
    assert f"probe ran under {entry.venv}" in r.out


def test_pip_in_the_command_installs_into_the_run_virtualenv(entry, pkg_repo):
    command = (
        f"cd / && pip install --no-index --no-deps -q {pkg_repo} && python -c 'import tinypkg, sys; print(sys.prefix)'"
    )
    spec = {"command": command, "integrations": [{"integration_type": "pip_packages", "packages": []}]}
    r = entry.run(spec, extra={"LAUNCHER_VENV": str(entry.venv)})
    assert r.code == 0, r.out
    assert r.out.splitlines()[-2] == str(entry.venv)
    assert subprocess.run([sys.executable, "-c", "import tinypkg"], cwd="/", capture_output=True).returncode != 0


def test_failing_pip_install_stops_the_run_with_its_own_exit_code(entry):
    spec = {
        "command": "touch command-ran",
        "integrations": [{"integration_type": "pip_packages", "packages": ["definitely-not-a-package-xq7"]}],
    }
    r = entry.run(spec, extra={"LAUNCHER_VENV": str(entry.venv), "PIP_NO_INDEX": "1"})
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert (
        "[launcher] error: integration 1/1: pip_packages (definitely-not-a-package-xq7): "
        "pip install failed with exit code 1" in r.out
    )
    quoted = [line for line in r.out.splitlines() if line.startswith("[launcher]   | ")]
    assert 0 < len(quoted) <= 20
    assert any("definitely-not-a-package-xq7" in line for line in quoted)
    assert not (entry.workdir / "command-ran").exists()


def test_package_names_are_never_options(entry):
    spec = {
        "command": "true",
        "integrations": [{"integration_type": "pip_packages", "packages": ["--index-url=http://evil.invalid"]}],
    }
    r = entry.run(spec, extra={"LAUNCHER_VENV": str(entry.venv), "PIP_NO_INDEX": "1"})
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert "Invalid requirement: '--index-url=http://evil.invalid'" in r.out


def test_ranks_of_a_local_run_share_the_integrations_and_virtualenv(entry, pkg_repo):
    port = free_port()
    greet = "import tinypkg; print(tinypkg.GREETING)"
    extra = {"LAUNCHER_VENV": str(entry.venv)}
    procs = [
        entry.start(
            pip_install_spec(pkg_repo, command=f'cd / && python -c "{greet}"'), rank=0, nodes=2, port=port, extra=extra
        ),
        entry.start(
            pip_install_spec(pkg_repo, command=f'cd / && python -c "{greet}"'), rank=1, nodes=2, port=port, extra=extra
        ),
    ]
    outs = [p.communicate(timeout=40)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all("hello from tinypkg" in o for o in outs)
    cloned = [i for i, o in enumerate(outs) if "git_repo: cloning" in o]
    assert len(cloned) == 1, outs
    other = 1 - cloned[0]
    assert f"integrations: already done for this run (by node rank {cloned[0]}): reusing them" in outs[other]
    assert f"the command runs in the virtualenv {entry.venv}" in outs[other]


def _non_root_prefix() -> tuple[str, ...]:
    import os

    if os.geteuid() != 0:
        return ()
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-U", "true"], capture_output=True).returncode == 0:
        return (unshare, "-U")  # a user namespace: uid 65534 inside, same files
    pytest.skip("running as root and cannot drop to another uid")


def test_apt_packages_refused_on_local_unless_the_profile_allows_them(entry):
    spec = {
        "command": "touch command-ran",
        "integrations": [{"integration_type": "apt_packages", "packages": ["hello"]}],
    }
    r = entry.run(spec)  # as root too: a run never changes the host on its own
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert "apt_packages: the local backend does not install system packages on this machine" in r.out
    assert "sudo apt-get install hello" in r.out
    assert not (entry.workdir / "command-ran").exists()
    # Allowed by the profile, it still needs root.
    r = entry.run(spec, prefix=_non_root_prefix(), extra={"LAUNCHER_ALLOW_HOST_PACKAGES": "1"})
    assert r.code == contract.EXIT_INTEGRATION, r.out
    assert "the local backend installs apt packages only when it runs as root" in r.out
    assert not (entry.workdir / "command-ran").exists()
