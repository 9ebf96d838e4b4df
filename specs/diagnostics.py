"""Diagnostics: the one type for "a problem at this field", from the loader to the views.

The loader, observation (sources, verl checks) and the planner all report with it; the views render
it. A diagnostic names what it is about twice over: by address (`job.ppo`) for plans and tools, and
by the spec field it blames (`trainer.nnodes`) whose line in the spec file becomes its `where`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, PlainSerializer, PlainValidator, SerializerFunctionWrapHandler, model_serializer

from specs.base import Frozen

Severity = Literal["error", "warning"]
"""`error` blocks apply (and `argus validate`); `warning` does not."""


@dataclass(frozen=True, order=True)
class Where:
    """A line of a spec file, relative to the workspace root; orders by file, then line."""

    file: str
    line: int

    def __str__(self) -> str:
        """`file:line` for people: a file name can't forge lines of argus's output."""
        return f"{printable(self.file)}:{self.line}"

    @property
    def text(self) -> str:
        """`file:line` as data (plan JSON), the name unescaped."""
        return f"{self.file}:{self.line}"

    @classmethod
    def parse(cls, value: Any) -> Where:
        """A Where, or its `file:line` text (from a saved plan: hostile input, so strictly)."""
        if isinstance(value, Where):
            return value
        file, sep, line = value.rpartition(":") if isinstance(value, str) else ("", "", "")
        if not (sep and line.isascii() and line.isdigit()):
            raise ValueError(f"{value!r} is not file:line")
        return cls(file, int(line))


WhereText = Annotated[Where, PlainValidator(Where.parse), PlainSerializer(lambda where: where.text, return_type=str)]
"""A Where in a model: serialised and read back as its `file:line` text."""


class Locates(Protocol):
    """What knows the line of each field of one spec (specs.desired.Source): diagnostics point through it."""

    def at(self, path: str = "") -> Where: ...


class Diagnostic(Frozen):
    """An error or warning about one spec (or the world it meets), located at a field when it can be."""

    severity: Severity
    address: str = ""
    """What it is about (`job.NAME`, `code.NAME`, `cluster.NAME`, `workspace`); empty when the loader
    could not tell (a file that is not YAML)."""
    message: str
    where: WhereText | None = None
    """The line of the spec node it is about; None when no spec line is to blame (a removed spec)."""
    field: str = Field(default="", exclude=True)
    """The dotted spec field it blames (`git.ref`, `overrides.2`); empty for the whole resource.
    Plan JSON carries the `where` it locates, not the field itself."""
    hint: str | None = None
    """What to do about it, when the message leaves that apart; shown after the message."""

    @classmethod
    def in_file(cls, file: str, line: int, field: str, message: str, hint: str | None = None) -> Diagnostic:
        """An error at a line of a spec file, before any resource is known: what the loader reports."""
        return cls(severity="error", where=Where(file, line), field=field, message=message, hint=hint)

    def located(self, source: Locates) -> Diagnostic:
        """This diagnostic pointed at the line of its field in `source`, the spec it is about."""
        return self.model_copy(update={"where": source.at(self.field)})

    @property
    def text(self) -> str:
        """The message, and the hint after it."""
        return f"{self.message}; {self.hint}" if self.hint else self.message

    def __str__(self) -> str:
        """`file:line: field.path: message`, as `argus validate` lists what the loader found."""
        parts = [str(part) for part in (self.where, self.field) if part]
        return ": ".join([*parts, self.text])

    @model_serializer(mode="wrap")
    def _without_absent_hint(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Plan JSON keeps its shape: `hint` appears only when there is one."""
        data = handler(self)
        if data.get("hint", "") is None:
            del data["hint"]
        return data


def by_place(diagnostic: Diagnostic) -> tuple[Where, str]:
    """Sort key: by file, line and field; diagnostics located nowhere first."""
    return diagnostic.where or Where("", 0), diagnostic.field


TERMINAL_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"              # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks, up to BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"       # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"                    # any other escape and what it introduces
    r"|\x9b[0-?]*[ -/]*[@-~]")              # the one-byte (C1) CSI


def plain(text: str, lines: bool = True) -> str:
    """Text from outside argus (Ray's job table, a dashboard's error, a run's log) as plain visible text:
    terminal escape sequences removed, every other control or invisible character (\r, C0, C1, bidi
    overrides) dropped; line breaks and tabs kept when `lines`, else each a space. What a comment, page,
    terminal or log line shows of it cannot move a cursor, recolour, rewrite a line or hide one."""
    kept = "\n\t" if lines else ""
    text = TERMINAL_ESCAPE.sub("", text)
    if not lines:
        text = text.replace("\n", " ").replace("\t", " ")
    return "".join(c for c in text if c.isprintable() or c in kept)


def printable(text: str) -> str:
    """A name from the workspace as one visible line: a file named with a line break or a terminal
    escape must not forge lines of argus's output (or of a pull-request comment)."""
    return text if text.isprintable() else json.dumps(text)[1:-1]
