"""The plain subset of YAML, parsed by libyaml (C) and walked as it is parsed: ten times sooner than ruamel.

ruamel's pure-Python scanner costs about 10 ms a job file here: a workspace of 5,000 files spent
most of `argus plan` in it (bench/plan_scale.py). Real specs use a small subset of YAML: block and
flow mappings and sequences of untagged scalars. This module parses that subset with libyaml
(PyYAML's C parser; PyYAML comes with ray) and gives, for each document, what specs.parse.nodes.walk_document
gives for ruamel's round-trip nodes of it: the plain value, every string with its path and line,
and the line of every field. No node is built: the events are walked as they come (building
ruamel's nodes first and walking them after cost twice as much).

It never decides whether a file is acceptable. Anything outside the subset -- a tag, an anchor or
alias, a directive, a duplicate or non-string key, a value left out, one ruamel reads as anything but a string,
a bool, null or a plain decimal int or float, nesting MAX_DEPTH deep, characters YAML 1.1 and 1.2
read differently, a tab, any syntax error -- makes it answer None, and specs.parse.safe_yaml reads the
file with ruamel, which refuses or locates the problem exactly as before (tests/specs/test_fast_yaml.py
compares both on every spec in tests/ and examples/ and on generated documents).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ruamel.yaml.reader import Reader
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.util import LazyEval

from specs.parse.nodes import MIN_SCANNED_KEY, StringAt, Walked

try:
    from yaml import YAMLError
    from yaml import events as ev
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml: every file takes ruamel's path
    CParser = None


def _compiled(pattern: Any) -> re.Pattern[str]:
    """ruamel keeps its patterns behind a lazy wrapper (ruamel.yaml.util.LazyEval) that makes every
    `match` a Python-level attribute lookup first: the compiled pattern itself, once."""
    return pattern.lazy_self() if isinstance(pattern, LazyEval) else pattern


_UNLIKE = re.compile(r"[\t\x85\u2028\u2029\ufeff]")
"""NEL, LS and PS break lines in YAML 1.1 (libyaml) but not in 1.2 (ruamel); tabs and BOMs: rare in
specs, subtle in both; left to ruamel."""
_IMPLICIT = VersionedResolver().versioned_resolver
"""ruamel's own YAML 1.2 table (first character -> tags and patterns) decides what a plain scalar is,
so `yes` stays a string here too; read once, as asking the resolver each time costs more than parsing."""
_ANY_START = tuple((tag, _compiled(pattern)) for tag, pattern in _IMPLICIT.get(None, ()))
_PATTERNS = {first: (*((tag, _compiled(pattern)) for tag, pattern in patterns), *_ANY_START)
             for first, patterns in _IMPLICIT.items() if first}
_NON_PRINTABLE = _compiled(Reader.NON_PRINTABLE)
_STR, _BOOL, _NULL = ("tag:yaml.org,2002:" + kind for kind in ("str", "bool", "null"))
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})")
_PLAIN_FLOAT = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})\.[0-9]{1,17}")
"""The numbers read here; `0o17`, `1_000`, `1e3`, `.inf`, `007` are ruamel's to read."""


_BLOCK = ("|", ">")


class _Declined(Exception):
    """The text leaves the plain subset: ruamel reads it."""


def walked_documents(text: str, max_depth: int) -> list[Walked] | None:
    """Every document of `text` walked as specs.parse.nodes.walk_document walks ruamel's nodes of it, or
    None when `text` is outside the plain subset (or not YAML at all): then ruamel must read it."""
    if CParser is None or _UNLIKE.search(text) or _NON_PRINTABLE.search(text):
        return None
    parser = CParser(text)
    try:
        return _documents(parser, max_depth, text)
    except (_Declined, YAMLError):
        return None
    finally:
        parser.dispose()


def _documents(parser: Any, max_depth: int, text: str) -> list[Walked]:
    parser.get_event()  # StreamStartEvent
    documents = []
    while not parser.check_event(ev.StreamEndEvent):
        start = parser.get_event()
        if start.version is not None or start.tags:  # %YAML 1.1 changes what `yes` means
            raise _Declined
        first = parser.get_event()
        # ruamel marks where a collection starts, not a scalar: a scalar document is "line 1" there too
        walked = Walked(line=1 if type(first) is ev.ScalarEvent else first.start_mark.line + 1)
        walked.value = _Walk(parser.get_event, max_depth, walked, text).node(first, "", 0)
        documents.append(walked)
        parser.get_event()  # DocumentEndEvent
    return documents


