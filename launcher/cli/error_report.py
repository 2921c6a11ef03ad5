"""One place that turns exceptions into what a user sees and the exit code."""

from __future__ import annotations

import os
import sys

import click

from launcher.errors import FILESYSTEM_ERRNOS, FileSystemError, LauncherError, internal_error_line


def _debug_requested(argv: list[str] | None) -> bool:
    args = sys.argv[1:] if argv is None else argv
    return "--debug" in args or os.environ.get("LAUNCHER_DEBUG", "") not in ("", "0", "false")


def run_cli(group: click.Group, argv: list[str] | None = None) -> int:
    debug = _debug_requested(argv)
    if not debug:
        return _run(group, argv, debug)
    from launcher import debug as counters  # lazy: its logging import would put --help over 3x `python -c pass`

    counters.enable()
    counters.reset()
    try:
        return _run(group, argv, debug)
    finally:  # also after `run --follow`'s SystemExit
        counters.log.debug(counters.summary())
        counters.disable()


def _run(group: click.Group, argv: list[str] | None, debug: bool) -> int:
    try:
        # Without standalone mode, click returns (not raises) the code of ctx.exit(n).
        result = group.main(args=argv, prog_name="launcher", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except LauncherError as e:
        return _show(e, debug)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return 2 if isinstance(e, click.UsageError | click.BadParameter) else e.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo("Exiting with Keyboard Interrupt", err=True)
        return 130
    except BrokenPipeError:
        # The reader went away (`launcher logs | head`); that is not an error.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except OSError as e:
        if e.errno not in FILESYSTEM_ERRNOS:
            return _internal(e, debug)
        # The filesystem boundary's last line: a path the launcher home, an output or an
        # input holds that no caller named (the OSError names it itself).
        return _show(FileSystemError.of(e), debug)
    except Exception as e:  # noqa: BLE001 - the last line of defence: no traceback for users
        return _internal(e, debug)


def _show(e: LauncherError, debug: bool) -> int:
    if debug:
        import traceback  # only --debug shows one

        traceback.print_exc()
    for warning in e.warnings:
        click.echo(f"! {warning}", err=True)
    click.echo(f"✗ {e.message}", err=True)
    if e.hint:
        click.echo(f"  {e.hint}", err=True)
    return e.exit_code


def _internal(e: BaseException, debug: bool) -> int:
    if debug:
        import traceback  # only --debug shows one

        traceback.print_exc()
    click.echo(f"✗ {internal_error_line(e)}", err=True)
    if not debug:
        click.echo("  run again with --debug to see the traceback", err=True)
    return 1
