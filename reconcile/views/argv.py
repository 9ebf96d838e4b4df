"""Entrypoints as reviewers read them: each command's argv, one item a line, and argv-level diffs.

Ray runs an entrypoint with `/bin/sh -c` and argus builds it with shlex.join, so the string is
full of quoting that the shell removes before the program sees it. Reviewers approve what the
program receives, so that is what the views show; JSON keeps the exact string. Pure text in,
text out: the views share it and it knows nothing of plans.

Splitting follows POSIX sh's token rules for what entrypoints hold: quotes, backslashes,
comments and the operators that chain commands. Nothing is expanded (`${shared_root}`, `$HOME`
are shown as written), and `$(...)`, backquotes, here-documents and compound commands are not
parsed: their words are shown as sh's tokenizer cuts them, not as their commands.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass

OPERATORS = ("&&", "||", ";", "|", "&")
"""Longest first, so `&&` is never read as two `&`."""
ARG_INDENT = "  "
"""Arguments sit under their command's name, so `cd X && python3 ...` reads as two commands."""

LONG_ITEM = 400
"""Characters of one argv item shown whole; a longer one shows SHOWN_START of them and how long it is."""
SHOWN_START = 160
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DOUBLE_QUOTE_ESCAPES = ("$", "`", '"', "\\", "\n")
_PLAIN_RUN = re.compile(r"[^ \t\n'\"\\<>&|;#]+")
"""Characters sh takes as they are wherever they stand in a word: `split` takes a run of them at once,
not one at a time (a plan of thousands of jobs renders as many entrypoints)."""


@dataclass(frozen=True)
class Token:
    text: str
    operator: bool = False
    """A control operator (`&&`, `|`, ...) or a line break between commands; else an argv item."""


def argv_lines(entrypoint: str) -> list[str]:
    """One line per argv item or operator: command names flush, their arguments indented.

    An entrypoint sh could not split either (an unbalanced quote) is one line, as written."""
    tokens = split(entrypoint)
    if tokens is None:
        return [entrypoint if entrypoint.isprintable() else _json(entrypoint)]
    lines: list[str] = []
    named = False  # the command's name was seen: what follows are its arguments
    for token in tokens:
        if token.operator:
            # A line break needs no line of its own: the next command starts flush anyway.
            lines += [] if token.text == "\n" else [token.text]
            named = False
            continue
        lines.append((ARG_INDENT if named else "") + show_item(token.text))
        named = named or not _ASSIGNMENT.match(token.text)  # `A=1 cmd`: A=1 is not the command
    return lines


def argv_diff(before: str, after: str) -> list[tuple[str, str]]:
    """Rows of (mark, line): " " unchanged (shown once), "-" only before, "+" only after."""
    old, new = argv_lines(before), argv_lines(after)
    rows: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [(" ", line) for line in old[i1:i2]]
        else:
            rows += [("-", line) for line in old[i1:i2]] + [("+", line) for line in new[j1:j2]]
    return rows


def field_argv_diff(path: str, before: object, after: object) -> list[tuple[str, str]] | None:
    """The argv diff of a field diff that changed the entrypoint; None for any other field."""
    if path != "entrypoint" or not isinstance(before, str) or not isinstance(after, str):
        return None
    return argv_diff(before, after)


def show_item(item: str) -> str:
    """The item as it is, JSON-quoted where bare text would mislead: empty, edge spaces, line
    breaks and other invisible characters, a leading `"` (it would read as our quoting), or
    an item that would read as an operator (find's `';'`). An item too long to read (a program
    carried in `python3 -c`, an encoded spec) shows its start, its length and its digest."""
    ambiguous = not item or item != item.strip() or not item.isprintable() or item.startswith('"')
    shown = _json(item) if ambiguous or item in OPERATORS else item
    if len(shown) <= LONG_ITEM:
        return shown
    digest = hashlib.sha256(item.encode()).hexdigest()[:12]
    return f"{shown[:SHOWN_START]}… [{len(item)} characters in all, sha256 {digest}; --format json has it whole]"


def split(entrypoint: str) -> list[Token] | None:
    """The words and operators sh sees, quoting removed; None where sh stops with a syntax
    error (an unbalanced quote, a trailing backslash): the inputs shlex refuses too."""
    tokens: list[Token] = []
    word: str | None = None  # None between words; "" is a word begun, e.g. by ''
    i = 0
    while i < len(entrypoint):
        skipped = _skipped(entrypoint, i, word is not None)
        if skipped != i:
            i = skipped
            continue
        separator = _separator_at(entrypoint, i)
        if separator is None:
            piece, i = _word_piece(entrypoint, i)
            if piece is None:
                return None
            word = (word or "") + piece
            continue
        if word is not None:
            tokens.append(Token(word))
            word = None
        if separator not in (" ", "\t"):
            tokens.append(Token(separator, operator=True))
        i += len(separator)
    return tokens if word is None else [*tokens, Token(word)]


def _skipped(text: str, i: int, in_word: bool) -> int:
    """Past what sh drops before it splits: a line continuation, or a comment (which only the
    start of a word begins: `a#b` is one word); else i itself."""
    if text.startswith("\\\n", i):
        return i + 2
    if not in_word and text[i] == "#":
        return _line_end(text, i)
    return i


def _separator_at(text: str, i: int) -> str | None:
    if text[i] in " \t\n":
        return text[i]
    return next((op for op in OPERATORS if text.startswith(op, i)), None)


def _word_piece(text: str, i: int) -> tuple[str | None, int]:
    """The next piece of a word with its quoting removed, and where the rest begins."""
    char = text[i]
    if char == "'":
        end = text.find("'", i + 1)
        return (None, i) if end < 0 else (text[i + 1 : end], end + 1)
    if char == '"':
        return _double_quoted(text, i + 1)
    if char == "\\":
        return (None, i) if i + 1 == len(text) else (text[i + 1], i + 2)
    if char in "<>" and text[i + 1 : i + 2] in ("&", "|", "<", ">"):
        return text[i : i + 2], i + 2  # `2>&1`: the `&` of a redirection does not end a command
    plain = _PLAIN_RUN.match(text, i)
    return (plain.group(), plain.end()) if plain else (char, i + 1)


def _double_quoted(text: str, i: int) -> tuple[str | None, int]:
    """Inside "...", a backslash escapes only $ ` " \\ and a line break (POSIX)."""
    out: list[str] = []
    while i < len(text):
        char, following = text[i], text[i + 1 : i + 2]
        if char == '"':
            return "".join(out), i + 1
        if char == "\\" and following in _DOUBLE_QUOTE_ESCAPES:
            out.append("" if following == "\n" else following)
            i += 2
            continue
        out.append(char)
        i += 1
    return None, i


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end


def _json(text: str) -> str:
    """JSON-quoted, with every character that would not show escaped (bidi controls too)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in quoted)
