"""The probe's directory on the shared root, argus's side: made with argus's file in it, the node's answer read
back, and everything argus made removed again (the directory, and `.argus/doctor` or `.argus` if the probe made
them), so the root is left as the probe found it. Nothing is followed if it is a link (state.beneath)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from state.beneath import NotBeneath, made_dir, opened_dir, read_regular, remove_beneath, stat_beneath
from state.doctor.script import FROM_ARGUS, FROM_NODE, PROBE_DIR
from state.files import replace_in

ANSWER_CAP = 256
"""Bytes of the node's answer argus reads: a nonce and a uid."""
OPEN_TO_JOBS = 0o777
"""The probe's own directory: a job running as another user than argus must be able to answer in it."""


class ProbePlace:
    """`<root>/.argus/doctor/<nonce>/` for one probe."""

    def __init__(self, root: str, nonce: str):
        self.root = root
        self.nonce = nonce
        self.rel = f"{PROBE_DIR}/{nonce}"
        self.made: list[str] = []
        """The directories this probe made, outermost first: removed again, innermost first."""

    def prepare(self) -> None:
        """The directory, open to the job's user, holding argus's file (the nonce)."""
        had_root = os.path.isdir(self.root)
        if not had_root:  # a relative root (the workspace's own folder): the doctor checks an absolute one first
            os.makedirs(self.root)
        self.made = [rel for rel in (".argus", PROBE_DIR) if stat_beneath(self.root, rel) is None]
        with made_dir(self.root, self.rel) as folder:
            os.fchmod(folder, OPEN_TO_JOBS)
            replace_in(folder, FROM_ARGUS, self.nonce + "\n")
        self.made.append(self.rel)
        if not had_root:
            self.made.insert(0, ".")

    def answer(self) -> str | None:
        """What the node wrote beside argus's file, as argus reads it here; None when argus finds nothing."""
        try:
            data = read_regular(self.root, f"{self.rel}/{FROM_NODE}", ANSWER_CAP)
        except NotBeneath:
            return None
        return None if data is None else data.decode("ascii", errors="replace").strip()

    def remove(self) -> list[str]:
        """Everything this probe made; returns what could not be removed (left for the message)."""
        left = []
        if self.rel in self.made:
            try:
                remove_beneath(self.root, self.rel, f".{self.nonce}.removing")
            except FileNotFoundError:
                pass
            except OSError as err:
                left.append(f"{self.root}/{self.rel} ({err.strerror or err})")
        for rel in reversed(self.made[:-1]):
            _rmdir_if_empty(self.root, rel)
        return left


def _rmdir_if_empty(root: str, rel: str) -> None:
    """A directory the probe made, unless something else now lives in it (another probe, argus's state)."""
    if rel == ".":
        with contextlib.suppress(OSError):
            os.rmdir(root)
        return
    parent, name = str(Path(rel).parent), Path(rel).name
    with contextlib.suppress(OSError), opened_dir(root, parent) as folder:
        os.rmdir(name, dir_fd=folder)
