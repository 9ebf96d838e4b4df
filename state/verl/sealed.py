"""A verl job's paths into argus's data sets and models (`${dataset:gsm8k}/train.parquet`, `${model:qwen}`):
filled before Hydra composes them, and checked against the version's sealed manifest, never its files.

A sealed version's manifest (.argus-input.json) already says which files it holds and what is in them (the
seal step wrote a parquet's columns and a model's config.json as `facts`): the checks read those, so a plan
opens no file of a data set however large, and a path into it that the manifest does not list is refused at
the field that names it. A version not sealed yet has nothing to check: its jobs wait for it (the planner
says so), and its files are checked by the plan after it is sealed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from specs.load import input_refs
from state.observed import InputManifest, InputState

STAND_IN = "/argus-stand-in"
"""Where input_refs.stand_ins puts an input not sealed yet: no path on any machine."""
FILES_SHOWN = 12


@dataclass(frozen=True)
class Inside:
    """A path into one input: its address (`dataset.gsm8k`), what the observer saw of it, the path within."""

    address: str
    state: InputState | None
    rel: str
    """Inside the version's directory, `/`-separated; "" for the version itself."""

    @property
    def manifest(self) -> InputManifest | None:
        return self.state.manifest if self.state is not None else None

    def file(self, name: str = "") -> str:
        """The manifest's name of a file at `name` beneath this path."""
        return "/".join(part for part in (self.rel, name) if part)

    def holds_file(self, name: str = "") -> bool:
        return self.manifest is not None and any(f.path == self.file(name) for f in self.manifest.files)

    def holds_dir(self) -> bool:
        """The version itself, or a directory some manifest file is beneath."""
        return self.manifest is not None and (self.rel == "" or any(
            f.path.startswith(self.rel + "/") for f in self.manifest.files))

    def columns(self) -> set[str] | None:
        """The file's columns as the seal step read them (parquet schema, a json record's keys); None if unsaid."""
        columns = self._facts(self.file()).get("columns")
        if isinstance(columns, list) and all(isinstance(c, str) for c in columns):
            return set(columns)
        return None

    def config(self) -> dict[str, Any] | None:
        """config.json beneath this path as the seal step read it, or None when the manifest has none."""
        config = self._facts(self.file("config.json")).get("config")
        return config if isinstance(config, dict) else None

    def not_listed(self) -> str:
        """The error for a path into a sealed version that its manifest does not hold."""
        assert self.manifest is not None
        names = [f.path for f in self.manifest.files[:FILES_SHOWN]]
        more = len(self.manifest.files) - len(names)
        listing = ", ".join(names) + (f" and {more} more" if more > 0 else "") or "none"
        return f"{self.rel or '.'} is not in {self.address}'s manifest (its files: {listing})"

    def not_ready(self) -> str:
        why = f": {self.state.problem}" if self.state is not None and self.state.problem else ""
        return (f"{self.address} is not sealed yet{why}; the job waits for it, and its files are checked by the plan "
                "once it is ready")

    def _facts(self, name: str) -> dict[str, Any]:
        facts = self.manifest.facts.get(name) if self.manifest is not None else None
        return facts if isinstance(facts, dict) else {}


@dataclass(frozen=True)
class JobInputs:
    """The inputs as the observer saw them (ObservedState.inputs, by address), on the job's shared root."""

    states: Mapping[str, InputState] = field(default_factory=dict)
    shared_root: str = ""

    def fill(self, text: str) -> str:
        """Each `${dataset:...}`/`${model:...}` replaced by its sealed version's directory, or (not sealed: no
        directory to name yet) by a stand-in path of its shape: Hydra never sees one as its own interpolation."""
        for kind, name in input_refs.references(text):
            text = text.replace(input_refs.placeholder(kind, name), self._where(kind, name))
        return text

    def inside(self, path: str) -> Inside | None:
        """The input a path lies in (filled by `fill`, or spelt out under the shared root), or None."""
        posix = PurePosixPath(path)
        bases = {self._where(*address.split(".", 1)): address for address in self.states if "." in address}
        if posix.is_relative_to(STAND_IN) and len(posix.parts) > 3:  # /argus-stand-in/datasets/NAME[/...]
            kind = posix.parts[2].removesuffix("s")
            bases[_stand_in(kind, posix.parts[3])] = f"{kind}.{posix.parts[3]}"
        for base, address in bases.items():
            if posix.is_relative_to(base):
                rel = posix.relative_to(base).as_posix()
                if ".." in rel.split("/"):
                    return None  # climbing out is no path into the input (the loader refuses one after a ref)
                return Inside(address, self.states.get(address), "" if rel == "." else rel)
        return None

    def _where(self, kind: str, name: str) -> str:
        state = self.states.get(f"{kind}.{name}")
        if state is not None and state.manifest is not None and state.rel and self.shared_root:
            return str(PurePosixPath(self.shared_root) / state.rel)
        return _stand_in(kind, name)


def _stand_in(kind: str, name: str) -> str:
    return input_refs.stand_ins(input_refs.placeholder(kind, name))
