"""The notifier's ledger on the shared root: which event went to which channel, and how often it was tried.

    <shared_root>/.argus/serve/<workspace>/sent/<channel>/<key hash>.json   written once the channel accepted it
    <shared_root>/.argus/serve/<workspace>/sent/<channel>/<key hash>.tries  written before each try: tries so far

It lives beside the loop's lease, so a loop that restarts, or a standby that takes over, sees what
the one before it sent. File names are hashes: an event key (made of job names and submission
ids) never becomes a path. Every job on the cluster can write the shared root, so directories are
opened without following symlinks and files are read only when regular and small.

A job can write these files too: a forged `.json` would silence an event, a forged `.tries` give it
up. With ARGUS_ROOT_KEY set both carry an HMAC (state.root_key) over their fields, the workspace and
the channel; one without a valid HMAC is ignored (the event is sent; the notifier says so once).
Without the key a file that is there counts, as it always did.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from state.beneath import Refused, read_regular_at
from state.root_key import keyed, sign, verify

WORKSPACE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
CHANNEL = re.compile(r"^[0-9a-f]{16}$")
MAX_READ = 4096
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SENT, TRIES = "sent-event", "notify-tries"
"""The kinds of entry the HMACs say they are; the scope is `<workspace>/<channel>`."""


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class SentLedger:
    """One workspace's ledger. Every method may raise OSError (the shared root is gone, or a
    component of the path was replaced by a symlink): the notifier then does not send."""

    shared_root: str
    workspace: str

    def __post_init__(self) -> None:
        if not WORKSPACE.match(self.workspace):
            raise ValueError(f"not a workspace name: {self.workspace!r}")

    @property
    def path(self) -> Path:
        return Path(self.shared_root, *self._parts())

    def was_sent(self, channel: str, key: str) -> bool:
        return self.sent(channel, key) == "sent"

    def sent(self, channel: str, key: str) -> Literal["sent", "absent", "forged"]:
        """Whether the channel accepted the event; "forged": a file says so, but without a valid HMAC
        while a key is set (the event is to be sent)."""
        text = self._read(channel, f"{key_hash(key)}.json")
        if text is None:
            return "absent"
        if not keyed():
            return "sent"
        try:
            entry = json.loads(text)
        except (ValueError, RecursionError):
            return "forged"
        fields = {k: v for k, v in entry.items() if k != "sig"} if isinstance(entry, dict) else {}
        valid = fields.get("key") == key and fields.get("channel") == channel \
            and verify(SENT, self._scope(channel), fields, entry.get("sig"))
        return "sent" if valid else "forged"

    def check(self) -> None:
        """Raises OSError when the ledger's directory cannot be used (a component made a link, the root gone):
        then nothing can be sent, since nothing could be recorded as sent."""
        with _directory(self.shared_root, self._parts(), create=True):
            pass

    def ever_sent(self) -> bool:
        """Whether a channel ever took an event of the workspace: a loop's very first start has told nothing,
        so it sums up what ended before it (reconcile.serve.quiet). Stops at the first entry it finds."""
        try:
            with _directory(self.shared_root, self._parts(), create=False) as sent:
                channels = [entry.name for entry in os.scandir(sent) if CHANNEL.match(entry.name)]
                for channel in channels:
                    with _directory(self.shared_root, self._parts(channel), create=False) as folder, \
                            os.scandir(folder) as entries:
                        if any(entry.name.endswith(".json") for entry in entries):
                            return True
        except (OSError, ValueError):
            return False
        return False

    def entry_path(self, channel: str, key: str) -> Path:
        return Path(self.shared_root, *self._parts(channel), f"{key_hash(key)}.json")

    def tries(self, channel: str, key: str) -> int:
        """Tries so far; a file that is not a small count (with its HMAC, when a key is set) reads as none."""
        words = (self._read(channel, f"{key_hash(key)}.tries") or "").split()
        if not words or not words[0].isdigit() or len(words[0]) > 6:
            return 0
        tries = int(words[0])
        if keyed() and not (len(words) == 2 and verify(TRIES, self._scope(channel), {"key": key, "tries": tries},
                                                       words[1])):
            return 0
        return tries

    def count_try(self, channel: str, key: str, tries: int) -> None:
        signature = sign(TRIES, self._scope(channel), {"key": key, "tries": tries})
        self._write(channel, f"{key_hash(key)}.tries", f"{tries}{'' if signature is None else ' ' + signature}\n")

    def record_sent(self, channel: str, key: str, kind: str, time: str, label: str, sent_at: str) -> None:
        entry = {"key": key, "kind": kind, "time": time, "channel": channel, "label": label, "sent_at": sent_at}
        signature = sign(SENT, self._scope(channel), entry)
        entry = entry if signature is None else {**entry, "sig": signature}
        self._write(channel, f"{key_hash(key)}.json", json.dumps(entry, indent=2, sort_keys=True) + "\n")

    def _scope(self, channel: str) -> str:
        return f"{self.workspace}/{channel}"

    def _parts(self, channel: str | None = None) -> list[str]:
        if channel is not None and not CHANNEL.match(channel):
            raise ValueError(f"not a channel id: {channel!r}")
        return [".argus", "serve", self.workspace, "sent", *([channel] if channel else [])]

    def _read(self, channel: str, name: str) -> str | None:
        """The file's text when it is a regular file of at most MAX_READ bytes; None when absent
        (or a symlink: writing replaces the link itself, never its target)."""
        try:
            with _directory(self.shared_root, self._parts(channel), create=False) as parent:
                data = read_regular_at(parent, name, MAX_READ)
        except FileNotFoundError:
            return None
        except Refused:  # a link, a FIFO, a device, a big file: not argus's, so not sent
            return None
        return data.decode("utf-8", "replace") if data is not None else None

    def _write(self, channel: str, name: str, text: str) -> None:
        """Atomic: a temporary file in the same directory, renamed over the name."""
        with _directory(self.shared_root, self._parts(channel), create=True) as parent:
            temporary = f".{name}.{os.getpid()}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o644, dir_fd=parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)


@contextlib.contextmanager
def _directory(root: str, parts: list[str], create: bool) -> Iterator[int]:
    """A descriptor of root/parts..., no component below the root followed if it is a symlink.
    The root itself is the operator's setting (a mount point may well be a symlink)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            child = os.open(part, DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)
