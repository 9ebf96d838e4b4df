"""argus schema: print the JSON Schema (any kind, or one), or split spec files into one JSON file per document.

check-jsonschema (0.39) reads one document per YAML file and refuses a file with `---` in it; many tools
do the same. `--split` writes each document of each file as it is read by argus (YAML aliases, tags and
over-deep nesting refused, as validate refuses them) to OUT/<file>.line<N>.json, N the line its document
starts on, for any such tool to check with schema/argus.schema.json. Nothing is written unless every file
reads.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import typer
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from reconcile.boundary import EXIT_OK
from specs.errors import ArgusError
from specs.parse.reading import MAX_FILE_BYTES, read_at_most
from specs.parse.safe_yaml import Refused, load_walked
from specs.schema.schema import schema_text


@dataclass(frozen=True)
class Document:
    target: Path
    """Where it is written, under OUT."""
    value: object


def run(kind: str | None, split: list[Path], out: Path | None) -> int:
    if not split:
        typer.echo(schema_text(kind), nl=False)
        return EXIT_OK
    if out is None:
        raise ArgusError("--split needs --out DIR: where each document is written as <file>.line<N>.json")
    documents = [doc for path in split for doc in _documents(path, out)]
    clash = _first_clash(documents)
    if clash is not None:
        raise ArgusError(f"two documents would both be written to {clash}: split files of the same name apart")
    for doc in documents:
        doc.target.parent.mkdir(parents=True, exist_ok=True)
        doc.target.write_text(json.dumps(doc.value, indent=2, sort_keys=True, default=str) + "\n")
        typer.echo(str(doc.target))
    return EXIT_OK


def _documents(path: Path, out: Path) -> list[Document]:
    text = _read(path)
    try:
        walked = load_walked(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark else 1
        prefix = "" if isinstance(err, Refused) else "invalid YAML: "  # as validate says it (specs.load.loader)
        raise ArgusError(f"{path}:{line}: {prefix}{err.problem or err.context}") from None
    except YAMLError as err:
        raise ArgusError(f"{path}:1: invalid YAML: {err}") from None
    base = out / _relative(path)
    return [Document(base.with_name(f"{base.name}.line{doc.line}.json"), doc.value) for doc in walked]


def _read(path: Path) -> str:
    """A regular file within validate's size cap; a FIFO or a device is refused, never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise ArgusError(f"{path}: cannot open it: {err.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArgusError(f"{path}: not a regular file")
        data = read_at_most(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise ArgusError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB, argus's limit for a spec file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ArgusError(f"{path}: not UTF-8 text") from None


def _relative(path: Path) -> Path:
    """The file's path from the current directory when it is beneath it, else its name: OUT is never left."""
    try:
        relative = path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return Path(path.name)
    return relative if relative.parts else Path(path.name)


def _first_clash(documents: list[Document]) -> Path | None:
    seen: set[Path] = set()
    for doc in documents:
        if doc.target in seen:
            return doc.target
        seen.add(doc.target)
    return None