class _Walk:
    """One document's events, walked as the parser gives them, into `walked`'s lines and strings."""

    def __init__(self, next_event: Callable[[], Any], max_depth: int, walked: Walked, text: str):
        self.next_event = next_event
        self.max_depth = max_depth
        self.text = text
        self.walked = walked
        self.lines = walked.lines
        self.strings = walked.strings

    def node(self, event: Any, path: str | None, depth: int) -> Any:
        """The plain value that starts with `event` (already taken from the parser), found at `path`
        (None: a key, which is no string of its own; "": the document itself, or under an empty key)."""
        kind = type(event)
        if depth >= self.max_depth or kind is ev.AliasEvent or event.anchor is not None or event.tag is not None:
            raise _Declined
        if kind is ev.ScalarEvent:
            if event.style in _BLOCK and "#" in self._header(event.start_mark.index):
                raise _Declined  # `|#`: libyaml reads a comment, ruamel refuses it: ruamel judges such headers
            value = _scalar(event)
            if type(value) is str and path in self.lines:  # a field or an item: the document itself is neither
                self.strings.append(StringAt(path, self.lines[path], value))
            return value
        prefix = f"{path}." if path else ""  # as walk_document joins them, an empty key's included
        if kind is ev.SequenceStartEvent:
            return self._sequence(prefix, depth)
        return self._mapping(prefix, depth)

    def _header(self, start: int) -> str:
        """A block scalar's header: from its indicator (`start`, in characters) to the end of that line.
        Each block scalar has a line of its own, so all of them read the text about once."""
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def _sequence(self, prefix: str, depth: int) -> list[Any]:
        items: list[Any] = []
        while type(event := self.next_event()) is not ev.SequenceEndEvent:
            path = prefix + str(len(items))
            self.lines[path] = event.start_mark.line + 1
            items.append(self.node(event, path, depth + 1))
        return items

    def _mapping(self, prefix: str, depth: int) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        while type(event := self.next_event()) is not ev.MappingEndEvent:
            key = self.node(event, None, depth + 1)
            if type(key) is not str or key in mapping:  # or a duplicate: ruamel's to name
                raise _Declined
            if "." in key:
                self.walked.dotted = True
            path = prefix + key
            self.lines[path] = event.start_mark.line + 1  # the key's line, as ruamel marks a field
            if len(key) >= MIN_SCANNED_KEY:
                self.walked.keys.append(StringAt(path, self.lines[path], key))
            mapping[key] = self.node(self.next_event(), path, depth + 1)
        return mapping


def _scalar(event: Any) -> Any:
    value = event.value
    if not event.implicit[0]:  # quoted or a block scalar: a string whatever it reads
        return value
    resolved = _RESOLVED.get(value, _UNSEEN)
    if resolved is _UNSEEN:
        resolved = _resolved(value)
        if len(value) <= MAX_REMEMBERED and len(_RESOLVED) < MAX_RESOLVED:  # a bound a hostile file cannot stretch
            _RESOLVED[value] = resolved
    if resolved is _DECLINE:
        raise _Declined
    return resolved


_UNSEEN, _DECLINE = object(), object()
_RESOLVED: dict[str, Any] = {}
"""Plain scalar text -> what it reads as (immutable values): specs repeat theirs (`kind: Job`, `cluster:
local`, keys), and asking ruamel's patterns costs more than the lookup."""
MAX_RESOLVED, MAX_REMEMBERED = 65_536, 64
"""At most this many scalars, of at most this many characters (a few MB): the short ones are those repeated."""


def _resolved(value: str) -> Any:
    """What a plain scalar reads as, or _DECLINE when ruamel must read it."""
    if not value:  # a value left out: libyaml marks it where the key ends, ruamel where the next token starts
        return _DECLINE
    tag = _implicit_tag(value)
    if tag == _STR:
        return value
    if tag == _NULL:
        return None
    if tag == _BOOL:
        return value.lower() == "true"
    if tag == _INT and _PLAIN_INT.fullmatch(value):
        return int(value)
    if tag == _FLOAT and _PLAIN_FLOAT.fullmatch(value):
        return float(value)
    return _DECLINE  # a timestamp, a merge key, a hex or exponent number: ruamel builds its own types


def _implicit_tag(value: str) -> str:
    """The tag ruamel's resolver gives a plain scalar: the first pattern that matches, else a string."""
    for tag, pattern in _PATTERNS.get(value[0], _ANY_START):
        if pattern.match(value):
            return str(tag)
    return _STR
