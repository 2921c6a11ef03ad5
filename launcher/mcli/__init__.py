"""mcli's Python SDK, signature for signature (mosaicml-cli 0.8.3), on the launcher's own SDK:
an mcli notebook or script runs with one changed import.

    import launcher.mcli as mcli          # was: import mcli
    from launcher.mcli import RunConfig, create_run, wait_for_run_status

Functions take mcli's arguments (names, kinds, defaults; `timeout=` and `future=`) and
return mcli's shapes: launcher.mcli.Run (its `config` a RunConfig), log text as str,
mcli's Secret objects. Errors are mcli's MAPIException family, the launcher's error as
__cause__. What only the MosaicML platform has (API keys, organizations, inference
deployments) raises NotSupported saying why. New code uses the launcher's own SDK
(`launcher.create_run`, ...). Every name is loaded on first use (PEP 562).
"""

import importlib

# name -> the module of launcher.mcli that defines it.
EXPORTS = {
    # runs
    **dict.fromkeys(
        [
            "create_run",
            "create_interactive_run",
            "get_run",
            "get_runs",
            "stop_run",
            "stop_runs",
            "delete_run",
            "delete_runs",
            "update_run",
            "update_run_metadata",
            "start_run",
            "start_runs",
            "wait_for_run_status",
            "watch_run_status",
            "get_run_logs",
            "follow_run_logs",
        ],
        "runs",
    ),
    # secrets, clusters
    **dict.fromkeys(["create_secret", "get_secrets", "delete_secrets", "get_clusters", "get_cluster"], "resources"),
    # the platform's alone
    **dict.fromkeys(
        [
            "initialize",
            "set_api_key",
            "create_inference_deployment",
            "create_default_deployment",
            "get_inference_deployment",
            "get_inference_deployments",
            "get_inference_deployment_logs",
            "update_inference_deployment",
            "update_inference_deployments",
            "delete_inference_deployment",
            "delete_inference_deployments",
            "ping",
            "predict",
        ],
        "platform",
    ),
    # classes
    **dict.fromkeys(["RunConfig", "FinalRunConfig", "SchedulingConfig", "ComputeConfig"], "config"),
    "RunStatus": "status",
    **dict.fromkeys(["Run", "Node", "Resumption", "RunLifecycle", "RunType", "FormattedRunEvent"], "runs"),
    "ClusterDetails": "clusters",
    **dict.fromkeys(
        [
            "MCLIException",
            "MAPIException",
            "RunConfigException",
            "MultiMAPIException",
            "MCLIConfigError",
            "MCLIRunConfigValidationError",
            "NotSupported",
        ],
        "exceptions",
    ),
    **dict.fromkeys(
        [
            "Secret",
            "SecretType",
            "MCLIGenericSecret",
            "MCLIEnvVarSecret",
            "HuggingFaceSecret",
            "MCLIMountedSecret",
            "MCLISSHSecret",
            "MCLIGitSSHSecret",
            "MCLISFTPSSHSecret",
            "MCLIS3Secret",
            "MCLIGCPSecret",
            "MCLIOCISecret",
            "MCLIDatabricksSecret",
            "MCLIDockerRegistrySecret",
        ],
        "secrets",
    ),
}

__all__ = sorted(EXPORTS)


def __getattr__(name):
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'launcher.mcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"launcher.mcli.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))
