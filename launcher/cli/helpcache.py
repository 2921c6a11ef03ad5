"""`launcher --help` from a file, as click rendered it the last time.

The top-level help is what a user types most often without a task, and importing click
alone costs as much as starting Python (about 23 ms of a 50 ms `--help`). So the text click
renders (launcher.cli.group: one source of truth) is kept in the user's cache directory
with a key of everything it depends on: the files that define it (this package's command
table and group, click's formatter: their paths name the environment), the Python version
and the width click wraps to.
Any change, or any problem reading the file, renders it with click again; this module
imports nothing beyond the standard library's cheapest modules.
"""

from __future__ import annotations

import os
import sys

HELP_ARGS = (["--help"], ["-h"])
FILE_NAME = "help.txt"


def cache_path() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "launcher", FILE_NAME)


def _sources() -> list[str]:
    """The files whose contents decide the help text."""
    from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))
    files = [os.path.join(here, "commands.py"), os.path.join(here, "group.py")]
    spec = PathFinder.find_spec("click")
    if spec is not None and spec.origin:
        click_dir = os.path.dirname(spec.origin)
        files += [os.path.join(click_dir, name) for name in ("core.py", "formatting.py", "decorators.py")]
    return files


def _width() -> int:
    import shutil

    # click's HelpFormatter wraps at min(terminal columns, 80) - 2 (max_width 80).
    return min(shutil.get_terminal_size().columns, 80)


def cache_key() -> str:
    stamps = []
    for path in _sources():
        st = os.stat(path)
        stamps.append(f"{path}:{st.st_mtime_ns}:{st.st_size}")
    return "|".join([sys.version.split()[0], f"width={_width()}", *stamps])


def render() -> str:
    """The top-level help exactly as click prints it for `launcher --help`."""
    from launcher.cli.group import cli

    ctx = cli.context_class(cli, info_name="launcher", **cli.context_settings)
    return cli.get_help(ctx) + "\n"


def print_cached(argv: list[str]) -> bool:
    """Print the top-level help and return True where argv asks for it (`--help`, `-h`),
    from the cache when it is current, else rendered now (and kept). False: anything else."""
    if list(argv) not in HELP_ARGS:
        return False
    path = cache_path()
    try:
        key = cache_key()
    except OSError:
        return False  # a source we cannot stat: let click answer
    try:
        with open(path, encoding="utf-8") as f:
            first, text = f.readline(), f.read()
        if first.rstrip("\n") == key and text:
            sys.stdout.write(text)
            sys.stdout.flush()
            return True
    except (OSError, UnicodeDecodeError):
        pass
    text = render()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(key + "\n" + text)
        os.replace(tmp, path)  # a reader sees the old file or the new one, never half
    except OSError:
        pass  # a read-only home still gets its help, rendered each time
    sys.stdout.write(text)
    sys.stdout.flush()
    return True
