"""Entrypoints shown as the argv each command receives, and argv-level diffs (reconcile/views/argv.py)."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconcile.views.argv import argv_diff, argv_lines, field_argv_diff, show_item, split

SNAPSHOT = "${shared_root}/common/code/verl/verl-v091"


def verl_entrypoint(*overrides: str) -> str:
    """Built the way specs/workloads/submission.py builds it: cd into the snapshot, then the shlex-joined argv."""
    argv = ["python3", "-m", "verl.trainer.main_ppo", "data.train_files='${shared_root}/datasets/gsm8k/train.parquet'",
            "trainer.logger=['console','wandb']", *overrides]
    return f"cd {shlex.quote(SNAPSHOT)} && {shlex.join(argv)}"


def test_verl_argv_shows_hydra_overrides_as_the_program_receives_them():
    assert argv_lines(verl_entrypoint("trainer.nnodes=2")) == [
        "cd",
        f"  {SNAPSHOT}",
        "&&",
        "python3",
        "  -m",
        "  verl.trainer.main_ppo",
        "  data.train_files='${shared_root}/datasets/gsm8k/train.parquet'",
        "  trainer.logger=['console','wandb']",
        "  trainer.nnodes=2",
    ]


def test_an_item_with_single_quotes_loses_only_the_shell_quoting():
    entrypoint = shlex.join(["python3", "-c", "print('hi')"])
    assert entrypoint == "python3 -c 'print('\"'\"'hi'\"'\"')'"
    assert argv_lines(entrypoint) == ["python3", "  -c", "  print('hi')"]


def test_operators_stand_on_their_own_lines_between_commands():
    assert argv_lines("cat a.txt | grep -v x || true; echo done & wait") == [
        "cat", "  a.txt", "|", "grep", "  -v", "  x", "||", "true", ";", "echo", "  done", "&", "wait"]
    assert argv_lines("a&&b;c|d") == ["a", "&&", "b", ";", "c", "|", "d"]


def test_quoted_operators_and_redirections_are_arguments_not_operators():
    assert argv_lines("find . -exec rm {} ';' 2>&1") == ["find", "  .", "  -exec", "  rm", "  {}", '  ";"', "  2>&1"]


def test_assignments_before_the_command_stay_with_its_name():
    assert argv_lines("CUDA_VISIBLE_DEVICES=0 python3 x=1") == ["CUDA_VISIBLE_DEVICES=0", "python3", "  x=1"]


def test_unbalanced_quotes_are_shown_as_written():
    assert split("python3 -c 'print(1)") is None
    assert argv_lines("python3 -c 'print(1)") == ["python3 -c 'print(1)"]
    assert argv_lines('echo "a\nb') == ['"echo \\"a\\nb"']  # as written, but never across lines


def test_ambiguous_items_are_json_quoted():
    entrypoint = shlex.join(["echo", "", " lead", "trail ", "two\nlines", "tab\there", '"quoted"', "a\u202eb",
                             "汉字 ok"])
    assert argv_lines(entrypoint) == ["echo", '  ""', '  " lead"', '  "trail "', '  "two\\nlines"', '  "tab\\there"',
                                      '  "\\"quoted\\""', '  "a\\u202eb"', "  汉字 ok"]


def test_comments_and_line_continuations_are_what_sh_drops():
    script = "# install first\npip install x \\\n  y\npython3 train.py  # go\n"
    assert argv_lines(script) == ["pip", "  install", "  x", "  y", "python3", "  train.py"]


@pytest.mark.parametrize("words", [
    """a "b c" 'd e' f\\ g""",
    r'''"x\$y" "x\z" "q\"q" "b\\b" 'n\n' e\'''',
    """'' "" x''y a"b"'c'd""",
    "x#y '#' # and a comment",
    "${shared_root}/a '${shared_root}/b' \"$ref\"",
    "a\\\nb c#d \"x && y; z\" 'p | q'",
])
def test_words_match_what_sh_passes_to_the_program(words):
    received = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + words], capture_output=True, text=True,
                              check=True, env={"ref": "", "PATH": "/usr/bin:/bin", "shared_root": "/s"}).stdout
    sh_argv = received.split("\0")[:-1]
    ours = [t.text for t in split(words) or []]
    # sh expands $parameters; we show them as written, so compare only words without one.
    assert [w for w in ours if "$" not in w] == [w for w, o in zip(sh_argv, ours, strict=True) if "$" not in o]


@given(st.lists(st.text(), min_size=1, max_size=6))
def test_any_shlex_joined_argv_splits_back_into_itself(argv):
    tokens = split(shlex.join(argv))
    assert tokens is not None and [t.text for t in tokens] == argv and not any(t.operator for t in tokens)


def test_a_changed_entrypoint_diffs_item_by_item():
    rows = argv_diff(verl_entrypoint("trainer.nnodes=1", "lr=1e-6"), verl_entrypoint("trainer.nnodes=2", "lr=1e-6"))
    assert [r for r in rows if r[0] != " "] == [("-", "  trainer.nnodes=1"), ("+", "  trainer.nnodes=2")]
    assert [line for _, line in rows].count("&&") == 1  # unchanged lines once
    assert rows[-1] == (" ", "  lr=1e-6")


def test_a_diff_from_an_unsplittable_entrypoint_removes_it_whole():
    assert argv_diff("echo 'x", "echo x") == [("-", "echo 'x"), ("+", "echo"), ("+", "  x")]


def test_only_entrypoint_fields_get_an_argv_diff():
    assert field_argv_diff("entrypoint_num_cpus", 1.0, 2.0) is None
    assert field_argv_diff("entrypoint", None, "echo") is None
    assert field_argv_diff("entrypoint", "echo a", "echo b") == [(" ", "echo"), ("-", "  a"), ("+", "  b")]


def test_plain_items_are_shown_as_they_are():
    assert show_item("data.train_files='/x y'") == "data.train_files='/x y'"
    assert show_item("&&") == '"&&"'
