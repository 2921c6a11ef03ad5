"""The spec's integrations, run in YAML order before the command.

A failed step stops the run: the log names the integration and the program,
shows the program's last output lines, and the entrypoint exits with
contract.EXIT_INTEGRATION.

On the local backend the ranks of a run share the machine, its working directory
and its virtualenv, so the integrations run once per run: the first rank to take
the lock in the config directory runs them and leaves a marker; the others wait,
then reuse the result. A failed attempt leaves no marker, so each rank's log
tells the failure in full, and a retry of the run tries again.
"""

from __future__ import annotations

from pathlib import Path

from launcher.entrypoint import log as out
from launcher.entrypoint import runtime
from launcher.entrypoint.code import CodeRefused, lay_code
from launcher.entrypoint.git import clone, url_password
from launcher.entrypoint.locks import file_lock
from launcher.entrypoint.packages import apt_install, pip_install, pip_install_args, pip_packages_args
from launcher.entrypoint.steps import StepFailed
from launcher.entrypoint.venv import activate, ensure_venv
from launcher.pod import contract
from launcher.secrets.mask import Masker

DONE_MARKER = ".integrations-done"
LOCK_NAME = ".integrations.lock"


# Each integration is the plan's record of it (launcher.pod.plan): its fields as
# attributes, told apart by integration_type.
GIT_REPO, PIP_PACKAGES, APT_PACKAGES = "git_repo", "pip_packages", "apt_packages"
WANDB, MLFLOW, COMET_ML = "wandb", "mlflow", "comet_ml"


def needs_pip(plan) -> bool:
    return any(
        i.integration_type == PIP_PACKAGES or (i.integration_type == GIT_REPO and i.pip_install)
        for i in plan.integrations
    )


def describe(integ) -> str:
    if integ.integration_type == GIT_REPO:
        return f"git_repo {integ.git_repo}"
    if integ.integration_type in (PIP_PACKAGES, APT_PACKAGES):
        return f"{integ.integration_type} ({', '.join(integ.packages)})"
    return integ.integration_type


class _Runner:
    def __init__(self, workdir: Path, env: dict[str, str], python: Path | str, code: dict | None = None):
        self.workdir = workdir
        self.env = env
        self.python = python
        self.local = contract.on_host(env)
        self.code = code
        """The code snapshot still to lay: over the first clone, else over the working directory."""

    def run(self, integ) -> None:
        kind = integ.integration_type
        if kind == GIT_REPO:
            target, genv = clone(integ, self.workdir, self.env)
            if self.code is not None:  # the user's uncommitted tree over the repository, then its install
                lay_code(self.code, target, self.env)
                self.code = None
            if integ.pip_install:
                out.log(f"git_repo: pip install {integ.pip_install} in {target}")
                pip_install(self.python, pip_install_args(integ.pip_install), cwd=target, env=genv)
        elif kind == PIP_PACKAGES:
            if integ.packages:
                pip_install(self.python, pip_packages_args(integ), cwd=self.workdir, env=self.env)
        elif kind == APT_PACKAGES:
            apt_install(integ, cwd=self.workdir, env=self.env, local=self.local)
        elif kind == WANDB:
            # Its settings become WANDB_* variables (RunSpec.env_for_run, in the plan's env); the key is a secret.
            if not self.env.get("WANDB_API_KEY"):
                out.log("note: wandb: WANDB_API_KEY is not set; add a secret holding it to log to W&B")
        elif kind in (MLFLOW, COMET_ML):
            pass  # environment only (RunSpec.env_for_run), as in mcli
        else:  # a new integration type in the spec models that this entrypoint does not know
            raise StepFailed(f"this launcher cannot run integrations of type {integ.integration_type!r}")

    def run_all(self, integrations) -> None:
        if self.code is not None and not any(i.integration_type == GIT_REPO for i in integrations):
            lay_code(self.code, self.workdir, self.env)
            self.code = None
        n = len(integrations)
        for i, integ in enumerate(integrations, 1):
            label = f"integration {i}/{n}: {describe(integ)}"
            out.log(label)
            try:
                self.run(integ)
            except StepFailed as e:
                e.step = label
                raise


def _report(e: StepFailed) -> None:
    out.log(f"error: {e.step}: {e.message}")
    if e.tail:
        out.log("the last lines of its output:\n" + "\n".join(f"  | {line}" for line in e.tail))
    out.log(f"the run stops here: an integration failed (exit code {contract.EXIT_INTEGRATION})")


def run_integrations(plan, workdir: Path, env: dict[str, str]) -> int:
    """Lay the plan's code snapshot and run its integrations; return 0, contract.EXIT_INTEGRATION,
    or contract.EXIT_SETUP for a snapshot that cannot be laid. When they use the run's
    virtualenv, `env` is changed so that the command runs in it. Raises supervise.Stopped on
    a stop signal."""
    if not plan.integrations and not plan.code:
        return 0
    passwords = [url_password(i.git_repo) for i in plan.integrations if i.integration_type == GIT_REPO]
    out.add_masker(Masker([p for p in passwords if p]))
    venv = Path(env[contract.VENV]) if env.get(contract.VENV) and needs_pip(plan) else None
    try:
        if contract.on_host(env):
            _once_per_run(plan, workdir, env, venv)
        else:
            _run(plan, workdir, env, venv)
    except StepFailed as e:
        e.step = e.step or "integrations"
        _report(e)
        return contract.EXIT_INTEGRATION
    except OSError as e:  # the working directory, the virtualenv or the lock cannot be written
        _report(StepFailed(f"{e.strerror or e}: {e.filename or ''}".rstrip(": "), step="integrations"))
        return contract.EXIT_INTEGRATION
    except CodeRefused as e:
        out.log(f"error: code: {e}")
        out.log(f"the run stops here: the code snapshot was not laid (exit code {contract.EXIT_SETUP})")
        return contract.EXIT_SETUP
    if venv is not None:
        activate(env, venv)
        out.log(f"the command runs in the virtualenv {venv}")
    return 0


def _run(plan, workdir: Path, env: dict[str, str], venv: Path | None) -> None:
    # pip runs under the image's python when the runtime is injected, ours otherwise.
    python: Path | str = runtime.pip_python(env) if needs_pip(plan) else ""
    if venv is not None:
        try:
            python = ensure_venv(venv, env)
        except StepFailed as e:
            e.step = "the run's virtualenv"
            raise
    _Runner(workdir, env, python, plan.code).run_all(plan.integrations)


def _once_per_run(plan, workdir: Path, env: dict[str, str], venv: Path | None) -> None:
    shared = Path(env.get(contract.CONFIG_DIR) or contract.DEFAULT_CONFIG_DIR)
    done = shared / DONE_MARKER
    waiting = lambda: out.log("another rank of this run is running the integrations: waiting for it")  # noqa: E731
    with file_lock(shared / LOCK_NAME, on_wait=waiting):
        if done.exists():
            out.log(f"integrations: already done for this run ({done.read_text().strip()}): reusing them")
            return
        _run(plan, workdir, env, venv)
        done.write_text(f"by node rank {env.get('NODE_RANK', '0')}\n")
