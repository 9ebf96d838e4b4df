"""Bytes of sealed inputs per version, per sealing workspace and per cluster."""

from __future__ import annotations

from state.inputs.usage import input_usage
from state.observed import InputFile, InputManifest


def manifest(name: str, workspace: str, size: int) -> InputManifest:
    return InputManifest(kind="Dataset", name=name, key="a" * 64, source={}, workspace=workspace,
                         created_by="u", created_at="t", files=(InputFile(path="f", size=size, sha256="b" * 64),),
                         bytes=size, digest="c" * 64)


def test_usage_sums_per_workspace_and_cluster():
    usage = input_usage({"h20": {"datasets/b/aaaaaaaaaaaa": manifest("b", "team-b", 5),
                                 "datasets/a/aaaaaaaaaaaa": manifest("a", "team-a", 7)},
                         "a100": {"datasets/a/aaaaaaaaaaaa": manifest("a", "team-a", 7)}})
    assert [(v.cluster, v.rel) for v in usage.versions] == [("a100", "datasets/a/aaaaaaaaaaaa"),
                                                             ("h20", "datasets/a/aaaaaaaaaaaa"),
                                                             ("h20", "datasets/b/aaaaaaaaaaaa")]
    assert usage.by_workspace == {"team-a": 14, "team-b": 5}
    assert usage.by_cluster == {"a100": 7, "h20": 12} and usage.total == 19


def test_nothing_stored_is_zero():
    usage = input_usage({})
    assert usage.versions == () and usage.total == 0 and usage.by_workspace == {}
