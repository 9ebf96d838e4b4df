"""Each YAML text is parsed once per test session: the verl tests compose verl's real configs with Hydra, test after
test, and most of a composition's time is PyYAML's pure-Python parser reading the same few hundred files again.

Only what is parsed with a loader that builds plain data (yaml.SafeLoader, yaml.CSafeLoader and OmegaConf's
loader, a SafeLoader refusing duplicate keys) is remembered, by the loader and the exact text; every caller gets its
own deep copy, so a caller that changes what it got changes nothing for the next. A text that fails to parse is never
remembered: its error is raised again, by the real parser, each time. Hydra still composes every config, every test.
Subprocesses (a CLI started for real) parse for themselves."""

from __future__ import annotations

import copy
import io
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

PLAIN_LOADERS = frozenset({("yaml.loader", "SafeLoader"), ("yaml.cyaml", "CSafeLoader"),
                           ("omegaconf._utils", "get_yaml_loader.<locals>.OmegaConfLoader")})
"""Loaders whose result is plain data from the text alone (omegaconf makes its loader class anew at each call)."""
MISSING = object()
KEPT = 4096
"""Texts remembered at most (the fuzz tests parse thousands of texts once each: the oldest are dropped)."""


def memoized(load: Any) -> Any:
    parsed: OrderedDict[tuple[str, str, type, str | bytes], Any] = OrderedDict()
    lock = threading.Lock()

    def load_once(stream: Any, Loader: Any) -> Any:  # noqa: N803 - yaml.load's own parameter name
        if (Loader.__module__, Loader.__qualname__) not in PLAIN_LOADERS:
            return load(stream, Loader)
        text = stream.read() if hasattr(stream, "read") else stream
        key = (Loader.__module__, Loader.__qualname__, type(text), text)
        with lock:  # serve's tests read specs from threads
            found = parsed.get(key, MISSING)
            if found is not MISSING:
                parsed.move_to_end(key)
        if found is MISSING:
            found = load(_again(stream, text), Loader)
            with lock:
                parsed[key] = found
                if len(parsed) > KEPT:
                    parsed.popitem(last=False)
        return copy.deepcopy(found)

    return load_once


def _again(stream: Any, text: str | bytes) -> Any:
    """The text as the stream it was read from, named alike: a parse error names the same file."""
    if not hasattr(stream, "read"):
        return text
    again = io.StringIO(text) if isinstance(text, str) else io.BytesIO(text)
    again.name = getattr(stream, "name", "<file>")  # type: ignore[attr-defined]
    return again


@pytest.fixture(scope="session", autouse=True)
def _yaml_parsed_once() -> Iterator[None]:
    real = yaml.load
    yaml.load = memoized(real)  # yaml.safe_load and OmegaConf.load look yaml.load up at each call
    try:
        yield
    finally:
        yaml.load = real
