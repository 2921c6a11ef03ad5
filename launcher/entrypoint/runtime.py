"""Inject mode: the entrypoint runs in an image we did not build.

An init container copied a self-contained Python with the launcher into the pod's
/launcher volume (LAUNCHER_RUNTIME says where), and the pod runs
`/launcher/python/bin/python3 -I -m launcher.entrypoint`. Our interpreter is isolated
(-I: no PYTHON* variables, no user site, no script directory on sys.path) and stays
ours: the command, git and pip are the image's own. So
- the command's environment is the image's: PATH without our bin directory, and no
  PYTHONHOME or PYTHONPATH pointing into the runtime (the image's own values stay, and
  LD_LIBRARY_PATH is never touched);
- pip_install and pip_packages run the image's python3 (or python), never ours;
- an image without bash cannot run the spec's command (`bash -c`): the run fails at
  once, saying so and naming the image, also in the pod's termination message, which
  `kubectl describe pod` shows.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

from launcher.entrypoint import log as out
from launcher.pod import contract

# Where the kubelet reads a container's termination message from (the pod spec's default).
TERMINATION_LOG = Path("/dev/termination-log")
TERMINATION_MESSAGE_BYTES = 4096  # what the kubelet keeps of it
PYTHON_NAMES = ("python3", "python")


def injected(env: dict[str, str]) -> bool:
    return bool(env.get(contract.RUNTIME))


def image_name(env: dict[str, str]) -> str:
    return env.get(contract.IMAGE) or "the run's image"


def _inside(value: str, root: Path) -> bool:
    try:
        return root in (resolved := Path(value).resolve()).parents or resolved == root
    except (OSError, ValueError):
        return False


def child_environment(env: dict[str, str]) -> None:
    """Remove what points into our runtime from the environment the command inherits."""
    roots = {Path(env[contract.RUNTIME]).resolve(), Path(sys.prefix).resolve()}
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and not any(_inside(p, r) for r in roots)]
    env["PATH"] = os.pathsep.join(parts)
    for var in ("PYTHONHOME", "PYTHONPATH"):
        if var in env and any(_inside(p, r) for p in env[var].split(os.pathsep) if p for r in roots):
            env.pop(var)


def image_python(env: dict[str, str]) -> str | None:
    """The image's own python3 (or python) on its PATH, or None."""
    for name in PYTHON_NAMES:
        found = shutil.which(name, path=env.get("PATH", ""))
        if found:
            return found
    return None


def fail_setup(env: dict[str, str], message: str) -> int:
    """Log a setup failure and leave it as the pod's termination message; return EXIT_SETUP."""
    out.log(f"error: {message}")
    if TERMINATION_LOG.exists():  # only inside a container: the kubelet creates it
        with contextlib.suppress(OSError):
            TERMINATION_LOG.write_text(message + "\n")
    return contract.EXIT_SETUP


def prepare(env: dict[str, str]) -> int:
    """Check the image can run the command and clean the command's environment; 0 or EXIT_SETUP."""
    child_environment(env)
    image = image_name(env)
    if not shutil.which("bash", path=env.get("PATH", "")):
        return fail_setup(
            env,
            f"image {image} has no bash on its PATH ({env.get('PATH') or 'empty'}): "
            "the run's command is run with `bash -c`, as on mcli; use an image with bash",
        )
    python = image_python(env)
    out.log(
        f"injected runtime {env[contract.RUNTIME]} in image {image}: the command runs with the image's "
        f"bash, and python is {python or 'not on its PATH'}"
    )
    return 0


def pip_python(env: dict[str, str]) -> str:
    """The python whose pip installs a run's packages: the image's in inject mode."""
    if not injected(env):
        return sys.executable
    python = image_python(env)
    if python is None:
        from launcher.entrypoint.steps import StepFailed

        raise StepFailed(f"image {image_name(env)} has no python3 or python on its PATH to run pip with")
    return python
