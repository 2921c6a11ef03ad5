"""The rule on system packages both sides apply: a local run never installs apt packages on
the host unless its profile allows it. The local backend refuses such a spec before it
starts the run; the entrypoint refuses again when it would run apt-get."""

from __future__ import annotations

import shlex

# The local profile's setting (clusters.local in config.yaml) that allows apt_packages.
ALLOW_HOST_PACKAGES_SETTING = "allow_host_packages"


def host_packages_refusal(packages: list[str]) -> str:
    """Why the local backend does not install apt packages: a run must never change the
    host system on its own."""
    return (
        "apt_packages: the local backend does not install system packages on this machine "
        f"(it would run apt-get on the host). Install them yourself (sudo apt-get install "
        f"{shlex.join(packages)}) and drop apt_packages from the spec, or allow it with "
        f"`{ALLOW_HOST_PACKAGES_SETTING}: true` under clusters.local in $LAUNCHER_HOME/config.yaml"
    )
