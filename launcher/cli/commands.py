"""The table of `launcher`'s subcommands (module, attribute, one-line help) and mcli's short
spellings: data, so that the entry point, the click group and the help cache share it."""

from __future__ import annotations

# name -> (module, attribute, one-line help shown by `launcher --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("launcher.cli.run", "run", "Submit a run from a run YAML, optionally following it."),
    "validate": ("launcher.cli.run", "validate", "Validate a run YAML offline and print the resolved spec."),
    "get": ("launcher.cli.get", "get", "List runs or secrets."),
    "describe": ("launcher.cli.describe", "describe", "Show a run's spec, statuses, ranks and reason, or a cluster."),
    "diff": ("launcher.cli.diff", "diff", "Compare two runs' specs as submitted (mcli's `diff run`)."),
    "logs": ("launcher.cli.logs", "logs", "Print or follow a run's logs."),
    "stop": ("launcher.cli.stop", "stop", "Stop runs, keeping their records."),
    "delete": ("launcher.cli.stop", "delete", "Delete runs and everything they created."),
    "update": ("launcher.cli.update", "update", "Change a running run's max_duration, priority or max_retries."),
    "watchdog": ("launcher.cli.watchdog", "watchdog", "Retry a running run's failures, or stop (mcli's watchdog)."),
    "exec": ("launcher.cli.exec", "exec_command", "Run a command in a rank of a run, with its environment."),
    "connect": ("launcher.cli.exec", "connect", "Open a shell in a rank of a run."),
    "interactive": ("launcher.cli.exec", "interactive", "Start a run that waits, and open a shell in it."),
    "port-forward": ("launcher.cli.exec", "port_forward", "Serve a rank's port on 127.0.0.1."),
    "secret": ("launcher.cli.secret", "secret", "Create, list and delete secrets."),
    "cluster": ("launcher.cli.cluster", "cluster", "Add, check, list and choose cluster profiles."),
    "data": ("launcher.cli.data", "data", "Prepare training data: tokenizers, synthetic text, MDS conversion."),
    "metrics": ("launcher.cli.metrics", "metrics", "Show a run's metrics as tables, plots and files."),
    "train": ("launcher.cli.train", "train", "Run the built-in MPT trainer on a config file."),
    "create": ("launcher.cli.aliases", "create", "mcli's `create secret <kind>`: the same as `secret create`."),
    "version": ("launcher.cli.aliases", "version", "Print the launcher's version."),
    "completion": ("launcher.cli.aliases", "completion", "Print a bash, zsh or fish completion script."),
    # The dashboard's command lives with the dashboard: neither cli nor ui imports the other.
    "ui": ("launcher.ui.command", "ui", "Serve a read-only web dashboard: runs, live logs, loss curves."),
    "util": ("launcher.cli.util", "util", "Show free and used GPUs per cluster profile and GPU type."),
    "config": ("launcher.cli.util", "config", "Show the current profile, the launcher home and versions."),
    "schema": ("launcher.cli.util", "schema", "Print the run YAML's JSON Schema, for editors."),
}

# mcli's short spellings -> the command they stand for.
ALIASES: dict[str, str] = {"g": "get", "r": "run", "log": "logs", "del": "delete"}
