"""The local backend's per-run virtualenv (LAUNCHER_VENV).

pip_install and pip_packages install into it rather than into the user's
environment, and the command runs with it first on PATH. It sees everything the
current environment has:
- the current interpreter is a plain installation: `--system-site-packages`;
- it is itself a virtualenv: `python -m venv` would only inherit the base
  interpreter's packages, not the virtualenv's (torch, composer, launcher), so a
  .pth file adds the current virtualenv's site-packages (processing its own .pth
  files, e.g. editable installs) after the run's own, which therefore win.

It is made `--without-pip` (ensurepip takes seconds) when pip is importable
from the inherited packages; `pip` and `pip3` in its bin run that pip under the
run's interpreter, so they install into the run's virtualenv too. The current
environment's console scripts (torchrun, composer) name its own python in their
first line; its bin gets wrappers that run them with the run's python instead,
or their workers would not see what the run installed. Ranks of one run share
it: a file lock guards its creation and a marker says it is complete.
"""

from __future__ import annotations

import os
import shlex
import shutil
import site
import subprocess
import sys
from pathlib import Path

from launcher.entrypoint import log as out
from launcher.entrypoint.locks import file_lock
from launcher.entrypoint.steps import StepFailed, run_step

MARKER = ".launcher-venv-ready"
PTH_NAME = "_launcher_parent_env.pth"


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def _in_virtualenv() -> bool:
    return sys.prefix != sys.base_prefix


def _parent_includes_system_site() -> bool:
    try:
        cfg = (Path(sys.prefix) / "pyvenv.cfg").read_text()
    except OSError:
        return False
    for line in cfg.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "include-system-site-packages":
            return value.strip().lower() == "true"
    return False


def _parent_site_dirs() -> list[str]:
    prefix = Path(sys.prefix).resolve()
    return [p for p in site.getsitepackages() if prefix in (r := Path(p).resolve()).parents or r == prefix]


def create_argv(venv: Path) -> list[str]:
    system_site = not _in_virtualenv() or _parent_includes_system_site()
    return [
        sys.executable,
        "-m",
        "venv",
        "--without-pip",
        *(["--system-site-packages"] if system_site else []),
        str(venv),
    ]


def _query(python: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True, timeout=60)


def _link_parent(venv: Path, env: dict[str, str]) -> None:
    got = _query(python_of(venv), "import sysconfig; print(sysconfig.get_path('purelib'))", env)
    if got.returncode:
        raise StepFailed("the new virtualenv's python does not start", got.stderr.splitlines()[-20:])
    purelib = Path(got.stdout.strip())
    purelib.mkdir(parents=True, exist_ok=True)
    lines = [f"import site; site.addsitedir({d!r})\n" for d in _parent_site_dirs()]
    (purelib / PTH_NAME).write_text("".join(lines))


def _write_pip_shims(venv: Path) -> None:
    python = shlex.quote(str(python_of(venv)))
    for name in ("pip", "pip3", f"pip{sys.version_info.major}.{sys.version_info.minor}"):
        shim = venv / "bin" / name
        shim.write_text(f'#!/bin/sh\nexec {python} -m pip "$@"\n')
        shim.chmod(0o755)


def _wrap_console_scripts(venv: Path) -> None:
    parent_bin = Path(sys.prefix) / "bin"
    if not parent_bin.is_dir():
        return
    marker = f"{parent_bin}/python".encode()
    python = shlex.quote(str(python_of(venv)))
    for script in sorted(parent_bin.iterdir()):
        wrapper = venv / "bin" / script.name
        if wrapper.exists() or not script.is_file() or not os.access(script, os.X_OK):
            continue
        try:
            with open(script, "rb") as f:
                head = b"\n".join(f.read(1024).split(b"\n")[:2])
        except OSError:
            continue
        if head.startswith(b"#!") and marker in head:
            wrapper.write_text(f'#!/bin/sh\nexec {python} {shlex.quote(str(script))} "$@"\n')
            wrapper.chmod(0o755)


def ensure_venv(venv: Path, env: dict[str, str]) -> Path:
    """Create the run's virtualenv at `venv` unless a rank already did; return its python."""
    lock = venv.with_name(venv.name + ".lock")
    with file_lock(lock, on_wait=lambda: out.log(f"waiting for another rank to create the virtualenv {venv}")):
        if (venv / MARKER).exists():
            out.log(f"using the run's virtualenv {venv}")
            return python_of(venv)
        if venv.exists():  # an interrupted creation
            shutil.rmtree(venv)
        out.log(f"creating the run's virtualenv {venv} on top of {sys.prefix}")
        run_step(create_argv(venv), cwd=venv.parent, env=env, what="python -m venv")
        if _in_virtualenv():
            _link_parent(venv, env)
        python = python_of(venv)
        if _query(python, "import pip", env).returncode == 0:
            _write_pip_shims(venv)
        else:
            run_step([str(python), "-m", "ensurepip", "--default-pip"], cwd=venv, env=env, what="ensurepip")
        _wrap_console_scripts(venv)
        (venv / MARKER).write_text(f"{sys.executable}\n")
    return python


def use_current_environment(env: dict[str, str]) -> None:
    """Local backend: `python`, `torchrun`, `composer` in the command are the ones of the
    environment the launcher runs in, even when the user did not activate it."""
    if _in_virtualenv():
        activate(env, Path(sys.prefix))


def activate(env: dict[str, str], venv: Path) -> None:
    """What `source bin/activate` does, for the command's environment."""
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}".rstrip(":")
    env.pop("PYTHONHOME", None)
