"""The driver of a launcher run on Databricks: the python file of the run's spark_python_task.

It is uploaded as it is, beside the run's plan (plan.json), the entrypoint's zipapp
(entrypoint.pyz) and its settings (driver.json), and runs on the cluster's driver with the
runtime's Python: the standard library and pyspark only, nothing of the launcher installed.
Its one argument is the folder those files are in (/Workspace/<workspace_dir>/<run>).

One process (a run of at most one GPU): the entrypoint runs on the driver as node rank 0.
More: TorchDistributor starts them, one per GPU (per node on CPU), and each runs the
entrypoint. TorchDistributor makes every process a node of its own: torchrun runs with
--nproc_per_node=1, so each sees RANK=i, LOCAL_RANK=0 and WORLD_SIZE=N. The entrypoint is
told the same (NODE_RANK=i of N nodes, 1 GPU each), so that the rank environment it gives
the command (WORLD_SIZE, LOCAL_WORLD_SIZE=1, NODE_RANK, MASTER_ADDR/PORT, the PET_ variables)
is what composer and torchrun expect of that layout. With local_mode (one node) every
process is on the driver: each gets the GPU at its LOCAL_RANK as CUDA_VISIBLE_DEVICES, so its
cuda:0 is its own. The command's torch.distributed meets at torchrun's agent store
(TORCHELASTIC_USE_AGENT_STORE), which the environment carries through.

Each process's lines go to the driver's stdout prefixed `[rank N] ` (cluster log delivery
keeps one stdout per driver); the launcher's log reader splits them by rank again.
"""

import json
import os
import subprocess
import sys
import tempfile

RANK_PREFIX = "[rank %d] "


def entrypoint_env(run_dir, settings, node_rank, nodes, gpus_per_node):
    env = dict(os.environ)
    config = tempfile.mkdtemp(prefix="launcher-config-")
    for path, name in settings.get("secret_files", {}).items():  # file secrets, from the scope's env
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(env.pop(name, ""))
    env.update(
        {
            "LAUNCHER_PLAN": os.path.join(run_dir, "plan.json"),
            "LAUNCHER_BACKEND": "databricks",
            "LAUNCHER_CONFIG_DIR": config,
            "LAUNCHER_CACHE_DIR": os.path.join(config, "cache"),
            "LAUNCHER_ATTEMPT": str(settings.get("attempt", 1)),
            "NODE_RANK": str(node_rank),
            "LAUNCHER_NODES": str(nodes),
            "LAUNCHER_GPUS_PER_NODE": str(gpus_per_node),
            "LAUNCHER_MASK_ENV": ",".join(settings.get("mask_env", [])),
            "LAUNCHER_MASK_FILES": os.pathsep.join(settings.get("secret_files", {})),
        }
    )
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    return env


def run_entrypoint(run_dir, env, prefix):
    argv = [sys.executable, "-I", "-S", os.path.join(run_dir, "entrypoint.pyz")]
    if not prefix:
        return subprocess.call(argv, env=env)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        sys.stdout.write(prefix + line.decode("utf-8", "replace"))
        sys.stdout.flush()
    return proc.wait()


def rank_main(run_dir, settings):
    """One TorchDistributor process: the entrypoint as node RANK of WORLD_SIZE, one GPU each."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gpus = 1 if settings["use_gpu"] else 0
    if gpus and settings["local_mode"]:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        devices = visible.split(",") if visible else [str(i) for i in range(world)]
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[int(os.environ.get("LOCAL_RANK", "0"))]
    code = run_entrypoint(run_dir, entrypoint_env(run_dir, settings, rank, world, gpus), RANK_PREFIX % rank)
    if code:
        raise SystemExit(code)
    return code


def main(argv):
    run_dir = argv[1]
    with open(os.path.join(run_dir, "driver.json")) as f:
        settings = json.load(f)
    processes = settings["processes"]
    if processes <= 1:
        gpus = 1 if settings["use_gpu"] else 0
        return run_entrypoint(run_dir, entrypoint_env(run_dir, settings, 0, 1, gpus), "")
    from pyspark.ml.torch.distributor import TorchDistributor
    from pyspark.sql import SparkSession

    SparkSession.builder.getOrCreate()  # the cluster's session; a local one off Databricks
    distributor = TorchDistributor(
        num_processes=processes, local_mode=settings["local_mode"], use_gpu=settings["use_gpu"]
    )
    try:
        distributor.run(rank_main, run_dir, settings)
    except RuntimeError as e:  # a process failed: TorchDistributor says which, with its last lines
        lines = str(e).strip().splitlines()
        print("[launcher] error: %s" % (lines[-1] if lines else "a process failed"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
