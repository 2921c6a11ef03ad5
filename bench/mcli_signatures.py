"""Regenerate tests/mcli/mcli_0_8_3_signatures.json: the public signatures of mosaicml-cli
0.8.3 that launcher.mcli copies, read with `inspect` from mcli itself.

    python bench/mcli_signatures.py                 # downloads the wheel from PyPI
    python bench/mcli_signatures.py --wheel PATH    # or reads a wheel you have

It builds a throw-away venv in a temporary directory, installs the wheel with its
dependencies there (0.8.3 needs gql>=4, which the train extra's mcli 0.7.5 does not allow,
so the project's own venv cannot import it), runs itself inside that venv with `--dump`,
and writes the table. tests/mcli/test_signatures.py compares launcher.mcli with it,
parameter by parameter; SCOPE below is what it covers.

Each entry: a function's parameters as [name, kind, default] (default "<required>" where
there is none, else its repr); a class's `init` parameters, the `methods` and
`properties` SCOPE names, an Enum's `members`, a TypedDict's `keys` and `total`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

VERSION = "0.8.3"
TABLE = Path(__file__).resolve().parents[1] / "tests" / "mcli" / f"mcli_{VERSION.replace('.', '_')}_signatures.json"

# name -> where mcli defines it, and for a class what of it to record.
FUNCTIONS = {
    # runs
    "create_run": "mcli",
    "create_interactive_run": "mcli",
    "get_run": "mcli",
    "get_runs": "mcli",
    "stop_run": "mcli",
    "stop_runs": "mcli",
    "delete_run": "mcli",
    "delete_runs": "mcli",
    "update_run": "mcli",
    "update_run_metadata": "mcli",
    "start_run": "mcli",
    "start_runs": "mcli",
    "wait_for_run_status": "mcli",
    "watch_run_status": "mcli",
    "get_run_logs": "mcli",
    "follow_run_logs": "mcli",
    # secrets, clusters
    "create_secret": "mcli",
    "get_secrets": "mcli",
    "delete_secrets": "mcli",
    "get_clusters": "mcli",
    "get_cluster": "mcli",
    # the platform's alone: launcher.mcli raises NotSupported
    "initialize": "mcli",
    "set_api_key": "mcli",
    "create_inference_deployment": "mcli",
    "create_default_deployment": "mcli",
    "get_inference_deployment": "mcli",
    "get_inference_deployments": "mcli",
    "get_inference_deployment_logs": "mcli",
    "update_inference_deployment": "mcli",
    "update_inference_deployments": "mcli",
    "delete_inference_deployment": "mcli",
    "delete_inference_deployments": "mcli",
    "ping": "mcli",
    "predict": "mcli",
}
_SECRET = {"module": "mcli.objects.secrets"}
CLASSES = {
    "RunConfig": {"module": "mcli", "methods": ["from_file", "from_dict", "to_file", "empty"]},
    "FinalRunConfig": {"module": "mcli", "methods": ["finalize_config"]},
    "SchedulingConfig": {"module": "mcli"},
    "ComputeConfig": {"module": "mcli"},
    "RunStatus": {"module": "mcli", "methods": ["before", "after", "is_terminal", "from_string"]},
    "Run": {
        "module": "mcli",
        "methods": ["clone", "refresh", "stop", "delete", "update", "update_metadata", "get_gpu_hours"],
        "properties": [
            "started_at",
            "completed_at",
            "display_name",
            "cumulative_pending_time",
            "cumulative_running_time",
            "resumption_count",
            "max_duration_seconds",
        ],
    },
    "Node": {"module": "mcli.api.model.run"},
    "Resumption": {"module": "mcli.api.model.run"},
    "RunLifecycle": {"module": "mcli.api.model.run"},
    "RunType": {"module": "mcli.api.model.run"},
    "FormattedRunEvent": {"module": "mcli.api.model.run_event"},
    "ClusterDetails": {"module": "mcli"},
    "MCLIException": {"module": "mcli.api.exceptions"},
    "MAPIException": {"module": "mcli"},
    "RunConfigException": {"module": "mcli.api.exceptions"},
    "MultiMAPIException": {"module": "mcli.api.exceptions"},
    "MCLIConfigError": {"module": "mcli.api.exceptions"},
    "MCLIRunConfigValidationError": {"module": "mcli.api.exceptions"},
    "Secret": {"module": "mcli.models"},
    "SecretType": {"module": "mcli.models"},
    "MCLIGenericSecret": _SECRET,
    "MCLIEnvVarSecret": _SECRET,
    "HuggingFaceSecret": _SECRET,
    "MCLIMountedSecret": _SECRET,
    "MCLISSHSecret": _SECRET,
    "MCLIGitSSHSecret": _SECRET,
    "MCLISFTPSSHSecret": _SECRET,
    "MCLIS3Secret": _SECRET,
    "MCLIGCPSecret": _SECRET,
    "MCLIOCISecret": _SECRET,
    "MCLIDatabricksSecret": _SECRET,
    "MCLIDockerRegistrySecret": _SECRET,
}


def parameters(obj) -> list[list[str]] | None:
    """[name, kind, default] of each parameter of obj's signature; None where it has none."""
    import inspect

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [
        [p.name, p.kind.name, "<required>" if p.default is inspect.Parameter.empty else repr(p.default)]
        for p in sig.parameters.values()
    ]


