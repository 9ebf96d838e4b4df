"""The one error boundary: every command runs inside it, and it alone chooses exit codes."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

import typer

from specs.errors import ArgusError

EXIT_OK, EXIT_ERROR, EXIT_CHANGES, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def run_command(body: Callable[[], int], debug: bool) -> int:
    """User errors exit 1 with their message; anything else is a bug (3); ^C is 130."""
    try:
        return body()
    except ArgusError as err:
        if debug:
            traceback.print_exc()
        typer.echo(typer.style("Error: ", fg="red", bold=True) + str(err), err=True)
        return err.exit_code
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except typer.Exit:
        raise
    except Exception as err:  # noqa: BLE001 - this is the boundary
        if debug:
            traceback.print_exc()
        else:
            typer.echo(f"argus hit a bug: {type(err).__name__}: {err}\n"
                       "Run again with --debug for the traceback, and report it.", err=True)
        return EXIT_BUG


def is_tty() -> bool:
    return sys.stdout.isatty()
