"""ruamel's round-trip loader, refusing what no spec needs and a hostile file could abuse.

Aliases: ten nested lists of ten aliases each ("billion laughs") compose into a tiny graph that the
loader's recursive walks would visit a billion times. Depth: ruamel's composer and the loader's
walks recurse once per level, so `[[[[...` a few thousand deep is a RecursionError. Values ruamel
turns into Python (a 5,000-digit int, `2024-13-45` as a date) raise plain ValueErrors: each
becomes a located YAML error. One pass: the checks run as the composer pulls each event, before
anything is built from it, so refusing costs nothing on top of parsing. Two shapes ruamel
builds wrongly are refused there too: a core tag on a node of another kind (`!!str [a]` gives a
list with no line marks) and a sequence or mapping as a key (`[[a]]: 1` cannot be hashed).
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, StreamMark
from ruamel.yaml.events import AliasEvent, MappingStartEvent, ScalarEvent, SequenceStartEvent

from specs.parse.fast_yaml import walked_documents
from specs.parse.nodes import Walked, walk_document

MAX_DEPTH = 50
"""Nested collections and scalars; a spec needs about 5 (job, env, value)."""
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep: argus specs are shallow; flatten the value"
# ruamel's scanner looks 1024 characters ahead and rechecks every open bracket on the way: a run of
# `[[[[...` costs it ~1 s here before the composer sees the first event. A run this long is too deep anyway.
_BRACKET_RUN = re.compile(r"[\[{](?:\s*[\[{]){" + str(MAX_DEPTH) + "}")


def _core(*names: str) -> frozenset[str]:
    return frozenset(f"tag:yaml.org,2002:{name}" for name in names)


_FITTING_TAGS = {ScalarEvent: _core("str", "int", "float", "bool", "null"), SequenceStartEvent: _core("seq"),
                 MappingStartEvent: _core("map")}
"""The core tags each kind of node may carry."""
CORE_TAGS = frozenset().union(*_FITTING_TAGS.values())
"""Explicit tags a spec may carry (`!!str 007`); others (`!!python/...`, `!!binary`, `!custom`) mean
something argus would silently drop or turn into another type."""
_KIND_NAMES = {ScalarEvent: "a plain value", SequenceStartEvent: "a sequence", MappingStartEvent: "a mapping"}


class Refused(MarkedYAMLError):
    """YAML that parses but is not allowed in a spec; `problem` is the whole message for the user."""


def load_walked(text: str) -> list[Walked]:
    """Every document of `text` but empty ones, walked (specs.parse.nodes.walk_document); raises a
    MarkedYAMLError with a line. Plain specs (most) are walked by specs.parse.fast_yaml as libyaml parses
    them; all else is read by ruamel here, with every refusal below, and then walked."""
    _refuse_bracket_run(text)
    walked = walked_documents(text, MAX_DEPTH)
    if walked is None:
        walked = [walk_document(node) for node in ruamel_documents(text) if node is not None]
    return [document for document in walked if document.value is not None]


def load_documents(text: str) -> list[Any]:
    """Every document of `text`, as ruamel round-trip nodes; raises a MarkedYAMLError with a line."""
    _refuse_bracket_run(text)
    return ruamel_documents(text)


def _refuse_bracket_run(text: str) -> None:
    run = _BRACKET_RUN.search(text)
    if run:
        line = text.count("\n", 0, run.start())
        raise Refused(problem=TOO_DEEP, problem_mark=StreamMark(None, run.start(), line, 0))


def ruamel_documents(text: str) -> list[Any]:
    """ruamel's reading with every refusal below: for what specs.parse.fast_yaml leaves to it."""
    yaml = YAML(typ="rt")
    yaml.Composer = _SpecComposer
    yaml.Constructor = _SpecConstructor
    return list(yaml.load_all(text))


class _SpecComposer(Composer):
    def __init__(self, loader: Any = None) -> None:
        super().__init__(loader)
        self.warn_double_anchors = False  # an anchor alone is harmless; reusing it needs an alias
        self._nesting = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            raise Refused(problem=f"YAML aliases (*{event.anchor}) are not allowed in argus specs: write the "
                                  "value out", problem_mark=event.start_mark)
        _refuse_tag(event)
        if parent is not None and index is None and type(event) in (SequenceStartEvent, MappingStartEvent):
            raise Refused(problem=f"{_KIND_NAMES[type(event)]} as a key: keys must be strings",
                          problem_mark=event.start_mark)
        if self._nesting >= MAX_DEPTH:
            raise Refused(problem=TOO_DEEP, problem_mark=event.start_mark)
        self._nesting += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._nesting -= 1


class _SpecConstructor(RoundTripConstructor):
    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ArithmeticError, LookupError, TypeError, ValueError) as err:
            detail = "" if isinstance(err, LookupError) else f": {err}"  # a KeyError says only the value again
            raise ConstructorError(problem=f"cannot read the value {_excerpt(node)}{detail}",
                                   problem_mark=node.start_mark) from err


def _refuse_tag(event: Any) -> None:
    """Only a core tag, and only on a node of its kind: `!!str [a]` is no string."""
    tag = getattr(event, "tag", None)
    if tag is None:
        return
    if tag not in CORE_TAGS:
        raise Refused(problem=f"YAML tags ({tag}) are not allowed in argus specs: write a plain value",
                      problem_mark=event.start_mark)
    if tag not in _FITTING_TAGS.get(type(event), CORE_TAGS):
        raise Refused(problem=f"the YAML tag !!{tag.rsplit(':', 1)[-1]} does not fit {_KIND_NAMES[type(event)]}: "
                              "remove the tag", problem_mark=event.start_mark)


def _excerpt(node: Any) -> str:
    value = node.value if isinstance(node.value, str) else ""
    return repr(value if len(value) <= 40 else value[:37] + "...")
