"""The pip_packages and apt_packages integrations, and the pip runs of git_repo's
pip_install. Package names go to pip and apt-get after `--`, as arguments: a
name is never read as an option nor seen by a shell."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from launcher.entrypoint import log as out
from launcher.entrypoint.steps import StepFailed, run_step
from launcher.pod import contract
from launcher.pod.packages import host_packages_refusal


def pip_env(env: dict[str, str]) -> dict[str, str]:
    """pip's environment: no prompts, no progress bars in the log, no version nag."""
    out_env = dict(env)
    out_env.setdefault("PIP_NO_INPUT", "1")
    out_env.setdefault("PIP_PROGRESS_BAR", "off")
    out_env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return out_env


def pip_install_args(raw: str) -> list[str]:
    """git_repo's pip_install: the arguments to `pip install`, split like a shell
    would split them but never run by one (no globbing, no $VAR expansion)."""
    try:
        args = shlex.split(raw)
    except ValueError as e:
        raise StepFailed(f"pip_install {raw!r} cannot be split into arguments: {e}") from None
    if not args:
        raise StepFailed("pip_install is empty")
    return args


def pip_install(python: Path | str, args: list[str], *, cwd: Path, env: dict[str, str]) -> None:
    run_step([str(python), "-m", "pip", "install", *args], cwd=cwd, env=pip_env(env), what="pip install")


def pip_packages_args(integ) -> list[str]:
    args = ["--upgrade"] if integ.upgrade else []
    if integ.index_url:
        args += ["--index-url", integ.index_url]
    return [*args, "--", *integ.packages]


def apt_install(integ, *, cwd: Path, env: dict[str, str], local: bool) -> None:
    if not integ.packages:
        out.log("apt_packages: no packages listed")
        return
    if local and env.get(contract.ALLOW_HOST_PACKAGES) != "1":
        raise StepFailed(host_packages_refusal(integ.packages))
    if os.geteuid() != 0:
        if local:
            raise StepFailed(
                "the local backend installs apt packages only when it runs as root; install them yourself "
                f"(sudo apt-get install {shlex.join(integ.packages)}) and drop apt_packages from the spec"
            )
        raise StepFailed(
            f"apt_packages needs root in the container, which runs as uid {os.geteuid()}; "
            "use an image that runs as root, or install the packages in the image"
        )
    apt_env = {**env, "DEBIAN_FRONTEND": "noninteractive"}
    run_step(["apt-get", "update"], cwd=cwd, env=apt_env, what="apt-get update")
    run_step(
        ["apt-get", "install", "-y", "--no-install-recommends", "--", *integ.packages],
        cwd=cwd,
        env=apt_env,
        what="apt-get install",
    )
