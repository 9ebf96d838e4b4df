"""docs/cli.md, generated from the CLI itself: `python -m reconcile.cli_reference > docs/cli.md`.

A test regenerates it and fails when the committed file is out of date.

May import: cli.
"""

from __future__ import annotations

import typer.main

from reconcile.cli import app


def reference() -> str:
    lines = ["# argus command-line reference", "",
             "Generated from the CLI by `python -m reconcile.cli_reference`; do not edit by hand.", ""]
    root = typer.main.get_command(app)
    lines += _command(root, "argus", level=2)
    return "\n".join(lines).rstrip() + "\n"


def _command(command, path: str, level: int) -> list[str]:
    lines = [f"{'#' * level} `{path}`", ""]
    if command.help:
        lines += [command.help.strip(), ""]
    params = [p for p in command.params if p.name != "help"]
    if params:
        lines += ["| argument or option | default | meaning |", "|---|---|---|"]
        lines += [_param(p) for p in params]
        lines.append("")
    for name in sorted(getattr(command, "commands", {})):
        lines += _command(command.commands[name], f"{path} {name}", level + 1)
    return lines


def _param(param) -> str:
    names = ", ".join(f"`{o}`" for o in param.opts) if param.param_type_name == "option" else f"`{param.name.upper()}`"
    default = param.default
    unset = default is None or default is False or default in ((), [])
    shown = "" if unset and (param.param_type_name == "option" or default is None) else f"`{_plain(default)}`"
    meaning = (getattr(param, "help", None) or "").replace("|", "\\|")
    return f"| {names} | {shown} | {meaning} |"


def _plain(value) -> str:
    text = str(getattr(value, "value", value))
    home = str(__import__("pathlib").Path.home())
    return text.replace(home, "~")


if __name__ == "__main__":
    print(reference(), end="")
