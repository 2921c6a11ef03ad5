"""The launcher's Python SDK, with mcli's names: what notebooks and scripts call, and the
layer the CLI is built on (the CLI formats what these functions return).

    from launcher import RunConfig, create_run, wait_for_run_status, get_run_metrics

Every name is loaded on first use (PEP 562), so `import launcher` stays free of pydantic,
the backends and their clients. The functions never print and never exit: they return
records and raise the typed errors of launcher.sdk.exceptions.
"""

import importlib

# name -> the module of launcher.sdk that defines it (launcher/__init__.py serves the same names).
EXPORTS = {
    "RunConfig": "config",
    "Run": "runs",
    "RunStatus": "runs",
    "RunList": "runs",
    "LogLine": "logs",
    "create_run": "runs",
    "get_run": "runs",
    "get_runs": "runs",
    "stop_run": "runs",
    "stop_runs": "runs",
    "delete_run": "runs",
    "delete_runs": "runs",
    "update_run": "runs",
    "wait_for_run_status": "runs",
    "follow_run_logs": "logs",
    "get_run_logs": "logs",
    "create_secret": "secrets",
    "get_secrets": "secrets",
    "delete_secrets": "secrets",
    "save_secret": "secrets",
    "get_clusters": "clusters",
    "Cluster": "clusters",
    "get_run_metrics": "metrics",
    "exec_in_run": "attach",
    "port_forward": "attach",
    "create_interactive_run": "attach",
    "MetricPoint": "metrics",
    "LauncherError": "exceptions",
    "RunNotFound": "exceptions",
    "ValidationError": "exceptions",
    "ClusterUnreachable": "exceptions",
    "NotSupported": "exceptions",
    "WaitTimeout": "exceptions",
}

__all__ = sorted(EXPORTS)


def __getattr__(name):
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'launcher.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"launcher.sdk.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))
