"""The session's YAML memo (tests/support/parsed_once.py) gives each caller its own copy of what the real parser
built, and never remembers a failure."""

from __future__ import annotations

import io

import pytest
import yaml

from tests.support.parsed_once import memoized


def test_each_caller_gets_its_own_copy_of_one_parse():
    calls = []

    def real(stream, Loader):  # noqa: N803
        calls.append(stream)
        return yaml.load(stream, Loader)

    load = memoized(real)
    first = load(io.StringIO("a: [1, 2]\n"), yaml.SafeLoader)
    first["a"].append(3)
    assert load("a: [1, 2]\n", yaml.SafeLoader) == {"a": [1, 2]}  # the same text, as a str or a file's
    assert load(io.StringIO("a: [1, 2]\n"), yaml.SafeLoader) == {"a": [1, 2]}
    assert load(b"a: [1, 2]\n", yaml.SafeLoader) == {"a": [1, 2]}  # bytes may carry an encoding: parsed apart
    assert len(calls) == 2


def test_a_failure_is_parsed_again_and_names_its_file():
    load = memoized(yaml.load)
    for _ in range(2):
        stream = io.StringIO("a: [1\n")
        stream.name = "planted.yaml"
        with pytest.raises(yaml.YAMLError, match='in "planted.yaml", line 1'):
            load(stream, yaml.SafeLoader)


def test_a_loader_that_may_build_objects_is_never_remembered():
    calls = []

    def real(stream, Loader):  # noqa: N803
        calls.append(stream)
        return yaml.load(stream, Loader)

    load = memoized(real)
    load("a: 1\n", yaml.FullLoader)
    load("a: 1\n", yaml.FullLoader)
    assert len(calls) == 2
