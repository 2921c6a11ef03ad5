"""launcher: a Kubernetes-native launcher for LLM training runs.

The SDK's names (launcher.sdk: RunConfig, create_run, get_runs, ...) are served from
here on first use (PEP 562): importing this package imports nothing else, since the
in-container entrypoint (standard library only, Python 3.8) and `launcher --help`
import it too.
"""

__version__ = "0.1.0"


def __getattr__(name):
    if not name.startswith("__"):  # dunder probes (pickle, inspect) never load the SDK
        import importlib

        try:
            sdk = importlib.import_module("launcher.sdk")
        except ImportError:  # the pod's zipapp carries no SDK
            sdk = None
        if sdk is not None and name in sdk.EXPORTS:
            value = getattr(sdk, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'launcher' has no attribute {name!r}")


def __dir__():
    import importlib

    return sorted(set(globals()) | set(importlib.import_module("launcher.sdk").EXPORTS))
