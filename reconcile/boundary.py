"""The one error boundary: main() runs the whole dispatch inside it, and it alone chooses exit codes.

Commands return an int and raise; none of them catches an error to pick a code (pre-commit's
`main` shape). `--debug` reaches the boundary through typer's context object, not a global.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import typer
from typer.exceptions import TyperException

from specs.errors import ArgusError

EXIT_OK, EXIT_ERROR, EXIT_CHANGES, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class Invocation:
    """Options of one whole run of argus, set by the root callback as typer's ctx.obj."""

    debug: bool = False
    """--debug: show the traceback of any error."""


def guarded(dispatch: Callable[[Invocation], object]) -> int:
    """Run the dispatch: user errors exit with their code (1) and message, usage errors 1, ^C 130,
    anything else is a bug (3). A command's int result is the exit code."""
    invocation = Invocation()
    try:
        result = dispatch(invocation)
    except typer.Exit as done:  # --help, --version
        return done.exit_code
    except (KeyboardInterrupt, typer.Abort):  # ^C, or a prompt typer aborted
        typer.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except TyperException as err:  # a bad flag, a missing argument: 1, not 2 (2 means "changes present")
        _usage(err)
        return EXIT_ERROR
    except ArgusError as err:
        return _user_error(err, invocation)
    except Exception as err:  # noqa: BLE001 - this is the boundary
        return _bug(err, invocation)
    return result if isinstance(result, int) else EXIT_OK


def is_tty() -> bool:
    return sys.stdout.isatty()


def _usage(err: TyperException) -> None:
    show = getattr(err, "show", None)
    show() if show else typer.echo(f"Error: {err}", err=True)


def _user_error(err: ArgusError, invocation: Invocation) -> int:
    if invocation.debug:
        traceback.print_exc()
    typer.echo(typer.style("Error: ", fg="red", bold=True) + str(err), err=True)
    return err.exit_code


def _bug(err: Exception, invocation: Invocation) -> int:
    if invocation.debug:
        traceback.print_exc()
    else:
        typer.echo(f"argus hit a bug: {type(err).__name__}: {err}\n"
                   "Run again with --debug for the traceback, and report it.", err=True)
    return EXIT_BUG