def describe_class(cls, methods: list[str], properties: list[str]) -> dict:
    import enum

    out: dict = {"kind": "class"}
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        out["members"] = {m.name: m.value for m in cls}
    elif isinstance(cls, type) and issubclass(cls, dict) and hasattr(cls, "__required_keys__"):  # a TypedDict
        out["keys"] = sorted(cls.__annotations__)
        out["total"] = cls.__total__
    else:
        own = cls.__dict__.get("__init__")
        # An exception that does not define __init__ takes whatever Exception takes.
        out["init"] = parameters(cls) if own is not None or not issubclass(cls, BaseException) else None
    if methods:
        out["methods"] = {m: parameters(getattr(cls, m)) for m in methods}
    if properties:
        out["properties"] = sorted(properties)
    return out


def dump() -> dict:
    """The table, read from the mcli this interpreter imports."""
    import importlib

    import mcli

    table: dict = {"version": mcli.__version__, "functions": {}, "classes": {}}
    for name, module in FUNCTIONS.items():
        table["functions"][name] = parameters(getattr(importlib.import_module(module), name))
    for name, what in CLASSES.items():
        cls = getattr(importlib.import_module(what["module"]), name)
        table["classes"][name] = describe_class(cls, what.get("methods", []), what.get("properties", []))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", help=f"a mosaicml_cli-{VERSION} wheel (default: download it from PyPI)")
    parser.add_argument("--dump", action="store_true", help="print the table of the mcli importable here")
    parser.add_argument("--out", default=str(TABLE), help="where to write the table")
    args = parser.parse_args()
    if args.dump:
        json.dump(dump(), sys.stdout, indent=1, sort_keys=True)
        return
    with tempfile.TemporaryDirectory(prefix="mcli-signatures-") as tmp:
        wheel = args.wheel
        if wheel is None:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", f"mosaicml-cli=={VERSION}", "--no-deps", "-d", tmp],
                check=True,
            )
            wheel = str(next(Path(tmp).glob("mosaicml_cli-*.whl")))
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        subprocess.run([str(python), "-m", "pip", "install", "-q", wheel], check=True)
        done = subprocess.run(
            [str(python), __file__, "--dump"], check=True, capture_output=True, text=True, cwd=tmp
        )
    table = json.loads(done.stdout)
    if table["version"] != VERSION:
        sys.exit(f"the wheel is mosaicml-cli {table['version']}, not {VERSION}")
    Path(args.out).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(table['functions'])} functions, {len(table['classes'])} classes")


if __name__ == "__main__":
    main()
