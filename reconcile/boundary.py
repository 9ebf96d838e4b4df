"""The one error boundary: main() runs the whole dispatch inside it, and it alone chooses exit codes.

Commands return an int and raise; none of them catches an error to pick a code (pre-commit's
`main` shape). `--debug` reaches the boundary through typer's context object, not a global.

A command line that asks for JSON (`--json`, `--format json`) gets every error as JSON too: one
object on stdout, `{"error": TEXT, "kind": KIND, "where": "file:line" or null}` (a SpecError adds
`diagnostics`), while the text still goes to stderr and the exit code stays what it is. KIND is the
ArgusError subclass's name, `usage`, `interrupted` or `bug`. It is decided from the words typed,
not the parsed options, so that a usage error answers in JSON as well.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import typer
from typer.exceptions import TyperException

from specs.diagnostics import Diagnostic, plain
from specs.errors import ArgusError, SpecError

EXIT_OK, EXIT_ERROR, EXIT_CHANGES, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class Invocation:
    """Options of one whole run of argus, set by the root callback as typer's ctx.obj."""

    debug: bool = False
    """--debug: show the traceback of any error."""
    as_json: bool = False
    """The command line asks for JSON output: errors are also a JSON object on stdout."""


EXIT_BROKEN_PIPE = 141
"""As a shell reports a program ended by SIGPIPE (128 + 13): not a bug of argus."""


def _quiet_stdout() -> None:
    """Python flushes stdout again at exit and would complain of the closed pipe: point it at /dev/null."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def guarded(dispatch: Callable[[Invocation], object], as_json: bool = False) -> int:
    """Run the dispatch: user errors exit with their code (1) and message, usage errors 1, ^C 130,
    anything else is a bug (3). A command's int result is the exit code."""
    invocation = Invocation(as_json=as_json)
    interrupted = _Interrupts()
    try:
        with interrupted:
            result = dispatch(invocation)
    except typer.Exit as done:  # --help, --version
        return done.exit_code
    except (KeyboardInterrupt, typer.Abort):  # ^C, or a prompt typer aborted
        return _interrupted(invocation)
    except BrokenPipeError:  # `argus ... | head` closed the pipe: the reader has what it wanted
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except TyperException as err:  # a bad flag, a missing argument: 1, not 2 (2 means "changes present")
        _usage(err, invocation)
        return EXIT_ERROR
    except ArgusError as err:
        return _user_error(err, invocation)
    except Exception as err:  # noqa: BLE001 - this is the boundary
        if interrupted.seen:  # ^C landed inside an import or a library, which turned it into another error
            return _interrupted(invocation)
        return _bug(err, invocation)
    return result if isinstance(result, int) else EXIT_OK


def _interrupted(invocation: Invocation) -> int:
    typer.echo("Interrupted.", err=True)
    _json_error(invocation, "Interrupted.", "interrupted")
    return EXIT_INTERRUPTED


class _Interrupts:
    """Remembers a ^C while the command runs (raising KeyboardInterrupt as Python's own handler does): one that
    lands in the middle of an import or a library call can surface as some other exception, and must still
    read as an interruption, never as "argus hit a bug". Only in the main thread, where signals are handled."""

    def __init__(self) -> None:
        self.seen, self._previous = False, None

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        self.seen = True
        raise KeyboardInterrupt


def contained(call: Callable[[], int]) -> tuple[int, ArgusError | None]:
    """One of several parts of a command (a workspace of `argus plan ROOT`): its exit code, and the user
    error that ended it, printed as the boundary prints one, so that the other parts still run. A bug
    (any other exception) still ends the whole command here."""
    try:
        return call(), None
    except ArgusError as err:
        typer.echo(typer.style("Error: ", fg="red", bold=True) + plain(str(err)), err=True)
        return err.exit_code, err


def error_object(err: ArgusError) -> dict[str, Any]:
    """The JSON object the boundary prints for a user error (a SpecError adds its diagnostics)."""
    data: dict[str, Any] = {"error": str(err), "kind": type(err).__name__, "where": None}
    if isinstance(err, SpecError):
        located = [d.where.text for d in err.diagnostics if d.where]
        data.update(where=located[0] if located else None, diagnostics=[diagnostic_json(d) for d in err.diagnostics])
    return data


def wants_json(args: Sequence[str]) -> bool:
    """`--json`, `--format json` or `--format=json` before any `--`: the output asked for."""
    words = list(itertools.takewhile(lambda word: word != "--", args))
    pairs = zip(words, words[1:], strict=False)
    return "--json" in words or "--format=json" in words or ("--format", "json") in pairs


def diagnostic_json(diagnostic: Diagnostic) -> dict[str, Any]:
    """One problem as data: where (file and line, or null), the field it blames, what to do."""
    where = diagnostic.where
    return {"file": where.file if where else None, "line": where.line if where else None,
            "field": diagnostic.field, "message": diagnostic.text, "severity": diagnostic.severity}


def is_tty() -> bool:
    return sys.stdout.isatty()


def _usage(err: TyperException, invocation: Invocation) -> None:
    show = getattr(err, "show", None)
    show() if show else typer.echo(f"Error: {err}", err=True)
    _json_error(invocation, err.format_message(), "usage")


def _user_error(err: ArgusError, invocation: Invocation) -> int:
    if invocation.debug:
        traceback.print_exc()
    typer.echo(typer.style("Error: ", fg="red", bold=True) + plain(str(err)), err=True)  # may quote a dashboard
    if isinstance(err, SpecError):
        located = [d.where.text for d in err.diagnostics if d.where]
        _json_error(invocation, str(err), type(err).__name__, located[0] if located else None,
                    diagnostics=[diagnostic_json(d) for d in err.diagnostics])
    else:
        _json_error(invocation, str(err), type(err).__name__)
    return err.exit_code


def _bug(err: Exception, invocation: Invocation) -> int:
    message = f"argus hit a bug: {type(err).__name__}: {err}"
    if invocation.debug:
        traceback.print_exc()
    else:
        typer.echo(f"{message}\nRun again with --debug for the traceback, and report it.", err=True)
    _json_error(invocation, message, "bug")
    return EXIT_BUG


def _json_error(invocation: Invocation, message: str, kind: str, where: str | None = None, **extra: Any) -> None:
    if invocation.as_json:
        typer.echo(json.dumps({"error": message, "kind": kind, "where": where, **extra}))
