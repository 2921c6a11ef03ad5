"""How long a tracker, a Databricks workspace and a cluster on a refused port take to fail
(goal: under 5 s each; before issue 21, MLflow took 249 s and a Volume 38 s).

    .venv/bin/python bench/bench_refused_ports.py

Each is timed twice: the whole command in a fresh process (imports included: mlflow and
streaming take seconds), and the outside call alone, in this process after the imports.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(env: dict, cwd: Path, *args: str) -> tuple[float, int, str]:
    began = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "launcher", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=600)
    last = (r.stderr.strip().splitlines() or [""])[0]
    return time.perf_counter() - began, r.returncode, last


def call(fn) -> float:
    began = time.perf_counter()
    try:
        fn()
    except Exception:  # noqa: BLE001 - the failure is what is timed
        pass
    return time.perf_counter() - began


def main() -> None:
    from tests.metrics.logdata import step_line

    uri = f"http://127.0.0.1:{refused_port()}"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, work = root / "home", root / "work"
        home.mkdir()
        work.mkdir()
        env = {**os.environ, "LAUNCHER_HOME": str(home), "PYTHONPATH": str(REPO),
               "DATABRICKS_HOST": uri, "DATABRICKS_TOKEN": "dapi-bench"}
        (work / "log.txt").write_text("\n".join(step_line(s) for s in range(1, 4)) + "\n")
        (work / "m.yaml").write_text("name: m\ncommand: cat log.txt\n")
        subprocess.run([sys.executable, "-m", "launcher", "run", "-f", "m.yaml", "--follow"], cwd=work, env=env,
                       capture_output=True, check=True)
        (work / "in.jsonl").write_text('{"text": "a b c"}\n')
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "down",
            "clusters": [{"name": "down", "cluster": {"server": uri}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "down", "context": {"cluster": "down", "user": "u"}}]}))
        (home / "config.yaml").write_text(yaml.safe_dump({"clusters": {"down": {
            "backend": "kubernetes", "kubeconfig": str(kubeconfig), "image": "ghcr.io/example/launcher:bench"}}}))
        (work / "k.yaml").write_text("name: k\nimage: ghcr.io/example/launcher:bench\ncommand: echo hi\n")
        commands = {
            "metrics --to mlflow": ["metrics", "m", "--to", "mlflow", uri],
            "data convert --out dbfs:/Volumes": ["data", "convert", "in.jsonl", "--out", "dbfs:/Volumes/c/s/v/ds",
                                                 "--tokenizer", "unused", "--concat-tokens", "8"],
            "run --cluster (kubernetes)": ["run", "-f", "k.yaml", "--cluster", "down"],
        }
        for what, args in commands.items():
            took, code, line = command(env, work, *args)
            print(f"{what:<34} {took:6.2f} s (whole command)  exit {code}: {line}")

    from mlflow.tracking import MlflowClient

    from launcher.metrics.export import bound_mlflow_requests
    from launcher.storage import Credentials, open_store

    bound_mlflow_requests()
    print(f"{'MLflow get_experiment_by_name':<34} {call(lambda: MlflowClient(uri).get_experiment_by_name('x')):6.2f} s")
    creds = Credentials({"DATABRICKS_HOST": uri, "DATABRICKS_TOKEN": "dapi-bench"})
    print(f"{'Databricks Volume exists()':<34} {call(lambda: open_store('dbfs:/Volumes/c/s/v/ds', creds).exists()):6.2f} s")


if __name__ == "__main__":
    main()
