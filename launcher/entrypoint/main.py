"""The program every rank of every run starts: `python -m launcher.entrypoint`.

It reads the submitted spec, prepares the working directory (integrations),
writes the parameters file, sets the environment (run, data, ranks), and runs
the user's command with bash, masking secret values in its output and
forwarding stop signals to the command's whole process group.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml

from launcher.entrypoint import contract
from launcher.entrypoint.log import log
from launcher.entrypoint.ranks import rank_env
from launcher.entrypoint.supervise import masker_from_env, run_command


def read_spec(path: str):
    from launcher.spec.models import RunSpec

    text = Path(path).read_text()
    data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    return RunSpec.model_validate(data)


def write_parameters(spec, config_dir: Path) -> Path:
    """Write parameters.yaml unless the backend already placed it (a read-only ConfigMap)."""
    target = config_dir / "parameters.yaml"
    content = yaml.safe_dump(spec.parameters_for_file(), sort_keys=False)
    if target.exists() and target.read_text() == content:
        return target
    config_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(".parameters.yaml.tmp")
    tmp.write_text(content)
    os.replace(tmp, target)
    return target


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    spec_path = os.environ.get(contract.SPEC)
    if not spec_path:
        log(f"error: {contract.SPEC} is not set; the backend must say where the submitted spec is")
        return contract.EXIT_SPEC
    try:
        spec = read_spec(spec_path)
    except Exception as e:  # noqa: BLE001 - any failure here is a bad spec file
        log(f"error: cannot read the submitted spec {spec_path}: {type(e).__name__}: {e}")
        return contract.EXIT_SPEC

    env = dict(os.environ)
    workdir = Path(env.get(contract.WORKDIR) or os.getcwd())
    masker = masker_from_env(env)

    if env.get(contract.BACKEND) == "local" and spec.image:
        log(f"note: the local backend ignores image {spec.image}; it runs with this machine's Python environment")

    try:
        from launcher.entrypoint.integrations import run_integrations
    except ImportError:
        run_integrations = None
    if spec.integrations:
        if run_integrations is None:
            log("error: this launcher build cannot run integrations")
            return contract.EXIT_INTEGRATION
        code = run_integrations(spec, workdir, env, masker)
        if code:
            return code

    try:
        config_dir = Path(env.get(contract.CONFIG_DIR) or contract.DEFAULT_CONFIG_DIR)
        params = write_parameters(spec, config_dir)
    except OSError as e:
        log(f"error: cannot write the parameters file: {e}")
        return contract.EXIT_SETUP
    log(f"parameters written to {params}")

    env.update(spec.env_for_run(spec.name))
    env["PARAMETERS"] = str(params)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(rank_env(spec, env))
    log(
        f"run {spec.name}: node rank {env['NODE_RANK']} of {env['PET_NNODES']}, "
        f"{env['LOCAL_WORLD_SIZE']} process(es) per node, master {env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    )

    try:
        from launcher.entrypoint.rendezvous import wait_for_rank0
    except ImportError:
        wait_for_rank0 = None
    if wait_for_rank0 is not None and int(env["NODE_RANK"]) > 0:
        code = wait_for_rank0(env)
        if code:
            return code

    log(f"running the command in {workdir}")
    code = run_command(spec.command, cwd=workdir, env=env, masker=masker)
    log(f"command exited with code {code} after {time.monotonic() - started:.1f}s")
    return code


if __name__ == "__main__":
    sys.exit(main())
