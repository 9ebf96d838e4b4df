"""The plain subset of YAML, parsed by libyaml (C): what ruamel would build, ten times sooner.

ruamel's pure-Python scanner costs about 10 ms a job file here: a workspace of 5,000 files spent
most of `argus plan` in it (bench/plan_scale.py). Real specs use a small subset of YAML: block and
flow mappings and sequences of untagged scalars. This module parses that subset with libyaml
(PyYAML's C parser; PyYAML comes with ray) and builds what ruamel's round-trip loader builds for
it: CommentedMap and CommentedSeq with the same line and column marks, holding the same values.

It never decides whether a file is acceptable. Anything outside the subset -- a tag, an anchor or
alias, a directive, a duplicate or non-string key, a value left out, one ruamel reads as anything but a string,
a bool, null or a plain decimal int or float, nesting MAX_DEPTH deep, characters YAML 1.1 and 1.2
read differently, a tab, any syntax error -- makes it answer None, and specs.safe_yaml reads the
file with ruamel, which refuses or locates the problem exactly as before (tests/test_fast_yaml.py
compares both on every spec in tests/ and examples/ and on generated documents).
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.reader import Reader
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.util import LazyEval

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


class _Declined(Exception):
    """The text leaves the plain subset: ruamel reads it."""


def plain_documents(text: str, max_depth: int) -> list[Any] | None:
    """Every document of `text` as ruamel's round-trip loader builds it, or None when `text` is
    outside the plain subset (or not YAML at all): then ruamel must read it."""
    if CParser is None or _UNLIKE.search(text) or _NON_PRINTABLE.search(text):
        return None
    parser = CParser(text)
    try:
        return _documents(parser, max_depth)
    except (_Declined, YAMLError):
        return None
    finally:
        parser.dispose()


def _documents(parser: Any, max_depth: int) -> list[Any]:
    parser.get_event()  # StreamStartEvent
    documents = []
    while not parser.check_event(ev.StreamEndEvent):
        start = parser.get_event()
        if start.version is not None or start.tags:  # %YAML 1.1 changes what `yes` means
            raise _Declined
        documents.append(_node(parser, parser.get_event(), 0, max_depth))
        parser.get_event()  # DocumentEndEvent
    return documents


def _node(parser: Any, event: Any, depth: int, max_depth: int) -> Any:
    """The value that starts with `event` (already taken from the parser)."""
    kind = type(event)
    if depth >= max_depth or kind is ev.AliasEvent or event.anchor is not None or event.tag is not None:
        raise _Declined
    if kind is ev.ScalarEvent:
        return _scalar(event)
    if kind is ev.SequenceStartEvent:
        return _sequence(parser, event, depth, max_depth)
    return _mapping(parser, event, depth, max_depth)


def _scalar(event: Any) -> Any:
    value = event.value
    if not event.implicit[0]:  # quoted or a block scalar: a string whatever it reads
        return value
    if not value:  # a value left out: libyaml marks it where the key ends, ruamel where the next token starts
        raise _Declined
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
    raise _Declined  # a timestamp, a merge key, a hex or exponent number: ruamel builds its own types


def _implicit_tag(value: str) -> str:
    """The tag ruamel's resolver gives a plain scalar: the first pattern that matches, else a string."""
    for tag, pattern in _PATTERNS.get(value[0], _ANY_START):
        if pattern.match(value):
            return str(tag)
    return _STR


def _sequence(parser: Any, start: Any, depth: int, max_depth: int) -> CommentedSeq:
    sequence, lines = CommentedSeq(), {}
    while type(event := parser.get_event()) is not ev.SequenceEndEvent:
        lines[len(sequence)] = [event.start_mark.line, event.start_mark.column]
        sequence.append(_node(parser, event, depth + 1, max_depth))
    return _marked(sequence, start, lines)


def _mapping(parser: Any, start: Any, depth: int, max_depth: int) -> CommentedMap:
    mapping, lines = CommentedMap(), {}
    while type(event := parser.get_event()) is not ev.MappingEndEvent:
        key = _node(parser, event, depth + 1, max_depth)
        if not isinstance(key, str) or key in lines:  # or a duplicate (`lines` has the keys so far): ruamel's to name
            raise _Declined
        value = parser.get_event()
        lines[key] = [event.start_mark.line, event.start_mark.column, value.start_mark.line, value.start_mark.column]
        mapping[key] = _node(parser, value, depth + 1, max_depth)
    return _marked(mapping, start, lines)


def _marked(collection: Any, start: Any, lines: dict[Any, list[int]]) -> Any:
    """Where the collection and each of its items start, as ruamel's `lc` holds it, and its style."""
    lc = collection.lc
    lc.line, lc.col = start.start_mark.line, start.start_mark.column
    if lines:
        lc.data = lines
    _style(collection, start)
    return collection


def _style(collection: CommentedMap | CommentedSeq, start: Any) -> None:
    """Flow or block, as ruamel records it (only a non-empty collection's)."""
    if collection and start.flow_style is True:
        collection.fa.set_flow_style()
    elif collection and start.flow_style is False:
        collection.fa.set_block_style()
